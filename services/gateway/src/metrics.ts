/**
 * The gateway's request metrics, built for the hot path: every label combination is a prom-client
 * child created once (per route and status class, per plan and reason), so observing an answer
 * is a route match (a scan of the path, no allocation) and one `observe` on a cached child.
 *
 * Routes are the API's route templates (`/api/v1/users/:username/tweets`), never raw paths: the
 * label's values are the routes of the OpenAPI document plus `other` (any path no route matches,
 * including every path outside /api/v1/), so the series count is bounded whatever clients send.
 */
import client from 'prom-client';
import type { PlanName } from '@sts/core';
import { openApiDocument } from './http/openapi';

export type StatusClass = '1xx' | '2xx' | '3xx' | '4xx' | '5xx';
const CLASSES: readonly StatusClass[] = ['1xx', '2xx', '3xx', '4xx', '5xx'];
export const OTHER_ROUTE = 'other';
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
  /** the template's segments after the leading '/': a literal, or null for a `:param` */
  segments: readonly (string | null)[];
  byClass: client.Histogram.Internal<'route' | 'status_class'>[];
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
  const duration = new client.Histogram({
    name: 'gateway_http_request_duration_seconds',
    help: 'time from a request being read to its answer being written, by route template and status class',
    labelNames: ['route', 'status_class'] as const,
    buckets: BUCKETS,
    registers: [registry],
  });
  const rejections = new client.Counter({
    name: 'gateway_quota_rejections_total',
    help: 'requests refused with 429, by plan and reason (rate_limit: per-minute limit, monthly_quota: monthly quota)',
    labelNames: ['plan', 'reason'] as const,
    registers: [registry],
  });
  const entry = (route: string): RouteEntry => ({
    route,
    segments: route
      .split('/')
      .slice(1)
      .map((s) => (s.startsWith(':') ? null : s)),
    byClass: CLASSES.map((c) => duration.labels(route, c)),
  });
  const routes = Object.keys(openApiDocument.paths).map((p) => entry(toTemplate(p)));
  const other = entry(OTHER_ROUTE);
  const byPlan = new Map<string, Record<RejectionReason, client.Counter.Internal>>();

  function find(path: string): RouteEntry {
    // read-api ignores one trailing slash
    const to = path.length > 1 && path.charCodeAt(path.length - 1) === 47 ? path.length - 1 : path.length;
    if (path.includes('%')) {
      const decoded = decodeSegments(path, to);
      return (decoded && routes.find((r) => matchesDecoded(r, decoded))) ?? other;
    }
    for (const r of routes) if (matches(r, path, 1, to)) return r;
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
