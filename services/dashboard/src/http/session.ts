import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
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
    /** when the session was created at sign-in (epoch ms): the absolute lifetime counts from it */
    createdAt: number;
    /** whether the account's address was verified (the banner; the use-cases check it themselves) */
    emailVerified: boolean;
    /** the account's session generation at sign-in; a session of another generation is refused */
    generation: number;
  }
}

/** the anonymous visitor's signed double-submit CSRF token, per request (no server session before sign-in) */
const anonymousTokens = new WeakMap<Request, string>();

const SESSION_COOKIE = 'sts_dash';
/** The session cookie's name over TLS: `__Host-` makes the browser refuse it without Secure, Path=/ and no Domain. */
const SECURE_SESSION_COOKIE = '__Host-sts_dash';
const CSRF_COOKIE = 'sts_csrf';
const SECURE_CSRF_COOKIE = '__Host-sts_csrf';

export type CookieSecure = 'auto' | 'true' | 'false';

/** Whether this request's cookies are Secure (and so `__Host-` prefixed). */
function secureCookies(req: Request, secure: CookieSecure): boolean {
  return secure === 'auto' ? req.secure : secure === 'true';
}

export function sessionCookieName(req: Request, secure: CookieSecure): string {
  return secureCookies(req, secure) ? SECURE_SESSION_COOKIE : SESSION_COOKIE;
}

/**
 * express-session over Redis. Over TLS the cookie is `__Host-sts_dash` (Secure, Path=/, no
 * Domain), over plain HTTP `sts_dash`: two session middlewares on the same Redis keys, chosen per request
 * (COOKIE_SECURE=auto decides by req.secure, see TRUST_PROXY). `saveUninitialized: false` and
 * the stateless anonymous CSRF token mean no session is stored before sign-in.
 */
export function sessionMiddleware(opts: {
  redis: RedisClient;
  prefix: string;
  secrets: string[];
  ttlSec: number;
  secure: CookieSecure;
}): RequestHandler {
  // one store per middleware: express-session installs its cookie settings on the store it is given
  const make = (secure: boolean) =>
    session({
      name: secure ? SECURE_SESSION_COOKIE : SESSION_COOKIE,
      store: new RedisStore({ client: connectRedisClient(opts.redis), prefix: opts.prefix, ttl: opts.ttlSec }),
      secret: opts.secrets,
      resave: false,
      saveUninitialized: false,
      rolling: true,
      cookie: { httpOnly: true, sameSite: 'lax', secure, maxAge: opts.ttlSec * 1000, path: '/' },
    });
  const overTls = make(true);
  const plain = make(false);
  return (req, res, next) => (secureCookies(req, opts.secure) ? overTls : plain)(req, res, next);
}

function readCookie(req: Request, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * Signed double-submit CSRF for anonymous forms (sign-in, sign-up, reset): a random nonce in a
 * cookie, and `nonce.HMAC(SESSION_SECRET, nonce)` in the form. A POST is accepted when the form's
 * token is correctly signed and its nonce is the cookie's. Nothing is stored on the server.
 */
export function anonymousCsrf(secrets: string[], secure: CookieSecure): RequestHandler {
  const sign = (nonce: string, secret: string) =>
    createHmac('sha256', secret).update(`csrf:${nonce}`).digest('base64url');
  return (req, res, next) => {
    if (req.session.accountId) return next();
    const name = secureCookies(req, secure) ? SECURE_CSRF_COOKIE : CSRF_COOKIE;
    let nonce = readCookie(req, name);
    if (!nonce || !/^[A-Za-z0-9_-]{43}$/.test(nonce)) {
      nonce = randomBytes(32).toString('base64url');
      res.cookie(name, nonce, { httpOnly: true, sameSite: 'lax', secure: secureCookies(req, secure), path: '/' });
      // a POST without the cookie cannot match any token
      if (req.method === 'POST') return next(new CsrfError());
    }
    const expected = `${nonce}.${sign(nonce, secrets[0]!)}`;
    anonymousTokens.set(req, expected);
    if (req.method !== 'POST') return next();
    const sent = (req.body as Record<string, unknown> | undefined)?._csrf;
    const ok = typeof sent === 'string' && secrets.some((secret) => sameToken(sent, `${nonce}.${sign(nonce, secret)}`));
    next(ok ? undefined : new CsrfError());
  };
}

export class CsrfError extends Error {
  override name = 'CsrfError';
  constructor() {
    super('This form was not sent from this page or has expired. Go back, reload the page and try again.');
  }
}

/** The form token: the session's synchronizer token once signed in, the signed double-submit one before. */
function csrfToken(req: Request): string {
  if (!req.session.accountId) return anonymousTokens.get(req) ?? '';
  req.session.csrf ??= randomBytes(32).toString('base64url');
  return req.session.csrf;
}

function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Every state-changing request of a signed-in session carries the session's token in the `_csrf` field. */
export const csrfProtection: RequestHandler = (req: Request, _res: Response, next: NextFunction) => {
  if (req.method === 'GET' || req.method === 'HEAD' || req.method === 'OPTIONS') return next();
  if (!req.session.accountId) return next(); // checked by anonymousCsrf
  const sent = (req.body as Record<string, unknown> | undefined)?._csrf;
  const expected = req.session.csrf;
  if (typeof sent !== 'string' || !expected || !sameToken(sent, expected)) return next(new CsrfError());
  next();
};

/**
 * The absolute lifetime (SESSION_MAX_AGE_SEC) besides the idle one: a session older than it is
 * ended whatever its activity, and the request continues anonymous (→ the sign-in page).
 */
export function absoluteLifetime(maxAgeSec: number): RequestHandler {
  return (req, _res, next) => {
    if (!req.session.accountId) return next();
    const created = req.session.createdAt;
    if (typeof created === 'number' && Date.now() - created <= maxAgeSec * 1000) return next();
    // a new empty session (not stored unless something is put in it), the old one is deleted
    req.session.regenerate(() => next());
  };
}

/**
 * Ends, as it is loaded, a session whose account moved to another session generation (password
 * changed or reset, "sign out everywhere") or is gone: the request continues anonymous. Deleting
 * session keys alone is not enough, since a request in flight re-saves its session after the
 * delete; with the generation that copy is refused here. A session from before generations
 * existed counts as generation 0.
 */
export function sessionGeneration(current: (accountId: string) => Promise<number | null>): RequestHandler {
  return (req, _res, next) => {
    const id = req.session.accountId;
    if (!id) return next();
    current(id).then(
      (generation) => {
        if (generation !== null && generation === (req.session.generation ?? 0)) return next();
        req.session.regenerate((err) => next(err));
      },
      (err: unknown) => next(err),
    );
  };
}

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
  return {
    csrf: csrfToken(req),
    email: req.session.email,
    path: req.path,
    flash,
    unverified: req.session.accountId !== undefined && req.session.emailVerified === false,
  };
}

/** session.regenerate as a promise: a new id at sign-in (no session fixation), fresh CSRF token. */
export function regenerate(req: Request): Promise<void> {
  return new Promise((resolve, reject) => req.session.regenerate((err) => (err ? reject(err as Error) : resolve())));
}

export function destroy(req: Request): Promise<void> {
  return new Promise((resolve, reject) => req.session.destroy((err) => (err ? reject(err as Error) : resolve())));
}
