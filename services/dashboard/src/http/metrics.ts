/**
 * The dashboard's HTTP metrics, like the gateway's: `dashboard_http_request_duration_seconds`
 * (histogram) by `route` and `status_class`. Routes are express's route templates
 * (`/monitors/:id`), `/static` for assets and `other` for anything no route matched, so the
 * series count is bounded whatever clients send.
 */
import type { RequestHandler } from 'express';
import client from 'prom-client';

const OTHER_ROUTE = 'other';
/** seconds; pages render in milliseconds, a slow database shows up to the 30 s request timeout */
const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export function httpMetrics(registry: client.Registry): RequestHandler {
  const duration = new client.Histogram({
    name: 'dashboard_http_request_duration_seconds',
    help: 'Dashboard request duration by route template and status class',
    labelNames: ['route', 'status_class'] as const,
    buckets: BUCKETS,
    registers: [registry],
  });
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.once('finish', () => {
      const matched = (req.route as { path?: unknown } | undefined)?.path;
      let route = OTHER_ROUTE;
      if (typeof matched === 'string') route = `${req.baseUrl}${matched}` || '/';
      else if (req.originalUrl.startsWith('/static/') && res.statusCode < 400) route = '/static';
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      duration.observe({ route, status_class: `${Math.floor(res.statusCode / 100)}xx` }, seconds);
    });
    next();
  };
}
