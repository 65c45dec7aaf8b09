import { Router } from 'express';
import { RateLimitedError } from '@sts/usecases';
import { accountPage } from '../views/account';
import { startSession, type AuthDeps } from './auth';
import { formErrors, str } from './forms';
import { accountId, destroy, pageContext, sessionCookieName, setFlash } from './session';

/** The account page (signed in): resend the verification link, change password, notifications, sign out everywhere. */
export function settingsRouter(
  deps: AuthDeps & { resendLimit: (accountId: string) => Promise<number | null> },
): Router {
  const { uc } = deps;
  const r = Router();

  r.get('/account', async (req, res) => {
    const account = await uc.accounts.get(accountId(req));
    res.type('html').send(accountPage(pageContext(req), account));
  });

  r.post('/verify/resend', async (req, res) => {
    const id = accountId(req);
    const wait = await deps.resendLimit(id);
    if (wait !== null)
      throw new RateLimitedError(`the link was sent several times already; try again in ${wait} s`, wait);
    const issued = await uc.identity.issueVerification(id);
    if (issued)
      await deps.mailer.send(issued.email, id, { kind: 'verify', token: issued.token, expiresAt: issued.expiresAt });
    setFlash(req, { notice: issued ? `We sent a new link to ${issued.email}.` : 'Your address is verified already.' });
    res.redirect(303, '/account');
  });

  r.post('/account/password', async (req, res): Promise<void> => {
    const id = accountId(req);
    const email = req.session.email ?? id;
    // the current password is checked like a sign-in (a stolen session cannot guess it forever)
    await deps.throttle.attempt(email, req.ip ?? 'unknown');
    try {
      await uc.accounts.changePassword(id, {
        currentPassword: str(req, 'currentPassword'),
        newPassword: str(req, 'newPassword'),
      });
      await deps.throttle.succeeded(email, req.ip ?? 'unknown');
    } catch (err) {
      const errors = formErrors(err, ['currentPassword', 'newPassword']);
      if (!errors) throw err;
      const account = await uc.accounts.get(id);
      res
        .status(422)
        .type('html')
        .send(accountPage(pageContext(req), account, errors));
      return;
    }
    // every other session ends; this one continues under a new id
    await deps.sessions.endAll(id);
    await startSession(req, await uc.accounts.get(id), deps);
    setFlash(req, { notice: 'Your password is changed. Every other session was signed out.' });
    res.redirect(303, '/account');
  });

  r.post('/account/notifications', async (req, res) => {
    const on = (name: string) => str(req, name) === 'on';
    await uc.identity.setNotifications(accountId(req), {
      quota: on('quota'),
      webhook: on('webhook'),
      trial: on('trial'),
    });
    setFlash(req, { notice: 'Notifications saved.' });
    res.redirect(303, '/account');
  });

  r.post('/account/signout-everywhere', async (req, res) => {
    await uc.accounts.endSessions(accountId(req));
    await deps.sessions.endAll(accountId(req));
    await destroy(req);
    res.clearCookie(sessionCookieName(req, deps.cookieSecure), { path: '/' });
    res.redirect(303, '/signin');
  });

  return r;
}
