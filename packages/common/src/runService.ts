/**
 * One way to run a service process. Every service's `src/main.ts` is a ServiceDefinition handed
 * to runService(), which, in this order:
 *
 * 1. installs the SIGTERM/SIGINT handlers, before anything waits on a backend (Node as PID 1
 *    ignores signals it has no handler for, so a container would otherwise hang until SIGKILL);
 * 2. parses the environment (a ConfigError prints its message and exits 2);
 * 3. starts the ops server on OPS_PORT (`<name> starting` line with its opsPort): /healthz answers
 *    at once, /readyz says `starting` (503) until the service has started, then runs its checks
 *    (`ok`/`failed` per dependency; the error text goes to the log only);
 * 4. builds and starts the service (`definition.start`), printing `<started line>` with the
 *    ports; a failure prints `<name> failed to start: <message>` and exits 1;
 * 5. on a signal: /readyz says `stopping`, the service's stop() finishes its work in flight, the
 *    ops server closes, and the process exits 0 — unless STOP_DEADLINE_MS passes first (exit 3)
 *    or stop() fails (exit 1). A signal during start makes `untilStopped` waits reject (a service
 *    waiting for a backend gives up at once, exit 0); a start that still finishes is stopped
 *    normally.
 *
 * The start, stopping, stopped lines are JSON on stdout whatever LOG_LEVEL says: supervisors,
 * `npm start` and tests wait for them.
 */
import { z } from 'zod';
import type client from 'prom-client';
import { ConfigError, envFields } from './env';
import { startTelemetry } from '@sts/telemetry';
import { createLogger, type Logger } from './logger';
import { createMetricsRegistry, startOpsServer, type ReadinessCheck, type ServicePhase } from './ops';
import { errorMessage } from '@sts/core';

/** Exit codes, the same for every service. */
export const EXIT_CODES = {
  /** stopped on SIGTERM/SIGINT after finishing its work */
  stopped: 0,
  /** could not start (backend refused, port taken), or stop() failed */
  failed: 1,
  /** the environment is invalid (every problem named on stderr) */
  config: 2,
  /** stop() did not finish within STOP_DEADLINE_MS; work in flight may be cut */
  stopDeadline: 3,
} as const;

/** The environment every service shares for running: its ops port and its stop deadline. */
export function opsEnv(defaultPort: number) {
  return {
    /** /healthz, /readyz, /metrics: internal only, never a public port */
    OPS_PORT: envFields.port(defaultPort),
    /** the address the ops server listens on */
    OPS_HOST: z.string().default('0.0.0.0'),
    /** longest a graceful stop may take before the process exits anyway (code 3) */
    STOP_DEADLINE_MS: z.coerce.number().int().min(100).max(600_000).default(25_000),
    /** the lowest level written (JSON lines on stdout) */
    LOG_LEVEL: envFields.logLevel(),
    /** OTLP/HTTP collector (e.g. http://otel-collector:4318): traces are exported there; unset: off */
    OTEL_EXPORTER_OTLP_ENDPOINT: envFields.url(['http', 'https']).optional(),
  };
}

export interface RunEnv {
  OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined;
  OPS_PORT: number;
  /** the address the ops server listens on */
  OPS_HOST: string;
  STOP_DEADLINE_MS: number;
  /** the lowest level written (JSON lines on stdout) */
  LOG_LEVEL: string;
}

export class StopRequestedError extends Error {
  override name = 'StopRequestedError';
  constructor() {
    super('stop requested while starting');
  }
}

export interface ServiceContext {
  logger: Logger;
  /** the service's Prometheus registry, served on /metrics */
  registry: client.Registry;
  /** aborted when a stop signal arrives */
  stopSignal: AbortSignal;
  /** `promise`, or a StopRequestedError as soon as a stop signal arrives: wrap waits on backends in start */
  untilStopped: <T>(promise: Promise<T>) => Promise<T>;
}

export interface StartedService {
  /** /readyz dependency checks (the service is ready when every one resolves) */
  checks: Record<string, ReadinessCheck>;
  /** fields of the started line, e.g. `{ port }` of a public listener */
  info?: Record<string, unknown>;
  /** finishes the work in flight and closes connections */
  stop(): Promise<void>;
}

export interface ServiceDefinition<E extends RunEnv> {
  name: string;
  loadEnv(source: NodeJS.ProcessEnv): E;
  start(env: E, context: ServiceContext): Promise<StartedService>;
  /** the started line's message; default `<name> started` */
  startedMessage?: string;
}

/** The ops server of a service: /healthz, /readyz (its checks, in its phase), /metrics on OPS_PORT. */
function startServiceOps(
  env: RunEnv,
  logger: Logger,
  registry: client.Registry,
  checks: Record<string, ReadinessCheck>,
  phase: () => ServicePhase,
) {
  return startOpsServer({
    port: env.OPS_PORT,
    host: env.OPS_HOST,
    registry,
    checks,
    phase,
    onCheckFailed: (check, error) => logger.warn('readiness check failed', { check, error }),
  });
}

/**
 * Under `--enable-source-maps` (how the image runs the bundles) node parses a file's source map at
 * the first stack trace that passes through it: for a service bundle that is tens of megabytes of
 * mappings and blocks the event loop for about 100 ms, and the first stack trace often comes in the
 * middle of traffic (an idle keep-alive socket closed with an error). One stack trace here moves
 * that parse to before the service starts.
 */
export function warmSourceMaps(): void {
  if (process.sourceMapsEnabled) void new Error('source map warm-up').stack;
}

