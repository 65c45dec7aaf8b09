/**
 * Accounts and their mail over HTTP, against the real dashboard (in process), PostgreSQL, Redis,
 * RabbitMQ and an in-process SMTP server (`smtp-server`): sign-up and the mail with its link,
 * the same answer for a taken address, keys refused before verification, reset and change of
 * password ending another browser's session, the trial once per address, notifications by email
 * (quota 80 % after the calls, failing endpoint, opt-out) and SMTP down then up (mail arrives once).
 */
import { randomUUID } from 'node:crypto';
import { accountEventKey, AmqpClient } from '@sts/messaging';
import type { Db } from '@sts/db';
import { plansFromEnv } from '@sts/core';
import { capturingLogger, waitFor } from '@sts/testing';
import { createQuotaNotices } from '../../gateway/src/adapters/quotaNotices';
import { checkTrials } from './mail/accountEvents';
import { startSmtpSink, type SinkMail, type SmtpSink } from './mail/smtpSink';
import { dashboardClient, startMailDashboard, type MailDashboard, type RunningDashboard } from '../test/dashboard';

let mail: MailDashboard;
let dash: RunningDashboard;
let sink: SmtpSink;
let db: Db;
let base = '';
const PASSWORD = 'a good long password';

beforeAll(async () => {
  mail = await startMailDashboard({
    MAIL_FROM: 'Social Timeline <no-reply@example.test>',
    MAIL_POLL_MS: '100',
    MAIL_RETRY_BASE_MS: '200',
    MAIL_RETRY_MAX_MS: '500',
    // each notice here waits for its mail before the next: a digest of one is the notice's own mail
    MAIL_DIGEST_MINUTES: '0.01',
    PLAN_FREE_MONTHLY_QUOTA: '10',
    LOG_LEVEL: 'error',
  });
  ({ dash, sink, db } = mail);
  base = dash.base;
});

afterAll(() => mail?.stop());

const client = () => dashboardClient(base);

