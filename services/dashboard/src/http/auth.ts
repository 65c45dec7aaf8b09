import { Router, type Request } from 'express';
import { InvalidCredentialsError, type AccountView, type UseCases } from '@sts/usecases';
import type { AccountSessions } from '../adapters/sessions';
import { ThrottledError, type SignInThrottle } from '../adapters/throttle';
import type { Mailer } from '../mail/mailer';
import {
  checkEmailPage,
  resetConfirmPage,
  verifyConfirmPage,
  resetRequestPage,
  signInPage,
  signUpPage,
} from '../views/auth';
import type { AfterAnswer } from './afterAnswer';
import { formErrors, str } from './forms';
import { destroy, pageContext, regenerate, sessionCookieName, type CookieSecure } from './session';

export interface AuthDeps {
  uc: UseCases;
  throttle: SignInThrottle;
  cookieSecure: CookieSecure;
  mailer: Pick<Mailer, 'send'>;
  sessions: AccountSessions;
  /** SESSION_MAX_AGE_SEC: the absolute lifetime of a session */
  sessionMaxAgeSec: number;
  /** sign-up and reset work, done after their answer */
  afterAnswer: AfterAnswer;
  /** one more reset mail to this address: null when allowed, else seconds until the next */
  resetMailLimit: (email: string) => Promise<number | null>;
}

/** the key of an address's pending sign-up / reset work */
const workKey = (email: string) => email.trim().normalize('NFC').toLowerCase();

const PASSWORD_CHANGED = 'Your password is changed. Sign in with it.';

const throttledMessage = (err: ThrottledError): string =>
  `Too many attempts for this account from your network. Try again in ${err.retryAfterSec} s, or have a reset link sent to your address: Forgot your password?`;

/** A new session for the account: new id (no fixation), its start time, tracked for "end all". */
export async function startSession(req: Request, account: AccountView, deps: AuthDeps): Promise<void> {
  await regenerate(req);
  req.session.accountId = account.id;
  req.session.email = account.email;
  req.session.emailVerified = account.emailVerifiedAt !== null;
  req.session.createdAt = Date.now();
  req.session.generation = account.sessionGeneration;
  await deps.sessions.add(account.id, req.sessionID, deps.sessionMaxAgeSec);
}

/** Sign up, sign in, sign out; the sign-up answer is the same whether or not the address has an account. */
export function authRouter(deps: AuthDeps): Router {
  const { uc, throttle } = deps;
  const r = Router();

  r.get('/signup', (req, res) => {
    if (req.session.accountId) return res.redirect(303, '/');
    res.type('html').send(signUpPage(pageContext(req)));
  });

  r.post('/signup', async (req, res) => {
    const email = str(req, 'email');
    const password = str(req, 'password');
    await throttle.attempt('', req.ip ?? 'unknown');
    try {
      uc.identity.checkRegistration({ email, password });
    } catch (err) {
      const errors = formErrors(err, ['email', 'password']);
      if (!errors) throw err;
      res
        .status(422)
        .type('html')
        .send(signUpPage(pageContext(req), { email }, errors));
      return;
    }
    // the same answer, at the same time, for a new and a taken address: the work comes after it
    deps.afterAnswer.run(workKey(email), 'sign-up', async () => {
      const reg = await uc.identity.register({ email, password });
      if (reg.kind === 'created') {
        const spec = { kind: 'verify' as const, token: reg.token, expiresAt: reg.expiresAt };
        await deps.mailer.send(reg.account.email, reg.account.id, spec);
      } else {
        // at most one such mail per address and hour, however often someone tries
        const hour = new Date().toISOString().slice(0, 13);
        await deps.mailer.send(
          reg.email,
          reg.accountId,
          { kind: 'already_registered' },
          `taken:${reg.accountId}:${hour}`,
        );
      }
    });
    res.type('html').send(checkEmailPage(pageContext(req), 'signup'));
  });

  r.get('/signin', (req, res) => {
    if (req.session.accountId) return res.redirect(303, '/');
    const ctx = pageContext(req);
    // after a reset from a signed-in browser (below): its session is gone, so the notice comes by query
    const changed = req.query.password === 'changed' ? { flash: { notice: PASSWORD_CHANGED } } : {};
    res.type('html').send(signInPage({ ...ctx, ...changed }));
  });

  r.post('/signin', async (req, res) => {
    const email = str(req, 'email');
    try {
      await throttle.attempt(email, req.ip ?? 'unknown');
    } catch (err) {
      if (!(err instanceof ThrottledError)) throw err;
      // the owner locked out by someone else's guesses gets the way in that needs no password
      res
        .status(429)
        .set('Retry-After', String(err.retryAfterSec))
        .type('html')
        .send(signInPage(pageContext(req), { email }, { _form: throttledMessage(err) }));
      return;
    }
    try {
      // a sign-up of this address answered a moment ago may still be at work
      await deps.afterAnswer.settled(workKey(email));
      const account = await uc.accounts.authenticate({ email, password: str(req, 'password') });
      await throttle.succeeded(email, req.ip ?? 'unknown');
      await startSession(req, account, deps);
      res.redirect(303, '/');
    } catch (err) {
      if (!(err instanceof InvalidCredentialsError)) throw err;
      res
        .status(401)
        .type('html')
        .send(signInPage(pageContext(req), { email }, { _form: 'Wrong email or password.' }));
    }
  });

  r.post('/signout', async (req, res) => {
    await destroy(req);
    res.clearCookie(sessionCookieName(req, deps.cookieSecure), { path: '/' });
    res.redirect(303, '/signin');
  });

  return r;
}

