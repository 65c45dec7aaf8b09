/**
 * The router: find-my-way (the router fastify uses) matches the path; the method table per route
 * stays here, because find-my-way has no 405 (a path known for another method is just "not
 * found" to it) and the API answers 405 with an Allow header. So every route is stored once, under
 * one method key, and a lookup gives the route and its params; then the method picks the handler.
 *
 * Behaviour (kept exactly from the hand-written router this replaced, and tested in
 * router.test.ts and badInput.test.ts): case-sensitive paths; one trailing slash tolerated; each
 * param decoded once (`a%2Fb` is the param `a/b`); an empty param matches nothing; malformed
 * percent-encoding anywhere in the path is a 400 (even where no route would match); an unknown
 * path is a 404; a known path with another method a 405 listing the allowed methods; HEAD is
 * served wherever GET is. `#` and `;` are ordinary path characters (find-my-way would cut the path
 * at `#`, so it is escaped before the lookup). The one change, a bound: a param longer than
 * MAX_PARAM_LENGTH (far above any valid one: a monitor id is 36 characters) is a 400 (`path`)
 * without further work, where the handler used to refuse it (400 `username` / `id`, 404 monitor).
 *
 * Why find-my-way and not the hand-written loop it replaced ("no framework on the hot path"): it
 * is well kept (fastify's router) and not slower: `npm run bench:router` (bench/router.ts) compares
 * the two, and either is a small part of read-api's CPU per request (README "Router").
 */
import type http from 'node:http';
import createFindMyWay from 'find-my-way';
import { InvalidRequestError, MethodNotAllowedError, NotFoundError } from '@sts/common';
import type { Query } from '../domain/params';

export interface RequestContext {
  req: http.IncomingMessage;
  requestId: string;
  /** the caller's account (x-account-id), null when absent or not a UUID */
  accountId: string | null;
  /** the caller's plan (x-account-plan), as the gateway sent it */
  plan: string | null;
  /** the key's scope (x-key-scope); 'read' unless the gateway said 'manage' */
  scope: 'read' | 'manage';
  params: Record<string, string>;
  query: Query;
}

export interface HandlerResult {
  status: number;
  /** a value to serialise, or JSON text already serialised */
  body: unknown;
  json?: string;
  /** extra answer headers (e.g. Idempotent-Replayed) */
  headers?: Record<string, string>;
}

type Handler = (ctx: RequestContext) => Promise<HandlerResult> | HandlerResult;

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface Route {
  /** e.g. "/api/v1/users/:username" (find-my-way syntax), also the metrics label */
  pattern: string;
  handlers: Partial<Record<Method, Handler>>;
}

export interface RouteMatch {
  pattern: string;
  handler: Handler;
  params: Record<string, string>;
}

/** a path param longer than this is refused (400) before any handler sees it */
export const MAX_PARAM_LENGTH = 100;

/** the one method key every route is stored under (the method is dispatched in CompiledRoute) */
const PATH_KEY = 'GET';

interface CompiledRoute {
  pattern: string;
  handlers: Partial<Record<string, Handler>>;
  allowed: string[];
}

/**
 * find-my-way answers a malformed path or an over-long param with a result (store null) whose
 * handler calls these: they throw the 400.
 */
function badUrl(): never {
  throw new InvalidRequestError('the path contains malformed percent-encoding', 'path');
}
function paramTooLong(): never {
  throw new InvalidRequestError(`a path segment is longer than ${MAX_PARAM_LENGTH} characters`, 'path');
}
const NO_QUERY = {};

function compile(route: Route): CompiledRoute {
  const handlers: Partial<Record<string, Handler>> = { ...route.handlers };
  if (handlers.GET && !handlers.HEAD) handlers.HEAD = handlers.GET;
  return { pattern: route.pattern, handlers, allowed: Object.keys(handlers) };
}

export function createRouter(routes: Route[]) {
  const paths = createFindMyWay({
    caseSensitive: true,
    ignoreTrailingSlash: true,
    ignoreDuplicateSlashes: false,
    // `;` stays a path character: useSemicolonDelimiter is off by default (and missing from 9.x's types)
    maxParamLength: MAX_PARAM_LENGTH,
    onBadUrl: badUrl,
    onMaxParamLength: paramTooLong,
    // read-api parses the query itself (domain/params.ts) and passes only the path
    querystringParser: () => NO_QUERY,
  });
  const noop = () => undefined;
  // routes given twice (the read and the management handlers of /api/v1/monitors) are one route
  const merged = new Map<string, Route>();
  for (const route of routes) {
    const seen = merged.get(route.pattern);
    merged.set(
      route.pattern,
      seen ? { pattern: route.pattern, handlers: { ...seen.handlers, ...route.handlers } } : route,
    );
  }
  for (const route of merged.values()) paths.on(PATH_KEY, route.pattern, noop, compile(route));

  /** The matching route, or throws 400 (bad encoding, param too long), 404 (no such path) or 405 (wrong method). */
  return function match(method: string, path: string): RouteMatch {
    // find-my-way cuts the path at `#` (a fragment); here it is a path character, as it always was
    const found = paths.find(PATH_KEY, path.includes('#') ? path.replaceAll('#', '%23') : path);
    if (found === null) throw notFound(method, path);
    if (found.store === null) (found.handler as () => never)();
    const params = found.params as Record<string, string>;
    if (hasEmptyParam(params)) throw notFound(method, path);
    const route = found.store as CompiledRoute;
    const handler = route.handlers[method];
    if (!handler) throw new MethodNotAllowedError(method, route.pattern, route.allowed);
    return { pattern: route.pattern, handler, params };
  };
}

function notFound(method: string, path: string): NotFoundError {
  const shown = path.length > 100 ? `${path.slice(0, 100)}…` : path;
  return new NotFoundError('NOT_FOUND', `no such endpoint: ${method} ${shown}`);
}

/** find-my-way matches an empty param (`/users//tweets`); the API never did */
function hasEmptyParam(params: Record<string, string>): boolean {
  for (const key in params) if (params[key] === '') return true;
  return false;
}
