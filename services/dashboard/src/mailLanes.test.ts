/**
 * Mail in two lanes and notice digests, against the real dashboard (in process), PostgreSQL,
 * Redis, RabbitMQ and an in-process SMTP server: a sign-up's verification mail is not queued
 * behind 5,000 notices; 300 watched accounts of one customer suspended at once (the poller's
 * profile looks, with its flap rule, on the local store) make one digest listing 50 and counting
 * the rest, and another account's notices make a digest of their own; a notice after a digest
 * waits for the next period; a watched account back and a webhook that recovers are digest items
 * too (the poller's look and the dispatcher's health statement write them); a bad
 * MAIL_DIGEST_MINUTES stops the start.
 */
import { randomUUID } from 'node:crypto';
import { accountEventKey, type AccountTargetStatusEvent } from '@sts/messaging';
import type { Db } from '@sts/db';
import { spawnService, waitFor } from '@sts/testing';
import { createTargetFlapGate, type TargetFlapGate } from '../../poller/src/adapters/flap';
import { createProfileRepository, type ProfileRepository } from '../../poller/src/adapters/profiles';
import { createPrismaRepository } from '../../webhook-dispatcher/src/adapters/repository';
import { MAX_DIGEST_ITEMS } from './mail/digest';
import type { SinkMail, SmtpSink } from './mail/smtpSink';
import {
  dashboardClient,
  dashboardEnv,
  startMailDashboard,
  type MailDashboard,
  type RunningDashboard,
} from '../test/dashboard';

let mail: MailDashboard;
let dash: RunningDashboard;
let sink: SmtpSink;
let db: Db;

beforeAll(async () => {
  mail = await startMailDashboard({
    MAIL_POLL_MS: '100',
    // long enough that every notice written together lands in one window
    MAIL_DIGEST_MINUTES: '0.5',
    LOG_LEVEL: 'error',
  });
  ({ dash, sink, db } = mail);
});

afterAll(() => mail?.stop());

const to = (email: string) => (m: SinkMail) => m.to.includes(email);

async function account(email: string): Promise<string> {
  const a = await db.account.create({ data: { email, passwordHash: 'x', emailVerifiedAt: new Date() } });
  return a.id;
}

/** what the poller writes when `count` watched accounts of one customer are suspended together */
async function suspendedTogether(accountId: string, prefix: string, count: number): Promise<void> {
  const occurredAt = new Date().toISOString();
  const rows = Array.from({ length: count }, (_, i) => {
    const payload: AccountTargetStatusEvent = {
      accountId,
      occurredAt,
      username: `${prefix}${i}`,
      status: 'suspended',
      previousStatus: 'ok',
      newUsername: null,
      monitorIds: [randomUUID()],
    };
    return {
      dedupKey: accountEventKey('account.target.status', payload),
      routingKey: 'account.target.status',
      accountId,
      payload,
    };
  });
  await db.accountEvent.createMany({ data: rows });
}

const FLAP_WINDOW_MS = 1000;
let flap: TargetFlapGate;
let profiles: ProfileRepository;

/** 2,000 watched accounts of the local store: w0..w299 watched by `customer`, the rest by `filler` */
async function watched(customer: string, filler: string): Promise<void> {
  await db.$executeRaw`
    INSERT INTO social_users (id, username, username_key, name)
    SELECT 1000 + i, 'w' || i, 'w' || i, 'w' || i FROM generate_series(0, 1999) AS i`;
  await db.$executeRaw`
    INSERT INTO monitors (account_id, target_username, target_key)
    SELECT CASE WHEN id < 1300 THEN ${customer}::uuid ELSE ${filler}::uuid END, username, username_key
    FROM social_users`;
  flap = createTargetFlapGate({
    db,
    policy: { sharePercent: 20, windowMs: FLAP_WINDOW_MS, minTargets: 10 },
    source: 'local',
  });
  profiles = createProfileRepository(db, flap);
}

