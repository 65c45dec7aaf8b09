import http from 'node:http';
import type { AddressInfo } from 'node:net';
import client from 'prom-client';

export type ReadinessCheck = () => Promise<void>;

export interface OpsServerOptions {
  port: number;
  host?: string;
  /** named dependency checks for /readyz; each throws when its dependency does not answer */
  checks: Record<string, ReadinessCheck>;
  registry: client.Registry;
}

/** Creates a Prometheus registry with the default process metrics and the service label. */
export function createMetricsRegistry(service: string): client.Registry {
  const registry = new client.Registry();
  registry.setDefaultLabels({ service });
  client.collectDefaultMetrics({ register: registry });
  return registry;
}

/** Runs every readiness check with a time limit; returns a map of name to "ok" or the error. */
export async function runChecks(
  checks: Record<string, ReadinessCheck>,
  timeoutMs = 2000,
): Promise<{ ok: boolean; checks: Record<string, string> }> {
  const entries = await Promise.all(
    Object.entries(checks).map(async ([name, check]) => {
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          check(),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
          }),
        ]);
        return [name, 'ok'] as const;
      } catch (err) {
        return [name, err instanceof Error ? err.message : String(err)] as const;
      } finally {
        clearTimeout(timer);
      }
    }),
  );
  return { ok: entries.every(([, v]) => v === 'ok'), checks: Object.fromEntries(entries) };
}

/**
 * Answers GET /healthz, /readyz and /metrics. Services without an HTTP API of their own (poller,
 * dispatcher) run this; HTTP services mount the same handler in front of their routes.
 */
export function opsHandler(options: Omit<OpsServerOptions, 'port' | 'host'>) {
  return async (req: http.IncomingMessage, res: http.ServerResponse): Promise<boolean> => {
    const url = req.url ?? '/';
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    if (url === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      return true;
    }
    if (url === '/readyz') {
      const result = await runChecks(options.checks);
      res
        .writeHead(result.ok ? 200 : 503, { 'content-type': 'application/json' })
        .end(JSON.stringify({ status: result.ok ? 'ok' : 'unavailable', checks: result.checks }));
      return true;
    }
    if (url === '/metrics') {
      const body = await options.registry.metrics();
      res.writeHead(200, { 'content-type': options.registry.contentType }).end(body);
      return true;
    }
    return false;
  };
}

export async function startOpsServer(
  options: OpsServerOptions,
): Promise<{ server: http.Server; port: number; close(): Promise<void> }> {
  const handle = opsHandler(options);
  const server = http.createServer((req, res) => {
    handle(req, res)
      .then((handled) => {
        if (!handled)
          res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found","code":"NOT_FOUND"}');
      })
      .catch(() => {
        if (!res.headersSent) res.writeHead(500).end();
      });
  });
  await new Promise<void>((resolve) => server.listen(options.port, options.host ?? '0.0.0.0', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    server,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
