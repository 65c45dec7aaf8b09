/**
 * The gateway's request metrics, built for the hot path: observing an answer is a route match (a
 * scan of the path, no allocation) and a few array increments on a series made at start (per
 * route and status class). The latency histogram is hand-written (LatencySeries below) rather
 * than a prom-client Histogram: a prom-client child's observe() re-hashes its label object on
 * every call, a measurable share of the gateway's CPU per call (docs/benchmarks.md); the exposition
 * format is the same.
 *
 * Routes are the API's route templates (`/api/v1/users/:username/tweets`), never raw paths: the
 * label's values are the routes of the OpenAPI document plus `other` (any path no route matches,
 * including every path outside /api/v1/), so the series count is bounded whatever clients send.
 */
import client from 'prom-client';
import type { PlanName } from '@sts/core';
import { openApiDocument } from './http/openapi';

type StatusClass = '1xx' | '2xx' | '3xx' | '4xx' | '5xx';
const CLASSES: readonly StatusClass[] = ['1xx', '2xx', '3xx', '4xx', '5xx'];
export const OTHER_ROUTE = 'other';
/** every route of the API starts with it: compared once, then each route's own segments */
const API_PREFIX = '/api/v1/';
/** seconds; the upstream deadline is 10 s by default */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** 'rate_limit': the plan's per-minute limit; 'monthly_quota': the plan's monthly quota */
export type RejectionReason = 'rate_limit' | 'monthly_quota';

export interface GatewayMetrics {
  /** an answer to `path` with `status`, `started` being performance.now() when the request was taken up */
  answered: (path: string, status: number, started: number) => void;
  /** a 429 for the plan's per-minute limit or monthly quota */
  rejected: (plan: PlanName, reason: RejectionReason) => void;
  /** the route label for a path (tests) */
  routeOf: (path: string) => string;
}

interface RouteEntry {
  route: string;
  /** the template's segments after API_PREFIX: a literal, or null for a `:param` */
  segments: readonly (string | null)[];
  byClass: LatencySeries[];
}

/** One histogram series (a route and status class): per-bucket counts, sum, count. */
class LatencySeries {
  /** non-cumulative; the last slot counts values above the largest bound (+Inf) */
  readonly counts = new Float64Array(BUCKETS.length + 1);
  sum = 0;
  count = 0;
  constructor(
    readonly route: string,
    readonly statusClass: StatusClass,
  ) {}

  observe(seconds: number): void {
    let i = 0;
    while (i < BUCKETS.length && seconds > BUCKETS[i]!) i++;
    this.counts[i]!++;
    this.sum += seconds;
    this.count++;
  }

  /** the series' samples in prom-client's metric format (cumulative buckets, +Inf, sum, count) */
  samples(name: string): { metricName: string; labels: Record<string, string>; value: number }[] {
    const labels = { route: this.route, status_class: this.statusClass };
    const out = [];
    let cumulative = 0;
    for (let i = 0; i <= BUCKETS.length; i++) {
      cumulative += this.counts[i]!;
      const le = i < BUCKETS.length ? String(BUCKETS[i]) : '+Inf';
      out.push({ metricName: `${name}_bucket`, labels: { ...labels, le }, value: cumulative });
    }
    out.push({ metricName: `${name}_sum`, labels, value: this.sum });
    out.push({ metricName: `${name}_count`, labels, value: this.count });
    return out;
  }
}

/** Registers the series as one histogram metric; a series is exported once it has a value (as prom-client does). */
function registerHistogram(registry: client.Registry, name: string, help: string, series: () => LatencySeries[]): void {
  const metric = {
    name,
    help,
    type: 'histogram',
    aggregator: 'sum',
    get: () =>
      Promise.resolve({
        name,
        help,
        type: 'histogram',
        aggregator: 'sum',
        values: series()
          .filter((s) => s.count > 0)
          .flatMap((s) => s.samples(name)),
      }),
    reset: () => {
      for (const s of series()) {
        s.counts.fill(0);
        s.sum = 0;
        s.count = 0;
      }
    },
  };
  registry.registerMetric(metric as unknown as client.Metric);
}

