/**
 * The metric names the code exports, found the way a reviewer would grep for them: every quoted
 * snake_case name in the non-test sources of services/ and packages/ (prom-client registrations,
 * the gateway's hand-written histogram, the poller's scrape-time gauges), plus prom-client's
 * default process metrics (every registry collects them: packages/common createMetricsRegistry).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import client from 'prom-client';
import { REPO_ROOT } from './deploy';

/**
 * Metrics other branches are adding, named here so the PrometheusRule can carry their alert now.
 * The check warns loudly while one is not in the code yet; delete the entry once it is.
 */
const PENDING_METRICS: Record<string, string> = {};

const SUFFIXES = ['_bucket', '_count', '_sum', '_created'];

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.includes('.test.') && !e.name.includes('fixture'))
    .map((e) => path.join(e.parentPath, e.name));
}

export function exportedMetricNames(): Set<string> {
  const names = new Set<string>();
  const roots = ['services', 'packages']
    .flatMap((g) => readdirSync(path.join(REPO_ROOT, g)).map((n) => path.join(REPO_ROOT, g, n, 'src')))
    .filter((d) => !d.includes(`${path.sep}deploy-check${path.sep}`) && !d.includes(`${path.sep}testing${path.sep}`));
  for (const file of roots.flatMap(sourceFiles)) {
    for (const m of readFileSync(file, 'utf8').matchAll(/['"`]([a-z][a-z0-9]*(?:_[a-z0-9]+)+)['"`]/g)) names.add(m[1]!);
  }
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  for (const m of registry.getMetricsAsArray()) names.add(m.name);
  registry.clear();
  const exported = new Set<string>();
  for (const n of names) exported.add(n);
  for (const [name, why] of Object.entries(PENDING_METRICS)) {
    if (names.has(name)) continue;
    console.warn(`deploy-check: METRIC ${name} IS NOT IN THE CODE YET (${why}); accepted as pending`);
    exported.add(name);
  }
  return exported;
}

/** The metric names PromQL expressions select (label matchers, `by (...)` lists and strings left out). */
export function queriedMetrics(exprs: string[]): Set<string> {
  const out = new Set<string>();
  for (const expr of exprs) {
    const bare = expr
      .replace(/"[^"]*"/g, '""')
      .replace(/\{[^}]*\}/g, '')
      .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '')
      .replace(/\[[^\]]*\]/g, '');
    for (const m of bare.matchAll(/\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b(?!\s*\()/g)) out.add(baseName(m[1]!));
  }
  return out;
}

function baseName(metric: string): string {
  const suffix = SUFFIXES.find((s) => metric.endsWith(s));
  return suffix ? metric.slice(0, -suffix.length) : metric;
}
