/**
 * Router micro-benchmark (CPU only, no I/O): read-api's route table (services/read-api
 * src/http/handlers.ts) looked up through find-my-way (src/http/router.ts, what read-api runs) and
 * through the hand-written router it replaced (copied below as it was, kept here only to compare).
 *
 * Three request mixes: `gateway`, the one path bench:gateway sends (GET /api/v1/users/bench_user);
 * `hits`, every route once or more (params, a trailing slash, percent-encoding, HEAD); `misses`,
 * 404s, 405s and malformed encoding (each throws, as in read-api). BENCH_ROUNDS (default 21)
 * rounds alternate which router goes first, each timing BENCH_LOOKUPS (default 200 000) lookups
 * per router and mix after a warm-up; the lines give the median ns per lookup of each and their
 * ratio. The machine's other work moves single rounds; the medians of alternating rounds do not.
 */
import { InvalidRequestError, MethodNotAllowedError, NotFoundError } from '../packages/common/src';
import { median, positiveEnv } from './lib/numbers';
import { apiRoutes } from '../services/read-api/src/http/handlers';
import { createRouter, type Route } from '../services/read-api/src/http/router';

type OldHandler = Route['handlers']['GET'];

/** The hand-written router read-api used before find-my-way (services/read-api/src/http/router.ts at 7ccddc4). */
function createOldRouter(routes: Route[]) {
  const decodeSegment = (raw: string): string => {
    if (!raw.includes('%')) return raw;
    try {
      return decodeURIComponent(raw);
    } catch {
      throw new InvalidRequestError('the path contains malformed percent-encoding', 'path');
    }
  };
  const compiled = routes.map((r) => {
    const handlers: Partial<Record<string, OldHandler>> = { ...r.handlers };
    if (handlers.GET && !handlers.HEAD) handlers.HEAD = handlers.GET;
    return {
      pattern: r.pattern,
      segments: r.pattern.split('/').slice(1),
      handlers,
      allow: Object.keys(handlers).join(', '),
    };
  });
  return function match(method: string, path: string) {
    let trimmed = path;
    if (trimmed.length > 1 && trimmed.endsWith('/')) trimmed = trimmed.slice(0, -1);
    const rawSegments = trimmed.split('/').slice(1);
    let segments: string[] | undefined;
    for (const route of compiled) {
      if (route.segments.length !== rawSegments.length) continue;
      segments ??= rawSegments.map(decodeSegment);
      const params: Record<string, string> = {};
      let ok = true;
      for (let i = 0; i < route.segments.length; i++) {
        const want = route.segments[i]!;
        const got = segments[i]!;
        if (want.startsWith(':')) {
          if (got === '') {
            ok = false;
            break;
          }
          params[want.slice(1)] = got;
        } else if (want !== got) {
          ok = false;
          break;
        }
      }
      if (!ok) continue;
      const handler = route.handlers[method];
      if (!handler) {
        throw new MethodNotAllowedError(method, route.pattern, route.allow.split(', '));
      }
      return { pattern: route.pattern, handler, params };
    }
    // decode anyway so a malformed path answers 400 rather than 404
    if (!segments) rawSegments.forEach(decodeSegment);
    const shown = path.length > 100 ? `${path.slice(0, 100)}…` : path;
    throw new NotFoundError('NOT_FOUND', `no such endpoint: ${method} ${shown}`);
  };
}

/** the mixes; misses throw (an error with its stack each), so they run a 20th of the lookups */
const MIXES: Record<string, Array<[string, string]>> = {
  gateway: [['GET', '/api/v1/users/bench_user']],
  hits: [
    ['GET', '/api/v1/users/bench_user'],
    ['GET', '/api/v1/users/alice'],
    ['GET', '/api/v1/users/bob/tweets'],
    ['GET', '/api/v1/tweets/1790000000000000001'],
    ['GET', '/api/v1/search'],
    ['GET', '/api/v1/monitors'],
    ['GET', '/api/v1/monitors/0b6f1f8e-6a4c-4b8e-9d3f-2f1a5c7e9b10/hits'],
    ['HEAD', '/api/v1/users/carol'],
    ['GET', '/api/v1/users/dave/'],
    ['GET', '/api/v1/users/%C3%A9lise'],
    ['POST', '/api/v1/tweets'],
  ],
  misses: [
    ['GET', '/api/v1/nope'],
    ['GET', '/api/v1/users/bob/likes'],
    ['DELETE', '/api/v1/users/bob'],
    ['GET', '/api/v1/tweets'],
    ['GET', '/api/v1/users/%ZZ'],
    ['GET', '/favicon.ico'],
  ],
};

type Match = (method: string, path: string) => { pattern: string };

/** ns per lookup over `lookups` lookups of `mix` */
function time(match: Match, mix: Array<[string, string]>, lookups: number): number {
  let sink = 0;
  const started = process.hrtime.bigint();
  for (let i = 0; i < lookups; i++) {
    const [method, path] = mix[i % mix.length]!;
    try {
      sink += match(method, path).pattern.length;
    } catch (err) {
      sink += (err as { status: number }).status;
    }
  }
  const ns = Number(process.hrtime.bigint() - started) / lookups;
  if (sink === 0) throw new Error('nothing was looked up');
  return ns;
}

function main(): void {
  const rounds = positiveEnv('BENCH_ROUNDS', 21, { whole: true });
  const lookups = positiveEnv('BENCH_LOOKUPS', 200_000, { whole: true });
  const routes = apiRoutes({ source: {} as never, monitors: {} as never, users: {} as never, retention: {} as never });
  const routers: Record<string, Match> = {
    'find-my-way': createRouter(routes),
    'hand-written': createOldRouter(routes),
  };
  const names = Object.keys(routers);
  const count = (mixName: string) => (mixName === 'misses' ? Math.ceil(lookups / 20) : lookups);
  for (const [mixName, mix] of Object.entries(MIXES))
    for (const name of names) time(routers[name]!, mix, count(mixName));
  const samples: Record<string, Record<string, number[]>> = {};
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? names : [...names].reverse();
    for (const [mixName, mix] of Object.entries(MIXES)) {
      for (const name of order)
        ((samples[mixName] ??= {})[name] ??= []).push(time(routers[name]!, mix, count(mixName)));
    }
  }
  console.log(
    `router lookups: ${rounds} alternating rounds of ${lookups} lookups per router and mix (misses: ${count('misses')}); median ns/lookup`,
  );
  for (const mixName of Object.keys(MIXES)) {
    const [fmw, old] = names.map((n) => median(samples[mixName]![n]!));
    const spread = names.map(
      (n) => `${Math.min(...samples[mixName]![n]!).toFixed(0)}–${Math.max(...samples[mixName]![n]!).toFixed(0)}`,
    );
    console.log(
      `${mixName.padEnd(8)} find-my-way ${fmw!.toFixed(0)} ns (${spread[0]})  hand-written ${old!.toFixed(0)} ns (${spread[1]})  ratio ${(fmw! / old!).toFixed(2)}`,
    );
  }
}

main();
