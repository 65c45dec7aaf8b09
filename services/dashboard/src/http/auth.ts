import { Router } from 'express';
import { InvalidCredentialsError, type UseCases } from '@sts/usecases';
import type { SignInThrottle } from '../adapters/throttle';
import { signInPage, signUpPage } from '../views/auth';
import { formErrors, str } from './forms';
import { destroy, pageContext, regenerate, sessionCookieName, type CookieSecure } from './session';

export function authRouter(uc: UseCases, throttle: SignInThrottle, cookieSecure: CookieSecure): Router {
  const r = Router();

  r.get('/signup', (req, res) => {
    if (req.session.accountId) return res.redirect(303, '/');
    res.type('html').send(signUpPage(pageContext(req)));
  });

  r.post('/signup', async (req, res) => {
    const email = str(req, 'email');
    await throttle.attempt('', req.ip ?? 'unknown');
    try {
      const account = await uc.accounts.signUp({ email, password: str(req, 'password') });
      await regenerate(req);
      req.session.accountId = account.id;
      req.session.email = account.email;
      req.session.flash = { notice: 'Welcome! Your account is on the Free plan. Create an API key to start.' };
      res.redirect(303, '/');
    } catch (err) {
      const errors = formErrors(err, ['email', 'password']);
      if (!errors) throw err;
      res
        .status(422)
        .type('html')
        .send(signUpPage(pageContext(req), { email }, errors));
    }
  });

  r.get('/signin', (req, res) => {
    if (req.session.accountId) return res.redirect(303, '/');
    res.type('html').send(signInPage(pageContext(req)));
  });

  r.post('/signin', async (req, res) => {
    const email = str(req, 'email');
    await throttle.attempt(email, req.ip ?? 'unknown');
    try {
      const account = await uc.accounts.authenticate({ email, password: str(req, 'password') });
      await throttle.succeeded(email, req.ip ?? 'unknown');
      await regenerate(req);
      req.session.accountId = account.id;
      req.session.email = account.email;
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
    res.clearCookie(sessionCookieName(req, cookieSecure), { path: '/' });
    res.redirect(303, '/signin');
  });

  return r;
}
