/**
 * The router on find-my-way keeps the hand-written router's behaviour (badInput.test.ts and
 * app.test.ts check it over HTTP); these are the corners where find-my-way's defaults differ and
 * router.ts overrides them, and the bound on a path param.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ApiError } from '@sts/common';
import { apiRoutes } from './handlers';
import { manageRoutes } from '../manage/routes';
import { coverageRoutes } from './coverage';
import { createRouter, MAX_PARAM_LENGTH, type HandlerResult, type Route } from './router';

const ok = (): HandlerResult => ({ status: 200, body: null });
const handlers = { user: ok, tweets: ok, tweet: ok, post: ok, hits: ok };
const routes: Route[] = [
  { pattern: '/api/v1/users/:username', handlers: { GET: handlers.user } },
  { pattern: '/api/v1/users/:username/tweets', handlers: { GET: handlers.tweets } },
  { pattern: '/api/v1/tweets/:id', handlers: { GET: handlers.tweet } },
  { pattern: '/api/v1/tweets', handlers: { POST: handlers.post } },
  { pattern: '/api/v1/monitors/:id/hits', handlers: { GET: handlers.hits } },
];
const match = createRouter(routes);

/** the error `match` throws, as status, code, param and Allow */
function refusal(method: string, path: string): string {
  try {
    match(method, path);
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    return [err.status, err.code, err.extra.param ?? '-', err.headers.Allow ?? '-'].join(' ');
  }
  throw new Error(`${method} ${path} matched`);
}

