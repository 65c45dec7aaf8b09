import http from 'node:http';
import type net from 'node:net';
import type { AddressInfo } from 'node:net';
import client from 'prom-client';
import { errorMessage } from '@sts/core';

export type ReadinessCheck = () => Promise<void>;

/** Where a service is in its life: /readyz answers 503 unless it is `ready`. */
export type ServicePhase = 'starting' | 'ready' | 'stopping';

export interface OpsServerOptions {
  port: number;
  host?: string;
  /** named dependency checks for /readyz; each throws when its dependency does not answer */
  checks: Record<string, ReadinessCheck>;
  registry: client.Registry;
  /** the service's phase; /readyz runs the checks only while it is `ready` (default: always ready) */
  phase?: () => ServicePhase;
  /** told about a failed check (the error text goes to the log, never into the /readyz body) */
  onCheckFailed?: (name: string, error: string) => void;
}

/** Creates a Prometheus registry with the default process metrics and the service label. */
export function createMetricsRegistry(service: string): client.Registry {
  const registry = new client.Registry();
  registry.setDefaultLabels({ service });
  client.collectDefaultMetrics({ register: registry });
  return registry;
}

/**
 * Runs every readiness check with a time limit; returns a map of name to "ok" or "failed". The
 * /readyz body carries only these words: error texts name hosts and internals, so they go to
 * `onFailed` (the log) instead.
 */
export async function runChecks(
  checks: Record<string, ReadinessCheck>,
  timeoutMs = 2000,
  onFailed: (name: string, error: string) => void = () => undefined,
): Promise<{ ok: boolean; checks: Record<string, 'ok' | 'failed'> }> {
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
        onFailed(name, errorMessage(err));
        return [name, 'failed'] as const;
      } finally {
        clearTimeout(timer);
      }
    }),
  );
  return { ok: entries.every(([, v]) => v === 'ok'), checks: Object.fromEntries(entries) };
}

interface OpsAnswer {
  status: number;
  contentType: string;
  body: string;
}

const JSON_CONTENT = 'application/json';

/**
 * The answer to GET/HEAD /healthz, /readyz or /metrics, or null for anything else. /readyz:
 * `{"status":"ok"|"unavailable"|"starting"|"stopping","checks":{"<name>":"ok"|"failed"}}`.
 */
function opsAnswers(
  options: Omit<OpsServerOptions, 'port' | 'host'>,
): (method: string, path: string) => Promise<OpsAnswer> | null {
  return (method, path) => {
    if (method !== 'GET' && method !== 'HEAD') return null;
    if (path === '/healthz')
      return Promise.resolve({ status: 200, contentType: JSON_CONTENT, body: '{"status":"ok"}' });
    if (path === '/readyz') {
      const phase = options.phase?.() ?? 'ready';
      if (phase !== 'ready')
        return Promise.resolve({
          status: 503,
          contentType: JSON_CONTENT,
          body: JSON.stringify({ status: phase, checks: {} }),
        });
      return runChecks(options.checks, 2000, options.onCheckFailed).then((result) => ({
        status: result.ok ? 200 : 503,
        contentType: JSON_CONTENT,
        body: JSON.stringify({ status: result.ok ? 'ok' : 'unavailable', checks: result.checks }),
      }));
    }
    if (path === '/metrics')
      return options.registry
        .metrics()
        .then((body) => ({ status: 200, contentType: options.registry.contentType, body }));
    return null;
  };
}

/**
 * Answers GET /healthz, /readyz and /metrics on the ops server (startOpsServer). Public ports
 * never serve these paths: every service runs its own ops server on OPS_PORT (runService).
 */
function opsHandler(options: Omit<OpsServerOptions, 'port' | 'host'>) {
  const answer = opsAnswers(options);
  return async (req: http.IncomingMessage, res: http.ServerResponse): Promise<boolean> => {
    const pending = answer(req.method ?? 'GET', req.url ?? '/');
    if (pending === null) return false;
    const { status, contentType, body } = await pending;
    res.writeHead(status, { 'content-type': contentType }).end(body);
    return true;
  };
}

/**
 * Starts `server` listening on port/host; resolves with the bound port (useful with port 0),
 * rejects when it cannot bind (port taken, bad address).
 */
export function listenOn(server: net.Server, port: number, host = '0.0.0.0'): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
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
  const port = await listenOn(server, options.port, options.host);
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
