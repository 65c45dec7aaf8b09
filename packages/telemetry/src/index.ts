/**
 * OpenTelemetry traces for every service. Off unless OTEL_EXPORTER_OTLP_ENDPOINT is
 * set: then `startTelemetry` (called by runService in @sts/common) registers a tracer provider
 * that exports spans by OTLP over HTTP (JSON, `<endpoint>/v1/traces`), the AsyncLocalStorage
 * context manager and the W3C trace-context propagator. While it is off every helper here is a
 * single `enabled` check: no span, no header, no allocation on the hot paths.
 *
 * The traces:
 * - gateway → read-api: packages/http1's upstream client opens a CLIENT span per forwarded call
 *   and writes its `traceparent` into the request head; read-api's server continues it
 *   (`traceIncoming`, a SERVER span);
 * - poller → RabbitMQ → webhook attempt: packages/messaging's publisher opens a PRODUCER span and
 *   puts `traceparent` in the message's AMQP headers; its consumer continues it (CONSUMER span
 *   around the handler), under which the dispatcher's delivery opens the `webhook attempt` span.
 * Every log line written inside a span carries its `trace_id` and `span_id` (packages/common's
 * logger reads the active span).
 */
import { context, propagation, SpanKind, SpanStatusCode, trace, type Attributes, type Span } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';

export { SpanKind, type Span };

const TRACER = '@sts/telemetry';
let provider: TracerProvider | null = null;

export interface Telemetry {
  /** exports what is buffered and stops the provider (a service's stop) */
  shutdown(): Promise<void>;
}

/** True once startTelemetry registered a provider (OTEL_EXPORTER_OTLP_ENDPOINT was set). */
export function tracingEnabled(): boolean {
  return provider !== null;
}

/**
 * Starts tracing for this process when `endpoint` (OTEL_EXPORTER_OTLP_ENDPOINT, e.g.
 * `http://otel-collector:4318`) is set; returns null and changes nothing otherwise.
 */
export function startTelemetry(options: { serviceName: string; endpoint?: string | undefined }): Telemetry | null {
  if (!options.endpoint || provider !== null) return null;
  const url = `${options.endpoint.replace(/\/+$/, '')}/v1/traces`;
  const started = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': options.serviceName }),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url }), scheduledDelayMillis: 500 })],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(started);
  provider = started;
  return {
    async shutdown() {
      if (provider !== started) return;
      provider = null;
      await started.shutdown().catch(() => undefined);
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}

/** Starts a span under the active context (or under `parent` headers when given). */
export function startSpan(
  name: string,
  kind: SpanKind,
  attributes: Attributes = {},
  parent?: Record<string, unknown>,
): Span {
  const ctx = parent ? propagation.extract(context.active(), parent) : context.active();
  return trace.getTracer(TRACER).startSpan(name, { kind, attributes }, ctx);
}

/** Runs `fn` with `span` active (logs and child spans see it). */
export function withSpan<T>(span: Span, fn: () => T): T {
  return context.with(trace.setSpan(context.active(), span), fn);
}

/** Ends `span`, marking it failed when `error` is given. */
export function endSpan(span: Span, error?: Error | string): void {
  if (error !== undefined)
    span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : error });
  span.end();
}

/** The W3C `traceparent` (and `tracestate`) of `span`, as a header object. */
export function traceHeaders(span: Span): Record<string, string> {
  const out: Record<string, string> = {};
  propagation.inject(trace.setSpan(context.active(), span), out);
  return out;
}

/** The active span's trace and span ids, for log lines; null outside a recorded span. */
export function activeTraceIds(): { trace_id: string; span_id: string } | null {
  if (provider === null) return null;
  const span = trace.getActiveSpan();
  if (!span) return null;
  const { traceId, spanId, traceFlags } = span.spanContext();
  if (!traceFlags && traceId === '00000000000000000000000000000000') return null;
  return { trace_id: traceId, span_id: spanId };
}

/**
 * Wraps a node:http request handler: continues the caller's trace (`traceparent` header) in a
 * SERVER span named `<METHOD> <route>` that ends when the answer is finished. The handler as is
 * while tracing is off.
 */
export function traceIncoming<Req extends { method?: string; url?: string; headers: Record<string, unknown> }, Res>(
  name: string,
  handler: (req: Req, res: Res) => void,
  finished: (res: Res, done: (status: number) => void) => void,
): (req: Req, res: Res) => void {
  return (req, res) => {
    if (provider === null) return handler(req, res);
    const span = startSpan(
      `${name} ${req.method ?? 'GET'}`,
      SpanKind.SERVER,
      { 'http.request.method': req.method ?? 'GET' },
      req.headers,
    );
    finished(res, (status) => {
      span.setAttribute('http.response.status_code', status);
      endSpan(span, status >= 500 ? new Error(`HTTP ${status}`) : undefined);
    });
    withSpan(span, () => handler(req, res));
  };
}

/**
 * Runs `fn` in a span named `name` (a child of the active one), ending it when the promise
 * settles; `onResult` may add attributes from the result. Just `fn()` while tracing is off.
 */
export async function inSpan<T>(
  name: string,
  kind: SpanKind,
  attributes: Attributes,
  fn: () => Promise<T>,
  onResult?: (span: Span, result: T) => void,
): Promise<T> {
  if (provider === null) return fn();
  const span = startSpan(name, kind, attributes);
  try {
    const result = await withSpan(span, fn);
    onResult?.(span, result);
    endSpan(span);
    return result;
  } catch (err) {
    endSpan(span, err instanceof Error ? err : String(err));
    throw err;
  }
}