export function runService<E extends RunEnv>(definition: ServiceDefinition<E>): void {
  const { name } = definition;
  const line = (level: string, message: string, meta: Record<string, unknown> = {}) =>
    process.stdout.write(
      `${JSON.stringify({ level, message, service: name, ...meta, timestamp: new Date().toISOString() })}\n`,
    );
  const abort = new AbortController();
  let phase: ServicePhase = 'starting';
  let stopRequested: string | undefined;
  let onStop: ((signal: string) => void) | undefined;
  const handle = (signal: string) => {
    if (stopRequested) return;
    stopRequested = signal;
    abort.abort();
    if (onStop) onStop(signal);
    else {
      // before anything was built (reading the environment): nothing to finish
      line('info', `${name} stopped`, { signal });
      process.exit(EXIT_CODES.stopped);
    }
  };
  process.on('SIGTERM', () => handle('SIGTERM'));
  process.on('SIGINT', () => handle('SIGINT'));

  let env: E;
  try {
    env = definition.loadEnv(process.env);
  } catch (err) {
    process.stderr.write(`${name}: ${errorMessage(err)}\n`);
    process.exit(err instanceof ConfigError ? EXIT_CODES.config : EXIT_CODES.failed);
  }
  warmSourceMaps();
  // OpenTelemetry traces when OTEL_EXPORTER_OTLP_ENDPOINT is set (@sts/telemetry); off otherwise
  const telemetry = startTelemetry({ serviceName: name, endpoint: env.OTEL_EXPORTER_OTLP_ENDPOINT });
  const logger = createLogger({ service: name, level: env.LOG_LEVEL });
  const registry = createMetricsRegistry(name);
  const context: ServiceContext = {
    logger,
    registry,
    stopSignal: abort.signal,
    untilStopped: (promise) =>
      new Promise((resolve, reject) => {
        if (abort.signal.aborted) reject(new StopRequestedError());
        abort.signal.addEventListener('abort', () => reject(new StopRequestedError()), { once: true });
        promise.then(resolve, reject);
      }),
  };
  // filled once the service has started; /readyz reads it on every request
  const checks: Record<string, ReadinessCheck> = {};
  const failStart = (err: unknown): never => {
    process.stderr.write(`${name} failed to start: ${errorMessage(err)}\n`);
    process.exit(EXIT_CODES.failed);
  };

  void (async () => {
    const ops = await startServiceOps(env, logger, registry, checks, () => phase).catch(failStart);
    line('info', `${name} starting`, { opsPort: ops.port });
    // (through a promise, so a start that throws synchronously is a start failure too)
    const starting = Promise.resolve().then(() => definition.start(env, context));

    const stop = async (signal: string) => {
      phase = 'stopping';
      line('info', `${name} stopping`, { signal });
      const deadline = setTimeout(() => {
        line('error', `${name} did not stop within ${env.STOP_DEADLINE_MS} ms`, { signal });
        process.exit(EXIT_CODES.stopDeadline);
      }, env.STOP_DEADLINE_MS);
      let code: number = EXIT_CODES.stopped;
      try {
        const running = await starting.catch((err: unknown) => {
          if (err instanceof StopRequestedError) return undefined;
          throw err;
        });
        await running?.stop();
      } catch (err) {
        logger.error(`${name} did not stop cleanly`, { err: errorMessage(err) });
        code = EXIT_CODES.failed;
      }
      await ops.close();
      await telemetry?.shutdown();
      clearTimeout(deadline);
      line('info', `${name} stopped`, { signal });
      process.exit(code);
    };
    onStop = (signal) => void stop(signal);
    if (stopRequested) {
      onStop(stopRequested);
      return;
    }

    let running: StartedService;
    try {
      running = await starting;
    } catch (err) {
      if (stopRequested) return; // the stop path reports and exits
      await ops.close();
      return failStart(err);
    }
    if (stopRequested) return;
    Object.assign(checks, running.checks);
    phase = 'ready';
    line('info', definition.startedMessage ?? `${name} started`, { ...running.info, opsPort: ops.port });
  })();
}

/** A service started in this process by startInProcess(). */
export interface InProcessService {
  /** the started line's fields (e.g. `port`) */
  info: Record<string, unknown>;
  opsPort: number;
  /** stops the service (its stop()), then its ops server */
  stop(): Promise<void>;
}

/**
 * Starts a ServiceDefinition inside this process, with its ops server, as runService does but
 * without signal handlers or process exits: for tests and tools that run several services in one
 * process. `source` is the environment to parse (a ConfigError is thrown, not turned into exit 2).
 */
export async function startInProcess<E extends RunEnv>(
  definition: ServiceDefinition<E>,
  source: NodeJS.ProcessEnv,
): Promise<InProcessService> {
  const env = definition.loadEnv(source);
  const logger = createLogger({ service: definition.name, level: env.LOG_LEVEL });
  const registry = createMetricsRegistry(definition.name);
  const abort = new AbortController();
  const checks: Record<string, ReadinessCheck> = {};
  let phase: ServicePhase = 'starting';
  const ops = await startServiceOps(env, logger, registry, checks, () => phase);
  let running: StartedService;
  try {
    running = await definition.start(env, {
      logger,
      registry,
      stopSignal: abort.signal,
      untilStopped: (promise) => promise,
    });
  } catch (err) {
    await ops.close();
    throw err;
  }
  Object.assign(checks, running.checks);
  phase = 'ready';
  let stopping: Promise<void> | undefined;
  return {
    info: running.info ?? {},
    opsPort: ops.port,
    stop: () =>
      (stopping ??= (async () => {
        phase = 'stopping';
        abort.abort();
        try {
          await running.stop();
        } finally {
          await ops.close();
        }
      })()),
  };
}
