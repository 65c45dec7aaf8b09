/**
 * A local stand-in for the X API v2, written from X's documentation: X's answer shapes (`data`,
 * `includes`, `meta`, partial `errors`), its problem documents, and per-family rate-limit windows
 * with `x-rate-limit-*` headers and 429s. Tests and benches start one with `startFakeX()`, fill
 * `state` (users, tweets) and read `requests` (what reached it, by family and status).
 *
 * Extra `routes` are tried first (the filtered stream lives in ./stream.ts, the X Activity API in
 * ./activity.ts; a test may add a
 * route that fails or delays). `latencyMs` delays every answer (to overlap concurrent calls).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { send, unauthorized } from './format';
import { FakeXLimits, type XFamily } from './limits';
import { restRoute, type FakeXContext, type FakeXRoute } from './routes';
import { FakeXState } from './state';

export * from './state';
export * from './limits';
export { compileQuery, FAKE_X_QUERY_MAX_LENGTH } from './query';
export { send as sendXJson, invalidRequest as sendXInvalidRequest, resourceProblem } from './format';
export type { FakeXContext, FakeXRoute } from './routes';
export { createFakeStream, streamRoutes, type FakeStream, type FakeStreamOptions, type FakeRule } from './stream';
export {
  createFakeActivity,
  FAKE_XAA_EVENT_TYPES,
  type FakeActivity,
  type FakeActivityOptions,
  type FakeSubscription,
} from './activity';

export interface FakeXRequest {
  family: XFamily | 'other';
  status: number;
  method: string;
  path: string;
  params: URLSearchParams;
}

export class FakeXRequests {
  readonly log: FakeXRequest[] = [];

  /** Requests answered, optionally of one family and/or status. */
  count(filter: { family?: XFamily | 'other'; status?: number } = {}): number {
    return this.log.filter(
      (r) =>
        (filter.family === undefined || r.family === filter.family) &&
        (filter.status === undefined || r.status === filter.status),
    ).length;
  }

  /** { family: { status: n } } */
  byFamily(): Record<string, Record<number, number>> {
    const out: Record<string, Record<number, number>> = {};
    for (const r of this.log) {
      const f = (out[r.family] ??= {});
      f[r.status] = (f[r.status] ?? 0) + 1;
    }
    return out;
  }

  clear(): void {
    this.log.length = 0;
  }
}

export interface FakeXOptions {
  limits?: Partial<Record<XFamily, number>>;
  /** length of a rate-limit window; default 15 minutes */
  windowMs?: number;
  routes?: FakeXRoute[];
  /** the only accepted bearer token; default: any */
  bearerToken?: string;
  latencyMs?: number;
}

export interface FakeX {
  url: string;
  state: FakeXState;
  limits: FakeXLimits;
  requests: FakeXRequests;
  /** delay before every answer, changeable while running */
  latencyMs: number;
  stop(): Promise<void>;
}

function logAnswers(
  res: http.ServerResponse,
  req: http.IncomingMessage,
  url: URL,
  limits: FakeXLimits,
  requests: FakeXRequests,
) {
  const writeHead = res.writeHead.bind(res) as (...a: unknown[]) => http.ServerResponse;
  let logged = false;
  res.writeHead = (...args: unknown[]) => {
    if (!logged) {
      logged = true;
      requests.log.push({
        family: limits.familyOf.get(res) ?? 'other',
        status: args[0] as number,
        method: req.method ?? 'GET',
        path: url.pathname,
        params: url.searchParams,
      });
    }
    return writeHead(...args);
  };
}

export async function startFakeX(opts: FakeXOptions = {}): Promise<FakeX> {
  const state = new FakeXState();
  const limits = new FakeXLimits(opts.limits, opts.windowMs);
  const requests = new FakeXRequests();
  const ctx: FakeXContext = { state, limits };
  const routes = [...(opts.routes ?? []), restRoute];
  const server = http.createServer();
  const fake: FakeX = { url: '', state, limits, requests, latencyMs: opts.latencyMs ?? 0, stop };
  server.on('request', (req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake-x');
    logAnswers(res, req, url, limits, requests);
    void (async () => {
      if (fake.latencyMs > 0) await new Promise((r) => setTimeout(r, fake.latencyMs));
      const auth = req.headers.authorization ?? '';
      if (!/^Bearer .+/.test(auth) || (opts.bearerToken !== undefined && auth !== `Bearer ${opts.bearerToken}`)) {
        unauthorized(res);
        return;
      }
      for (const route of routes) if (await route(req, res, url, ctx)) return;
      send(res, 404, {
        title: 'Not Found Error',
        type: 'about:blank',
        status: 404,
        detail: `no route ${url.pathname}`,
      });
    })().catch((err: unknown) => {
      if (!res.headersSent) send(res, 500, { title: 'Internal Error', status: 500, detail: String(err) });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  async function stop(): Promise<void> {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  return fake;
}
