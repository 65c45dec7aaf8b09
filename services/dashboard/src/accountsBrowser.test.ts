/**
 * Accounts and their mail in real Chromium (Debian's, via playwright-core) against the real dashboard, gateway
 * and read-api, PostgreSQL, Redis, RabbitMQ and an in-process SMTP server: reset and change of
 * password ending another browser's session (two browser contexts, the reset link taken from the
 * mail), the trial refused to a second account of the same address (Unicode variant), and the
 * quota 80 % mail after real API calls through the gateway (PLAN_FREE_MONTHLY_QUOTA=5), sent
 * once, and not at all to an account that unchecked it on /account.
 */
import { randomBytes } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { createDbClient, type Db } from '@sts/db';
import { createSocialUser } from '@sts/social';
import { waitFor } from '@sts/testing';
import { startSmtpSink, type SinkMail, type SmtpSink } from './mail/smtpSink';
import {
  createBackends,
  launchChromium,
  listenEnv,
  newSecretsKey,
  start,
  startGateway,
  submit,
  type RunningDashboard,
  type RunningGateway,
  type TestBackends,
} from '../test/dashboard';

const PASSWORD = 'a good long password';
const PUBLIC_URL = 'http://dash.example.test';
const TARGET = 'quotauser';

jest.setTimeout(120_000);

let backends: TestBackends;
let db: Db;
let sink: SmtpSink;
let gateway: RunningGateway;
let dash: RunningDashboard;
let browser: Browser;
let base = '';

beforeAll(async () => {
  backends = await createBackends();
  db = createDbClient({ url: backends.db.url, poolSize: 2 });
  sink = await startSmtpSink();
  const common = { ...backends.env, LOG_LEVEL: 'error', PLAN_FREE_MONTHLY_QUOTA: '5' };
  gateway = await startGateway(common, randomBytes(24).toString('base64url'));
  dash = await start({
    ...common,
    ...listenEnv(),
    SECRETS_ENCRYPTION_KEY: newSecretsKey(),
    SMTP_URL: sink.url,
    DASHBOARD_PUBLIC_URL: PUBLIC_URL,
    MAIL_POLL_MS: '100',
    // each quota notice here waits for its mail before the next: a digest of one is the notice's own mail
    MAIL_DIGEST_MINUTES: '0.01',
    API_PUBLIC_URL: gateway.url,
  });
  base = dash.base;
  await createSocialUser(db, { username: TARGET, name: 'Quota User' });
  browser = await launchChromium();
}, 180_000);

afterAll(async () => {
  await browser?.close().catch(() => undefined);
  await dash?.stop().catch(() => undefined);
  await gateway?.stop();
  await sink?.stop();
  await db?.$disconnect();
  await backends?.drop();
});

/** a fresh browser context (its own cookies): another browser */
async function newBrowser(): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  return context.newPage();
}

async function go(page: Page, pathname: string): Promise<void> {
  await page.goto(pathname.startsWith('http') ? pathname.replace(PUBLIC_URL, base) : base + pathname);
}

async function signIn(page: Page, email: string, password: string): Promise<void> {
  await go(page, '/signin');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  expect(await submit(page, 'Sign in')).toBe(200);
  expect(page.url()).toBe(`${base}/`);
}

/** mail to the address (as the dashboard stores it: lower case) */
const to = (email: string) => (m: SinkMail) => m.to.includes(email.toLowerCase());
const link = (m: SinkMail, part: string) => m.links.find((l) => l.startsWith(PUBLIC_URL) && l.includes(part))!;

/** signs up in the page, follows the verification link from the mail, signs in */
async function signUpVerified(page: Page, email: string): Promise<void> {
  await go(page, '/signup');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  expect(await submit(page, 'Sign up')).toBe(200);
  const mail = await sink.waitFor((m) => to(email)(m) && /Verify/.test(m.subject));
  await go(page, link(mail, '/verify?token='));
  expect(await submit(page, 'Verify my email address')).toBe(200);
  await expect(page.getByRole('status').first().textContent()).resolves.toContain('Your email address is verified');
  await signIn(page, email, PASSWORD);
}

/** whether the page's next load of /keys lands on the sign-in page */
async function signedOut(page: Page): Promise<boolean> {
  await go(page, '/keys');
  return page.url() === `${base}/signin`;
}

