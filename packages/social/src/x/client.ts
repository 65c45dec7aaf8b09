/**
 * The one way X is called: `request()` asks the governor, sends, reports the answer's rate-limit
 * headers back to it, counts the request and maps X's failures:
 *   governor refusal, 429        SourceBusyError (retry after the family's reset)
 *   401 / 403                    SocialSourceError (credentials)
 *   5xx, network, time-out       SocialSourceError (timeout flag on time-outs)
 * Anything else (200 with partial `errors`, 400 problems, 404) is returned for the caller to read.
 * A 200's billable resources (posts, users: billable.ts) are handed to `billing`, the one place
 * every REST read of X passes.
 */
import axios, { type AxiosInstance } from 'axios';
import { SocialSourceError, SourceBusyError } from '../types';
import { createProcessGovernor, type XFamily, type XGovernor, type XPriority } from './governor';
import { billableReads } from './billable';
import { noXBilling, type XBilling } from './billing';
import { noXMetrics, type XMetrics } from './metrics';
import type { XResponse } from './wire';

export interface XClientOptions {
  /** default https://api.x.com */
  baseUrl?: string;
  bearerToken: string;
  /** per request; default 10 000 ms */
  timeoutMs?: number;
  /** default: a process-local one (no fleet budget); services pass createRedisGovernor */
  governor?: XGovernor;
  metrics?: XMetrics;
  /** what X bills is counted here (x_billable_total); default: not counted */
  billing?: XBilling;
}

export interface XCall {
  family: XFamily;
  path: string;
  params?: Record<string, string | number | undefined>;
  priority?: XPriority;
  method?: 'GET' | 'POST' | 'DELETE';
  data?: unknown;
  /** 'stream': the body is left unread in `stream` (the filtered stream) */
  responseType?: 'json' | 'stream';
  /** overrides the client's time-out (0: none, for the stream) */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface XAnswer<T> {
  status: number;
  headers: Record<string, string>;
  body: XResponse<T>;
  stream: NodeJS.ReadableStream | null;
}

export interface XClient {
  readonly governor: XGovernor;
  /** the streams (filtered, activity) record what they receive here too */
  readonly billing: XBilling;
  request<T>(call: XCall): Promise<XAnswer<T>>;
}

function networkError(err: unknown): SocialSourceError {
  const e = err as { code?: string; message?: string };
  const timeout = e.code === 'ECONNABORTED' || e.code === 'ETIMEDOUT' || /timeout/i.test(e.message ?? '');
  return new SocialSourceError(
    timeout ? 'the X API did not answer in time' : `the X API could not be reached (${e.code ?? 'network error'})`,
    timeout,
  );
}

function headersOf(raw: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (raw && typeof raw === 'object') {
    for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
      if (typeof v === 'string' || typeof v === 'number') out[k.toLowerCase()] = String(v);
    }
  }
  return out;
}

function busy(family: XFamily, retryAfterMs: number, why: string): SourceBusyError {
  const at = new Date(Date.now() + retryAfterMs).toISOString();
  return new SourceBusyError(
    `the X API rate limit of ${family} is exhausted (${why}) until ${at}`,
    family,
    retryAfterMs,
  );
}

function statusError(family: XFamily, status: number, headers: Record<string, string>): SocialSourceError | null {
  if (status === 429) {
    const reset = Number(headers['x-rate-limit-reset']);
    const ms = Number.isFinite(reset) && reset * 1000 > Date.now() ? reset * 1000 - Date.now() : 60_000;
    return busy(family, ms, 'X answered 429');
  }
  if (status === 401 || status === 403)
    return new SocialSourceError(`the X API refused the credentials (HTTP ${status})`);
  if (status >= 500) return new SocialSourceError(`the X API failed (HTTP ${status})`);
  return null;
}

export function createXClient(options: XClientOptions): XClient {
  if (!options.bearerToken) throw new Error('the x social source needs a bearer token (X_BEARER_TOKEN)');
  const governor = options.governor ?? createProcessGovernor();
  const metrics = options.metrics ?? noXMetrics;
  const billing = options.billing ?? noXBilling;
  const http: AxiosInstance = axios.create({
    baseURL: (options.baseUrl ?? 'https://api.x.com').replace(/\/+$/, ''),
    timeout: options.timeoutMs ?? 10_000,
    headers: { Authorization: `Bearer ${options.bearerToken}`, 'User-Agent': 'sts-social/1.0' },
    // statuses are mapped below; never throw on them
    validateStatus: () => true,
    maxRedirects: 0,
  });

  async function request<T>(call: XCall): Promise<XAnswer<T>> {
    const priority = call.priority ?? 'high';
    const grant = await governor.tryAcquire(call.family, priority);
    if (!grant.ok) {
      metrics.refused(call.family, priority);
      throw busy(call.family, grant.retryAfterMs, 'the fleet budget is spent');
    }
    const params: Record<string, string | number> = {};
    for (const [k, v] of Object.entries(call.params ?? {})) if (v !== undefined) params[k] = v;
    let res;
    try {
      res = await http.request<unknown>({
        method: call.method ?? 'GET',
        url: call.path,
        params,
        data: call.data,
        responseType: call.responseType === 'stream' ? 'stream' : 'json',
        ...(call.timeoutMs !== undefined && { timeout: call.timeoutMs }),
        ...(call.signal && { signal: call.signal }),
      });
    } catch (err) {
      const e = networkError(err);
      metrics.request(call.family, e.timeout ? 'timeout' : 'network');
      throw e;
    }
    const headers = headersOf(res.headers);
    metrics.request(call.family, String(res.status));
    // the answer is not lost when Redis fails now; the next acquire fails instead
    await governor.observe(call.family, { status: res.status, headers }).catch(() => undefined);
    const stream = call.responseType === 'stream' ? (res.data as NodeJS.ReadableStream) : null;
    const failure = statusError(call.family, res.status, headers);
    if (failure) {
      if (stream && 'destroy' in stream) (stream as unknown as { destroy(): void }).destroy();
      throw failure;
    }
    const raw = stream ? null : res.data;
    const body = (raw && typeof raw === 'object' ? raw : {}) as XResponse<T>;
    if (res.status === 200) billing.record(billableReads(call.family, body));
    return { status: res.status, headers, body, stream };
  }

  return { governor, billing, request };
}