const to = (email: string) => (m: SinkMail) => m.to.includes(email);
/** the dashboard path of a mail's link (the links use DASHBOARD_PUBLIC_URL) */
const linkPath = (m: SinkMail, part: string) => {
  const link = m.links.find((l) => l.includes(part));
  expect(link).toMatch(/^http:\/\/dash\.example\.test\//);
  return link!.replace('http://dash.example.test', '');
};

/** follows the verification link (its page) and presses its confirm button (the POST verifies) */
function confirm(c: ReturnType<typeof client>, path: string) {
  return c.post(path, '/verify', { token: new URL(`http://x${path}`).searchParams.get('token')! });
}

async function signUpVerified(email: string): Promise<ReturnType<typeof client>> {
  const c = client();
  expect((await c.post('/signup', '/signup', { email, password: PASSWORD })).status).toBe(200);
  const mail = await sink.waitFor((m) => to(email)(m) && /Verify/.test(m.subject));
  await confirm(c, linkPath(mail, '/verify?token='));
  expect((await c.post('/signin', '/signin', { email, password: PASSWORD })).location).toBe('/');
  return c;
}

describe('accounts a customer can trust', () => {
  it('sign-up: the mail, the link, verification; the same answer and a mail for a taken address; keys wait for it', async () => {
    const c = client();
    const first = await c.post('/signup', '/signup', { email: 'new@example.com', password: PASSWORD });
    expect(first.status).toBe(200);
    expect(first.text).toContain('Check your email');
    const mail = await sink.waitFor(to('new@example.com'));
    expect(mail.subject).toMatch(/Verify your email address/);
    expect(mail.text).toContain('expires in 24 hours');
    expect(mail.html).toContain('<a href="http://dash.example.test/verify?token=');
    expect(mail.from).toContain('no-reply@example.test');
    // the token is stored hashed only
    const token = new URL(`http://x${linkPath(mail, '/verify?token=')}`).searchParams.get('token')!;
    const stored = await db.emailToken.findMany({ select: { tokenHash: true } });
    expect(stored.map((s) => s.tokenHash)).not.toContain(token);

    // a taken address: the same page, and a mail saying so
    const again = await client().post('/signup', '/signup', {
      email: 'NEW@example.com',
      password: 'another password!',
    });
    expect(again.status).toBe(200);
    expect(again.text).toBe(first.text.replace(/value="[^"]+"/g, (v) => v)); // same page (modulo tokens)
    const taken = await sink.waitFor((m) => to('new@example.com')(m) && /already have/.test(m.subject));
    expect(taken.text).toMatch(/sign in|reset your password/i);

    // signed in but unverified: keys refused, the page says why and offers to resend
    expect((await c.post('/signin', '/signin', { email: 'new@example.com', password: PASSWORD })).location).toBe('/');
    const keys = await c.post('/keys', '/keys', { name: 'early' });
    expect(keys.status).toBe(403);
    expect(keys.text).toMatch(/verify your email address before you create API keys/);
    expect(keys.text).toContain('action="/verify/resend"');
    expect(await db.apiKey.count()).toBe(0);

    // the link verifies (once); then the key is made
    const verified = await confirm(c, linkPath(mail, '/verify?token='));
    expect(verified.status).toBe(303);
    expect((await confirm(c, linkPath(mail, '/verify?token='))).status).toBe(422); // single-use
    expect((await c.post('/keys', '/keys', { name: 'now' })).status).toBe(303);
    expect(await db.apiKey.count()).toBe(1);
    // the form asks for the scope (read by default); the list shows it; a made-up scope is refused
    const keysPage = await c.req('/keys');
    expect(keysPage.text).toMatch(/name="scope" value="read"\s+checked/);
    expect((await c.post('/keys', '/keys', { name: 'ops', scope: 'manage' })).status).toBe(303);
    expect((await db.apiKey.findFirstOrThrow({ where: { name: 'ops' } })).scope).toBe('manage');
    expect((await db.apiKey.findFirstOrThrow({ where: { name: 'now' } })).scope).toBe('read');
    const badScope = await c.post('/keys', '/keys', { name: 'x', scope: 'root' });
    expect([badScope.status, badScope.text]).toEqual([422, expect.stringContaining('Must be read or manage')]);
    expect(await db.apiKey.count()).toBe(2);
    expect((await c.req('/keys')).text).toMatch(/data-label="Scope">manage</);
  });

  it('reset and change of password end the other browser’s session; sign out everywhere', async () => {
    const email = 'reset@example.com';
    const a = await signUpVerified(email);
    const b = client();
    await b.post('/signin', '/signin', { email, password: PASSWORD });
    expect((await b.req('/keys')).status).toBe(200);

    // unknown address: the same answer, no mail
    const unknown = await client().post('/reset', '/reset', { email: 'nobody@example.com' });
    const known = await client().post('/reset', '/reset', { email });
    expect(unknown.text.replace(/value="[^"]+"/g, '')).toBe(known.text.replace(/value="[^"]+"/g, ''));
    const mail = await sink.waitFor((m) => to(email)(m) && /Reset/.test(m.subject));
    expect(sink.mails.some((m) => to('nobody@example.com')(m))).toBe(false);
    const path = linkPath(mail, '/reset/confirm?token=');
    const token = new URL(`http://x${path}`).searchParams.get('token')!;
    const set = await client().post(path, '/reset/confirm', { token, password: 'the new password 1' });
    expect(set.status).toBe(200);
    expect(set.text).toMatch(/password is changed/);
    // both browsers are signed out; the link is used up; the new password works
    expect((await a.req('/keys')).status).toBe(303);
    expect((await b.req('/keys')).status).toBe(303);
    expect((await client().post(path, '/reset/confirm', { token, password: 'yet another one 2' })).status).toBe(422);
    await a.post('/signin', '/signin', { email, password: 'the new password 1' });
    await b.post('/signin', '/signin', { email, password: 'the new password 1' });

    // change password (the current one required) ends the other session, keeps this one
    const wrong = await a.post('/account', '/account/password', {
      currentPassword: 'nope nope nope',
      newPassword: 'x'.repeat(12),
    });
    expect(wrong.status).toBe(422);
    expect((await b.req('/keys')).status).toBe(200);
    const changed = await a.post('/account', '/account/password', {
      currentPassword: 'the new password 1',
      newPassword: 'the third password',
    });
    expect(changed.location).toBe('/account');
    expect((await a.req('/keys')).status).toBe(200);
    expect((await b.req('/keys')).status).toBe(303);

    // sign out everywhere
    await b.post('/signin', '/signin', { email, password: 'the third password' });
    await a.post('/account', '/account/signout-everywhere', {});
    expect((await a.req('/keys')).status).toBe(303);
    expect((await b.req('/keys')).status).toBe(303);
  });

  it('the Starter trial once per verified address (case and Unicode folded), not per account row', async () => {
    const first = await signUpVerified('trial@example.com');
    expect((await first.post('/plan', '/plan/trial', {})).location).toBe('/plan');
    expect((await first.req('/plan')).text).toMatch(/Your Starter trial runs until/);
    // the account is deleted; a new account of the same address (full-width letters) gets no second trial
    await db.account.delete({ where: { email: 'trial@example.com' } });
    const second = await signUpVerified('ｔｒｉａｌ@example.com');
    expect((await second.post('/plan', '/plan/trial', {})).location).toBe('/plan');
    expect((await second.req('/plan')).text).toMatch(/once per email address/);
    const row = await db.account.findUniqueOrThrow({ where: { email: 'ｔｒｉａｌ@example.com' } });
    expect(row.trialEndsAt).toBeNull();
    // and an unverified account cannot start one at all
    const c = client();
    await c.post('/signup', '/signup', { email: 'unverified-trial@example.com', password: PASSWORD });
    await c.post('/signin', '/signin', { email: 'unverified-trial@example.com', password: PASSWORD });
    const unverified = await c.post('/plan', '/plan/trial', {});
    expect(unverified.status).toBe(403);
    expect(unverified.text).toMatch(/verify your email address before you start the trial/);
  });

  it('notifications: quota 80 % after the calls (once a month), a failing endpoint, an opt-out honoured', async () => {
    const email = 'notify@example.com';
    const c = await signUpVerified(email);
    const account = await db.account.findUniqueOrThrow({ where: { email } });
    const period = new Date().toISOString().slice(0, 7);
    // 8 of the Free plan's 10 calls, as the gateway writes them through; then its quota check runs
    await db.usageMonthly.create({ data: { accountId: account.id, period, used: 8 } });
    const notices = createQuotaNotices(db, plansFromEnv({ ...process.env, PLAN_FREE_MONTHLY_QUOTA: '10' } as never));
    expect(await notices()).toBe(1);
    expect(await notices()).toBe(0); // once per account, month and threshold
    const quota = await sink.waitFor((m) => to(email)(m) && /80 %/.test(m.subject));
    expect(quota.text).toContain('8 of 10 API calls');

    // the dispatcher's endpoint health publishes account.webhook.failing (here the test does)
    const monitor = await db.monitor.create({
      data: { accountId: account.id, targetUsername: 'failing', targetKey: 'failing', keywords: [] },
    });
    const amqp = new AmqpClient({ url: mail.backends.env.AMQP_URL, logger: capturingLogger().logger, name: 'test' });
    await amqp.start();
    try {
      const failing = {
        accountId: account.id,
        monitorId: monitor.id,
        state: 'failing' as const,
        consecutiveFailures: 5,
        occurredAt: new Date().toISOString(),
      };
      const publish = (p: typeof failing) =>
        amqp.publish('account.webhook.failing', p, {
          messageId: accountEventKey('account.webhook.failing', p),
          headers: { accountId: account.id },
        });
      await publish(failing);
      const hook = await sink.waitFor((m) => to(email)(m) && /webhook for @failing/.test(m.subject));
      expect(hook.text).toContain('failed 5 times in a row');
      await publish({ ...failing, consecutiveFailures: 6 }); // the same day: no second mail (checked below)
      expect(linkPath(hook, '/deliveries')).toBe(`/monitors/${monitor.id}/deliveries`);

      // opt out of webhook mails: a broken endpoint is not mailed
      await c.post('/account', '/account/notifications', { quota: 'on', trial: 'on' });
      expect((await db.account.findUniqueOrThrow({ where: { id: account.id } })).notifyWebhook).toBe(false);
      await publish({ ...failing, state: 'broken' as never, consecutiveFailures: 7 });
      // a later mail (quota 100 %) arrives, the broken one never
      await db.usageMonthly.update({
        where: { accountId_period: { accountId: account.id, period } },
        data: { used: 10 },
      });
      await notices();
      await sink.waitFor((m) => to(email)(m) && /whole monthly API quota/.test(m.subject));
      await new Promise((r) => setTimeout(r, 500));
      expect(sink.mails.filter((m) => to(email)(m) && /webhook/.test(m.subject)).map((m) => m.subject)).toEqual([
        'Your webhook for @failing is failing',
      ]);
      expect(sink.mails.filter((m) => to(email)(m) && /80 %/.test(m.subject))).toHaveLength(1);

      // a watched account suspended: the poller writes account.target.status; one mail (opted in again)
      await c.post('/account', '/account/notifications', { quota: 'on', trial: 'on', webhook: 'on' });
      const status = {
        accountId: account.id,
        occurredAt: new Date().toISOString(),
        username: 'failing',
        status: 'suspended' as const,
        previousStatus: 'ok' as const,
        newUsername: null,
        monitorIds: [monitor.id],
      };
      await db.accountEvent.create({
        data: {
          dedupKey: accountEventKey('account.target.status', status),
          routingKey: 'account.target.status',
          accountId: account.id,
          payload: status,
        },
      });
      const suspended = await sink.waitFor((m) => to(email)(m) && /@failing is suspended/.test(m.subject));
      expect(suspended.text).toContain('Your monitor watching @failing cannot read its posts');
      expect(linkPath(suspended, '/monitors')).toBe('/monitors');
    } finally {
      await amqp.stop();
    }
  });

  it('trial ends in 3 days, trial ended: one mail each; monitors over the Free limit paused (not deleted) with a banner', async () => {
    const email = 'ending@example.com';
    const c = await signUpVerified(email);
    const account = await db.account.findUniqueOrThrow({ where: { email } });
    const now = new Date();
    await db.account.update({
      where: { id: account.id },
      data: {
        trialStartedAt: new Date(now.getTime() - 28 * 86_400_000),
        trialEndsAt: new Date(now.getTime() + 2 * 86_400_000),
      },
    });
    for (const [i, target] of ['first', 'second', 'third'].entries()) {
      await db.monitor.create({
        data: {
          accountId: account.id,
          targetUsername: target,
          targetKey: target,
          createdAt: new Date(now.getTime() + i),
        },
      });
    }
    expect(await checkTrials(db, 1, now)).toBeGreaterThanOrEqual(1);
    await checkTrials(db, 1, now); // once per event
    const ending = await sink.waitFor((m) => to(email)(m) && /trial ends on/.test(m.subject));
    expect(ending.text).toContain('paused (not deleted)');
    // three days later the trial has ended
    const later = new Date(now.getTime() + 3 * 86_400_000);
    await checkTrials(db, 1, later);
    await checkTrials(db, 1, later);
    const ended = await sink.waitFor((m) => to(email)(m) && /trial has ended/.test(m.subject));
    expect(ended.text).toContain('@second, @third');
    const monitors = await db.monitor.findMany({ where: { accountId: account.id }, orderBy: { createdAt: 'asc' } });
    expect(monitors.map((m) => m.isActive)).toEqual([true, false, false]);
    await db.account.update({ where: { id: account.id }, data: { trialEndsAt: new Date(now.getTime() - 1000) } });
    const overview = await c.req('/');
    expect(overview.text).toMatch(/Your Starter trial ended on .*@second, @third/);
    await new Promise((r) => setTimeout(r, 500));
    expect(sink.mails.filter((m) => to(email)(m) && /trial/.test(m.subject))).toHaveLength(2);
  });

  it('SMTP down then up: the mail is retried from the outbox and arrives once', async () => {
    const port = sink.port;
    await sink.stop();
    const c = client();
    const email = `down-${randomUUID().slice(0, 8)}@example.com`;
    expect((await c.post('/signup', '/signup', { email, password: PASSWORD })).status).toBe(200);
    // failed attempts are counted, the page did not fail
    await waitFor(async () => {
      const row = await db.mailOutbox.findFirst({ where: { toAddress: email } });
      return row && row.attempts >= 2 && row.lastError ? row : null;
    }, 15_000);
    const metrics = await (await fetch(`http://127.0.0.1:${dash.opsPort}/metrics`)).text();
    expect(metrics).toMatch(/dashboard_mail_send_failures_total\{kind="verify"[^}]*\} [1-9]/);
    sink = mail.sink = await startSmtpSink({ port });
    await sink.waitFor(to(email));
    await new Promise((r) => setTimeout(r, 1500));
    expect(sink.mails.filter(to(email))).toHaveLength(1);
    expect((await db.mailOutbox.findFirst({ where: { toAddress: email } }))?.sentAt).not.toBeNull();
  });
});
