/**
 * A small router: routes are path patterns (`:name` segments capture) with one handler per
 * method. Lookup decodes each path segment once; malformed percent-encoding is a 400, an unknown
 * path a 404 and a known path with another method a 405 with an Allow header.
 */
import type http from 'node:http';
import { InvalidRequestError, MethodNotAllowedError, NotFoundError } from '@sts/common';
import type { Query } from '../domain/params';

export interface RequestContext {
  req: http.IncomingMessage;
  requestId: string;
  /** the caller's account (x-account-id), null when absent or not a UUID */
  accountId: string | null;
  /** the caller's plan (x-account-plan), as the gateway sent it */
  plan: string | null;
  params: Record<string, string>;
  query: Query;
}

export interface HandlerResult {
  status: number;
  /** a value to serialise, or JSON text already serialised */
  body: unknown;
  json?: string;
}

type Handler = (ctx: RequestContext) => Promise<HandlerResult> | HandlerResult;

type Method = 'GET' | 'POST';

export interface Route {
  /** e.g. "/api/v1/users/:username", also the metrics label */
  pattern: string;
  handlers: Partial<Record<Method, Handler>>;
}

interface CompiledRoute {
  pattern: string;
  segments: string[];
  handlers: Partial<Record<string, Handler>>;
  allow: string;
}

export interface RouteMatch {
  pattern: string;
  handler: Handler;
  params: Record<string, string>;
}

function decodeSegment(raw: string): string {
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new InvalidRequestError('the path contains malformed percent-encoding', 'path');
  }
}

export function createRouter(routes: Route[]) {
  const compiled: CompiledRoute[] = routes.map((r) => {
    const handlers: Partial<Record<string, Handler>> = { ...r.handlers };
    if (handlers.GET && !handlers.HEAD) handlers.HEAD = handlers.GET;
    return {
      pattern: r.pattern,
      segments: r.pattern.split('/').slice(1),
      handlers,
      allow: Object.keys(handlers).join(', '),
    };
  });

  /** The matching route, or throws 400 (bad encoding), 404 (no such path) or 405 (wrong method). */
  return function match(method: string, path: string): RouteMatch {
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