describe('accounts in a browser', () => {
  it('reset and change of password each end the other browser’s session', async () => {
    const email = 'two-browsers@example.com';
    const a = await newBrowser();
    const b = await newBrowser();
    await signUpVerified(a, email);
    await signIn(b, email, PASSWORD);
    expect(await signedOut(a)).toBe(false);
    expect(await signedOut(b)).toBe(false);

    // forgotten password, asked for in browser a; the link comes by mail
    await go(a, '/reset');
    await a.getByLabel('Email').fill(email);
    expect(await submit(a, 'Email me a reset link')).toBe(200);
    const mail = await sink.waitFor((m) => to(email)(m) && /Reset/.test(m.subject));
    await go(a, link(mail, '/reset/confirm?token='));
    await a.getByLabel('New password').fill('the new password 1');
    expect(await submit(a, 'Set the new password')).toBe(200);
    // a was signed in: its session ended too, and it lands on the sign-in page with the notice
    expect(a.url()).toBe(`${base}/signin?password=changed`);
    await expect(a.locator('main').textContent()).resolves.toMatch(/password is changed/);
    expect(await signedOut(b)).toBe(true);
    expect(await signedOut(a)).toBe(true);

    // change password in a (the current one required): b is signed out, a stays in
    await signIn(a, email, 'the new password 1');
    await signIn(b, email, 'the new password 1');
    await go(a, '/account');
    await a.getByLabel('Current password').fill('the new password 1');
    await a.getByLabel('New password').fill('the third password');
    expect(await submit(a, 'Change password')).toBe(200);
    await expect(a.locator('main').textContent()).resolves.toMatch(/Every other session was signed out/);
    expect(await signedOut(b)).toBe(true);
    expect(await signedOut(a)).toBe(false);
    await signIn(b, email, 'the third password');
    await Promise.all([a.context().close(), b.context().close()]);
  });

  it('the Starter trial is refused, on the page, to a second account of the same address', async () => {
    const first = await newBrowser();
    await signUpVerified(first, 'once@example.com');
    await go(first, '/plan');
    await submit(first, 'Start the 30-day Starter trial');
    await expect(first.locator('main').textContent()).resolves.toMatch(/Trial active until/);
    await first.context().close();
    await db.account.delete({ where: { email: 'once@example.com' } });

    // a new account of the same address, upper-case full-width letters
    const second = await newBrowser();
    await signUpVerified(second, 'ＯＮＣＥ@example.com');
    await go(second, '/plan');
    await submit(second, 'Start the 30-day Starter trial');
    await expect(second.locator('main').textContent()).resolves.toMatch(/once per email address/);
    await expect(second.locator('main').textContent()).resolves.not.toMatch(/Trial active until/);
    expect((await db.account.findUniqueOrThrow({ where: { email: 'ｏｎｃｅ@example.com' } })).trialEndsAt).toBeNull();
    await second.context().close();
  });

  it('quota 80 % mail after real API calls through the gateway, once; not sent to an account that opted out', async () => {
    const call = (key: string) =>
      fetch(`${gateway.url}/api/v1/users/${TARGET}`, { headers: { authorization: `Bearer ${key}` } });
    const keyOf = async (page: Page) => {
      await go(page, '/keys');
      await page.getByLabel('Name (optional)').fill('calls');
      expect(await submit(page, 'Create key')).toBe(200);
      return ((await page.locator('#shown-secret').textContent()) ?? '').trim();
    };
    const quiet = await newBrowser();
    await signUpVerified(quiet, 'opted-out@example.com');
    await go(quiet, '/account');
    await quiet.getByLabel('this month’s API calls reach 80 % and 100 % of the quota').uncheck();
    expect(await submit(quiet, 'Save notifications')).toBe(200);
    await go(quiet, '/account');
    await expect(quiet.getByLabel(/API calls reach 80 %/).isChecked()).resolves.toBe(false);
    const quietKey = await keyOf(quiet);
    const loud = await newBrowser();
    await signUpVerified(loud, 'quota@example.com');
    const loudKey = await keyOf(loud);

    // 4 of 5 calls: 80 % for both; the gateway records the events, the opted-out one gets no mail
    for (let i = 0; i < 4; i++) expect((await call(quietKey)).status).toBe(200);
    const quietId = (await db.account.findUniqueOrThrow({ where: { email: 'opted-out@example.com' } })).id;
    await waitFor(
      () => db.accountEvent.findFirst({ where: { accountId: quietId, publishedAt: { not: null } } }),
      20_000,
    );
    for (let i = 0; i < 4; i++) expect((await call(loudKey)).status).toBe(200);
    const mail = await sink.waitFor((m) => to('quota@example.com')(m) && /80 %/.test(m.subject), 20_000);
    expect(mail.text).toContain('4 of 5 API calls');
    // more calls (usage written again, the check runs again): the 80 % mail is not repeated
    expect((await call(loudKey)).status).toBe(200);
    await sink.waitFor((m) => to('quota@example.com')(m) && /whole monthly API quota/.test(m.subject), 20_000);
    await new Promise((r) => setTimeout(r, 500));
    expect(sink.mails.filter((m) => to('quota@example.com')(m) && /80 %/.test(m.subject))).toHaveLength(1);
    expect(sink.mails.filter(to('opted-out@example.com')).map((m) => m.subject)).toEqual([
      expect.stringMatching(/Verify/),
    ]);
    await Promise.all([quiet.context().close(), loud.context().close()]);
  });
});
