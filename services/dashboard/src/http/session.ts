import { randomBytes, timingSafeEqual } from 'node:crypto';
import { RedisStore } from 'connect-redis';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import session from 'express-session';
import type { RedisClient } from '@sts/common';
import { connectRedisClient } from '../adapters/sessionStoreClient';
import type { Flash, PageContext } from '../views/layout';

declare module 'express-session' {
  interface SessionData {
    accountId: string;
    email: string;
    /** the synchronizer CSRF token of this session */
    csrf: string;
    flash: Flash;
  }
}

export const SESSION_COOKIE = 'sts_dash';

export function sessionMiddleware(opts: {
  redis: RedisClient;
  prefix: string;
  secrets: string[];
  ttlSec: number;
  secure: 'auto' | 'true' | 'false';
}): RequestHandler {
  return session({
    name: SESSION_COOKIE,
    store: new RedisStore({ client: connectRedisClient(opts.redis), prefix: opts.prefix, ttl: opts.ttlSec }),
    secret: opts.secrets,
    resave: false,
    saveUninitialized: false,
    rolling: true,
    cookie: {
      httpOnly: true,
      sameSite: 'lax',
      // 'auto': Secure exactly when the request came over TLS (req.secure, see TRUST_PROXY)
      secure: opts.secure === 'auto' ? 'auto' : opts.secure === 'true',
      maxAge: opts.ttlSec * 1000,
      path: '/',
    },
  });
}

export class CsrfError extends Error {
  override name = 'CsrfError';
  constructor() {
    super('This form was not sent from this page or has expired. Go back, reload the page and try again.');
  }
}

function csrfToken(req: Request): string {
  req.session.csrf ??= randomBytes(32).toString('base64url');
  return req.session.csrf;
}

function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Every state-changing request carries the session's token in the `_csrf` field. */
export const csrfProtection: RequestHandler = (req: Request, _res: Response, next: NextFunction) => {
  if (req.method === 'GET' || req.method === 'HEAD' || req.method === 'OPTIONS') return next();
  const sent = (req.body as Record<string, unknown> | undefined)?._csrf;
  const expected = req.session.csrf;
  if (typeof sent !== 'string' || !expected || !sameToken(sent, expected)) return next(new CsrfError());
  next();
};

/** Signed-in pages: otherwise to the sign-in page (303 so a POST becomes a GET). */
export const requireAccount: RequestHandler = (req, res, next) => {
  if (req.session.accountId) return next();
  res.redirect(303, '/signin');
};

export function accountId(req: Request): string {
  const id = req.session.accountId;
  if (!id) throw new Error('requireAccount did not run');
  return id;
}

export function setFlash(req: Request, flash: Flash): void {
  req.session.flash = { ...req.session.flash, ...flash };
}

/** The page context; the flash is shown once and then dropped. */
export function pageContext(req: Request): PageContext {
  const flash = req.session.flash;
  if (flash) delete req.session.flash;
  return { csrf: csrfToken(req), email: req.session.email, path: req.path, flash };
}

/** session.regenerate as a promise: a new id at sign-in (no session fixation), fresh CSRF token. */
export function regenerate(req: Request): Promise<void> {
  return new Promise((resolve, reject) => req.session.regenerate((err) => (err ? reject(err as Error) : resolve())));
}

export function destroy(req: Request): Promise<void> {
  return new Promise((resolve, reject) => req.session.destroy((err) => (err ? reject(err as Error) : resolve())));
}