describe('read-api router', () => {
  it("serves docs/api.md's endpoints, its patterns being the OpenAPI templates the metrics label by", () => {
    // the gateway labels its latency histogram with the OpenAPI paths (`{username}` as `:username`);
    // read-api labels read_api_http_request_duration_seconds with these patterns: the same strings
    const doc = readFileSync(path.resolve(__dirname, '../../../../docs/api.md'), 'utf8');
    const table = doc.slice(
      doc.indexOf('<!-- generated:endpoints -->'),
      doc.indexOf('<!-- end generated:endpoints -->'),
    );
    const documented = [...table.matchAll(/^\| (GET|POST|PUT|PATCH|DELETE) +\| `([^`]+)`/gm)]
      .map(([, method, p]) => `${method} ${p!.replace(/\{([^}]+)\}/g, ':$1')}`)
      .filter((e) => e !== 'GET /api/v1/openapi.json' && e !== 'GET /api/v1/stream'); // served by the gateway itself
    const routes = [
      ...apiRoutes({ source: {} as never, monitors: {} as never, users: {} as never, retention: {} as never }),
      ...manageRoutes({
        useCases: {} as never,
        idempotency: {} as never,
        monitors: {} as never,
        events: {} as never,
        retention: {} as never,
      }),
      ...coverageRoutes({} as never),
    ];
    const served = routes.flatMap((r) => Object.keys(r.handlers).map((m) => `${m} ${r.pattern}`));
    expect(served.sort()).toEqual(documented.sort());
    expect(served).toHaveLength(26);
  });

  it('matches a route, decodes its params once and dispatches on the method', () => {
    const m = match('GET', '/api/v1/users/bob/tweets');
    expect(m.pattern).toBe('/api/v1/users/:username/tweets');
    expect(m.handler).toBe(handlers.tweets);
    expect(m.params).toEqual({ username: 'bob' });
    expect(match('HEAD', '/api/v1/users/bob').handler).toBe(handlers.user);
    expect(match('POST', '/api/v1/tweets').handler).toBe(handlers.post);
    // each segment is decoded once: an encoded slash, hash, percent or semicolon stays in its param
    expect(match('GET', '/api/v1/users/a%2Fb').params).toEqual({ username: 'a/b' });
    expect(match('GET', '/api/v1/users/a%23b').params).toEqual({ username: 'a#b' });
    expect(match('GET', '/api/v1/users/%25ZZ').params).toEqual({ username: '%ZZ' });
    expect(match('GET', '/api/v1/users/a%3Bb/tweets').params).toEqual({ username: 'a;b' });
    expect(match('GET', '/api/v1/users/%C3%A9').params).toEqual({ username: 'é' });
    // an encoded unreserved character matches a literal segment, as decoding first always did
    expect(match('GET', '/api/v1/%75sers/bob').pattern).toBe('/api/v1/users/:username');
  });

  it('keeps `#` and `;` in the path (find-my-way would cut it there by default)', () => {
    expect(match('GET', '/api/v1/users/bob#x').params).toEqual({ username: 'bob#x' });
    expect(match('GET', '/api/v1/users/bob;x').params).toEqual({ username: 'bob;x' });
    expect(match('GET', '/api/v1/users/bob#/tweets').params).toEqual({ username: 'bob#' });
    expect(refusal('GET', '/api/v1/users/bob/tweets#')).toBe('404 NOT_FOUND - -');
    expect(refusal('GET', '/api/v1/users#/bob')).toBe('404 NOT_FOUND - -');
  });

  it('tolerates one trailing slash, is case-sensitive and matches no empty param', () => {
    expect(match('GET', '/api/v1/users/bob/').params).toEqual({ username: 'bob' });
    expect(match('POST', '/api/v1/tweets/').handler).toBe(handlers.post);
    for (const path of [
      '/api/v1/users/bob//',
      '/api/v1/users//tweets',
      '/api/v1/users//',
      '/api/v1/monitors//hits',
      '/api/v1/tweets//',
      '/API/v1/users/bob',
      '/api/v1/Users/bob',
      '//api/v1/users/bob',
      '/api/v1/users/bob/tweets/x',
      '/',
    ]) {
      expect([path, refusal('GET', path)]).toEqual([path, '404 NOT_FOUND - -']);
      expect([path, refusal('POST', path)]).toEqual([path, '404 NOT_FOUND - -']);
    }
  });

  it('answers a known path with another method 405 and the allowed methods', () => {
    expect(refusal('DELETE', '/api/v1/users/bob')).toBe('405 METHOD_NOT_ALLOWED - GET, HEAD');
    expect(refusal('GET', '/api/v1/tweets')).toBe('405 METHOD_NOT_ALLOWED - POST');
    expect(refusal('OPTIONS', '/api/v1/monitors/x/hits/')).toBe('405 METHOD_NOT_ALLOWED - GET, HEAD');
  });

  it('answers malformed percent-encoding 400 whether or not a route would match', () => {
    for (const path of ['/api/v1/users/%ZZ', '/api/v1/users/bob%', '/api/v1/users/%2', '/nope/%E0%A4%A', '/%C0%AF']) {
      expect([path, refusal('GET', path)]).toEqual([path, '400 INVALID_REQUEST path -']);
    }
  });

  it(`refuses a path param over ${MAX_PARAM_LENGTH} characters with a 400, and takes one of exactly that length`, () => {
    const longest = 'a'.repeat(MAX_PARAM_LENGTH);
    expect(match('GET', `/api/v1/users/${longest}`).params).toEqual({ username: longest });
    expect(match('GET', `/api/v1/monitors/${longest}/hits`).params).toEqual({ id: longest });
    // the length counts decoded characters, as the handlers see them
    expect(match('GET', `/api/v1/users/${'%C3%A9'.repeat(MAX_PARAM_LENGTH)}`).params.username).toHaveLength(
      MAX_PARAM_LENGTH,
    );
    const tooLong = 'a'.repeat(MAX_PARAM_LENGTH + 1);
    for (const path of [
      `/api/v1/users/${tooLong}`,
      `/api/v1/users/${tooLong}/tweets`,
      `/api/v1/tweets/${'1'.repeat(16 * 1024)}`,
      `/api/v1/monitors/${tooLong}/hits`,
    ]) {
      expect(refusal('GET', path)).toBe('400 INVALID_REQUEST path -');
    }
    // a long segment where no param is expected is still just an unknown path
    expect(refusal('GET', `/api/v1/${tooLong}`)).toBe('404 NOT_FOUND - -');
  });
});