/** The links from mails: verification and password reset (public pages). */
export function linkRouter(deps: AuthDeps): Router {
  const { uc } = deps;
  const r = Router();

  // the link shows a confirm button; only its POST verifies (a scanner's GET changes nothing)
  r.get('/verify', (req, res) => {
    const token = typeof req.query.token === 'string' ? req.query.token : '';
    res.type('html').send(verifyConfirmPage(pageContext(req), token));
  });

  r.post('/verify', async (req, res) => {
    const account = await uc.identity.verify(str(req, 'token'));
    if (req.session.accountId === account.id) {
      req.session.emailVerified = true;
      req.session.flash = { notice: 'Your email address is verified. You can create API keys now.' };
      return res.redirect(303, '/');
    }
    res
      .type('html')
      .send(signInPage({ ...pageContext(req), flash: { notice: 'Your email address is verified. Sign in.' } }));
  });

  r.get('/reset', (req, res) => {
    res.type('html').send(resetRequestPage(pageContext(req)));
  });

  r.post('/reset', async (req, res) => {
    // counts against the client address like a sign-up
    await deps.throttle.attempt('', req.ip ?? 'unknown');
    const email = str(req, 'email');
    // the same answer at the same time for known and unknown addresses: the work comes after it
    deps.afterAnswer.run(workKey(email), 'reset request', async () => {
      // counted for unknown addresses too, so the limit says nothing about which exist
      if ((await deps.resetMailLimit(workKey(email))) !== null) return;
      const found = await uc.identity.requestReset(email);
      if (found) {
        const spec = { kind: 'reset' as const, token: found.token, expiresAt: found.expiresAt };
        await deps.mailer.send(found.email, found.accountId, spec);
      }
    });
    res.type('html').send(checkEmailPage(pageContext(req), 'reset'));
  });

  r.get('/reset/confirm', (req, res) => {
    const token = typeof req.query.token === 'string' ? req.query.token : '';
    res.type('html').send(resetConfirmPage(pageContext(req), token));
  });

  r.post('/reset/confirm', async (req, res) => {
    const token = str(req, 'token');
    try {
      const account = await uc.identity.resetPassword(token, str(req, 'password'));
      // every session of the account ends, this browser's too (it signs in with the new password)
      await deps.sessions.endAll(account.id);
      if (req.session.accountId) {
        // signed in here: the session is destroyed, and the sign-in page (a GET) sets the anonymous form token
        await destroy(req);
        res.clearCookie(sessionCookieName(req, deps.cookieSecure), { path: '/' });
        return res.redirect(303, '/signin?password=changed');
      }
      res.type('html').send(signInPage({ ...pageContext(req), flash: { notice: PASSWORD_CHANGED } }));
    } catch (err) {
      const errors = formErrors(err, ['password', 'token']);
      if (!errors) throw err;
      if (errors.token) errors._form = errors.token;
      res
        .status(422)
        .type('html')
        .send(resetConfirmPage(pageContext(req), token, errors));
    }
  });

  return r;
}