/** "/api/v1/users/{username}" → "/api/v1/users/:username" */
const toTemplate = (openApiPath: string) => openApiPath.replace(/\{([^}]+)\}/g, ':$1');

/** true when path[from, to) is the segment list of `entry` (literal segments compared in place) */
function matches(entry: RouteEntry, path: string, from: number, to: number): boolean {
  let pos = from;
  const segs = entry.segments;
  for (let i = 0; i < segs.length; i++) {
    if (pos > to) return false;
    let end = path.indexOf('/', pos);
    if (end === -1 || end > to) end = to;
    const lit = segs[i] as string | null;
    if (lit === null) {
      if (end === pos) return false; // an empty parameter matches nothing (read-api: 404)
    } else if (end - pos !== lit.length || !path.startsWith(lit, pos)) return false;
    pos = end + 1;
  }
  return pos === to + 1;
}

/** The same match on decoded segments, for the rare path with percent-encoding (as read-api decodes them). */
function matchesDecoded(entry: RouteEntry, decoded: readonly string[]): boolean {
  if (decoded.length !== entry.segments.length) return false;
  return entry.segments.every((lit, i) => (lit === null ? decoded[i] !== '' : lit === decoded[i]));
}

function decodeSegments(path: string, to: number): string[] | null {
  try {
    return path.slice(1, to).split('/').map(decodeURIComponent);
  } catch {
    return null; // malformed encoding: read-api answers 400, the label is `other`
  }
}

export function createGatewayMetrics(registry: client.Registry): GatewayMetrics {
  const rejections = new client.Counter({
    name: 'gateway_quota_rejections_total',
    help: 'requests refused with 429, by plan and reason (rate_limit: per-minute limit, monthly_quota: monthly quota)',
    labelNames: ['plan', 'reason'] as const,
    registers: [registry],
  });
  const entry = (route: string): RouteEntry => ({
    route,
    segments: route
      .slice(API_PREFIX.length)
      .split('/')
      .map((s) => (s.startsWith(':') ? null : s)),
    byClass: CLASSES.map((c) => new LatencySeries(route, c)),
  });
  const templates = Object.keys(openApiDocument.paths).map(toTemplate);
  const stray = templates.find((t) => !t.startsWith(API_PREFIX));
  if (stray !== undefined) throw new Error(`route ${stray} is outside ${API_PREFIX}`);
  const routes = templates.map(entry);
  const other = entry(OTHER_ROUTE);
  registerHistogram(
    registry,
    'gateway_http_request_duration_seconds',
    'time from a request being read to its answer being written, by route template and status class',
    () => [...routes, other].flatMap((r) => r.byClass),
  );
  const byPlan = new Map<string, Record<RejectionReason, client.Counter.Internal>>();

  function find(path: string): RouteEntry {
    // read-api ignores one trailing slash
    const to = path.length > 1 && path.charCodeAt(path.length - 1) === 47 ? path.length - 1 : path.length;
    if (path.includes('%')) {
      const decoded = decodeSegments(path, to);
      if (decoded === null || decoded.length < 3 || decoded[0] !== 'api' || decoded[1] !== 'v1') return other;
      const rest = decoded.slice(2);
      return routes.find((r) => matchesDecoded(r, rest)) ?? other;
    }
    if (!path.startsWith(API_PREFIX)) return other;
    for (const r of routes) if (matches(r, path, API_PREFIX.length, to)) return r;
    return other;
  }

  return {
    answered: (path, status, started) => {
      const c = Math.min(4, Math.max(0, Math.floor(status / 100) - 1));
      find(path).byClass[c]!.observe((performance.now() - started) / 1000);
    },
    rejected: (plan, reason) => {
      let children = byPlan.get(plan);
      if (children === undefined) {
        children = {
          rate_limit: rejections.labels(plan, 'rate_limit'),
          monthly_quota: rejections.labels(plan, 'monthly_quota'),
        };
        byPlan.set(plan, children);
      }
      children[reason].inc();
    },
    routeOf: (path) => find(path).route,
  };
}