/** the poller's looks at these targets, four at a time */
async function lookAll(keys: readonly string[]): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < keys.length) await profiles.look(keys[next++]!, new Date());
  };
  await Promise.all(Array.from({ length: 4 }, worker));
}

describe('mail lanes and notice digests', () => {
  it("a sign-up's verification mail goes out while 5,000 notices wait", async () => {
    // 5,000 digests due at once in the notice lane, each to an address of its own
    await db.$executeRaw`
      INSERT INTO mail_outbox (dedup_key, kind, to_address, subject, text_body, html_body, lane)
      SELECT 'bulk:' || i, 'digest', 'bulk' || i || '@example.com', 'notice ' || i, 'text', '<p>html</p>', 'notice'
      FROM generate_series(1, 5000) AS i`;
    await waitFor(() => sink.mails.some((m) => /^notice /.test(m.subject)), 30_000);
    const email = `new-${randomUUID().slice(0, 8)}@example.com`;
    const signup = await dashboardClient(dash.base).post('/signup', '/signup', {
      email,
      password: 'a good long password',
    });
    expect(signup.status).toBe(200);
    await sink.waitFor((m) => to(email)(m) && /Verify/.test(m.subject), 60_000);
    // the notices were still going out when it arrived: it did not wait for them
    const waiting = await db.mailOutbox.count({ where: { lane: 'notice', sentAt: null } });
    expect(waiting).toBeGreaterThan(0);
    expect(sink.mails.filter((m) => /^notice /.test(m.subject)).length).toBeLessThan(5000);
  }, 120_000);

  it('300 watched accounts of one customer suspended at once (the poller): one digest, 50 listed and the count', async () => {
    // the bulk of the test above is not waited for
    await db.$executeRaw`UPDATE mail_outbox SET sent_at = now() WHERE dedup_key LIKE 'bulk:%' AND sent_at IS NULL`;
    const big = `big-${randomUUID().slice(0, 8)}@example.com`;
    const small = `small-${randomUUID().slice(0, 8)}@example.com`;
    // 2,000 watched accounts, 300 of them one customer's, suspended in one statement (15 %: not
    // the source failing); the poller's looks mark them after the flap window and write the events
    await watched(await account(big), await account(`filler-${randomUUID().slice(0, 8)}@example.com`));
    await db.$executeRaw`UPDATE social_users SET status = 'suspended' WHERE id < 1300`;
    const keys = Array.from({ length: 300 }, (_, i) => `w${i}`);
    await lookAll(keys);
    expect(await db.accountEvent.count()).toBe(0);
    await new Promise((r) => setTimeout(r, FLAP_WINDOW_MS + 100));
    await lookAll(await flap.due(1000));
    expect(await db.accountEvent.count({ where: { routingKey: 'account.target.status' } })).toBe(300);
    await suspendedTogether(await account(small), 'other', 3);

    const digest = await sink.waitFor(to(big), 60_000);
    expect(digest.subject).toBe('300 notices about your Social Timeline account');
    const listed = digest.text.split('\n').filter((l) => l.startsWith('- @'));
    expect(listed).toHaveLength(MAX_DIGEST_ITEMS);
    expect(listed[0]).toMatch(/^- @w\d+ is suspended: http:\/\/dash\.example\.test\/monitors$/);
    expect(digest.text).toContain(`and ${300 - MAX_DIGEST_ITEMS} more.`);
    expect(digest.html).toContain('and 250 more.');

    const other = await sink.waitFor(to(small), 60_000);
    expect(other.subject).toBe('3 notices about your Social Timeline account');
    expect(other.text).not.toContain('more.');

    // every notice was taken by that one digest: nothing more comes for either account
    await waitFor(async () => (await db.mailNotice.count({ where: { digestedAt: null } })) === 0, 30_000);
    await new Promise((r) => setTimeout(r, 1500));
    expect(sink.mails.filter(to(big))).toHaveLength(1);
    expect(await db.mailNotice.count()).toBe(303);
    expect(sink.mails.filter(to(small))).toHaveLength(1);
    expect(await db.mailOutbox.count({ where: { toAddress: big } })).toBe(1);
  }, 300_000);

  it('one digest per account per period: a notice after a digest waits for the next one', async () => {
    const email = `later-${randomUUID().slice(0, 8)}@example.com`;
    const id = await account(email);
    await suspendedTogether(id, 'first', 2);
    await sink.waitFor(to(email), 60_000);
    await suspendedTogether(id, 'second', 1);
    // the second window: its one notice is mailed on its own, as its own mail
    const second = await sink.waitFor((m) => to(email)(m) && /@second0/.test(m.subject), 60_000);
    expect(second.subject).toBe('@second0 is suspended');
    const digests = await db.mailOutbox.findMany({ where: { toAddress: email }, orderBy: { createdAt: 'asc' } });
    expect(digests.map((d) => d.kind)).toEqual(['digest', 'target']);
    // at least one period (30 s) apart: the window opens with the first notice after the digest
    expect(digests[1]!.createdAt.getTime() - digests[0]!.createdAt.getTime()).toBeGreaterThanOrEqual(30_000);
  }, 120_000);

  it('a watched account back and a webhook that recovers: items of the same digest', async () => {
    const email = `back-${randomUUID().slice(0, 8)}@example.com`;
    const id = await account(email);
    await db.$executeRaw`
      INSERT INTO social_users (id, username, username_key, name) VALUES (7000, 'backsoon', 'backsoon', 'Back Soon')`;
    const [monitor] = await db.$queryRaw<{ id: string }[]>`
      INSERT INTO monitors (account_id, target_username, target_key) VALUES (${id}::uuid, 'backsoon', 'backsoon')
      RETURNING id::text AS id`;
    const endpoint = await db.webhookEndpoint.create({
      data: { monitorId: monitor!.id, url: 'https://hooks.example.test/back', secretCiphertext: 'v1.x.y.z' },
    });
    // the poller's looks, without the flap rule: seen, suspended, back
    const looks = createProfileRepository(db);
    await looks.look('backsoon', new Date());
    await db.$executeRaw`UPDATE social_users SET status = 'suspended' WHERE id = 7000`;
    await looks.look('backsoon', new Date());
    await db.$executeRaw`UPDATE social_users SET status = 'active' WHERE id = 7000`;
    await looks.look('backsoon', new Date());
    // the endpoint was disabled; the dispatcher counts a success (its health statement)
    await db.webhookEndpoint.update({
      where: { id: endpoint.id },
      data: { consecutiveFailures: 6, firstFailureAt: new Date(Date.now() - 4 * 86_400_000), disabledAt: new Date() },
    });
    await createPrismaRepository(db).recordHealth({ endpointId: endpoint.id, delivered: true, at: new Date() });

    const digest = await sink.waitFor(to(email), 90_000);
    expect(digest.subject).toBe('3 notices about your Social Timeline account');
    // listed in the order the consumer took them (it handles several events at once)
    const listed = digest.text.split('\n').filter((l) => l.startsWith('- '));
    expect(listed.sort()).toEqual(
      [
        '- @backsoon is suspended: http://dash.example.test/monitors',
        '- @backsoon is available again: http://dash.example.test/monitors',
        `- Your webhook for @backsoon works again: http://dash.example.test/monitors/${monitor!.id}/deliveries`,
      ].sort(),
    );
    expect(digest.html).toContain('is available again');
    expect(digest.html).toContain('works again');
  }, 120_000);

  it.each(['0', '-1', 'ten', '1441'])(
    'MAIL_DIGEST_MINUTES=%j stops the start with exit 2 naming it',
    async (value) => {
      const child = spawnService('services/dashboard/src/main.ts', {
        ...dashboardEnv(mail.backends),
        MAIL_DIGEST_MINUTES: value,
        DASHBOARD_PORT: '0',
      });
      try {
        expect(await child.exited).toBe(2);
      } finally {
        if (child.child.exitCode === null) child.child.kill('SIGKILL');
      }
      expect(child.lines.join('\n')).toContain('MAIL_DIGEST_MINUTES');
    },
    60_000,
  );
});
