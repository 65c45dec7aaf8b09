/**
 * The poller process's one direct session (@sts/db directSession.ts): every LISTEN channel and
 * the metrics reporter's advisory lock on one PostgreSQL connection, named `sts-poller-session`;
 * after that connection is killed (pg_terminate_backend) it comes back, listens on every channel
 * again and tells its subscribers to resync, and the role's lock is taken again on it.
 */
import { Client } from 'pg';
import { createLogger } from '@sts/common';
import { AmqpClient, type Envelope } from '@sts/messaging';
import { createSocialTweet, createSocialUser } from '@sts/social';
import { createTestDatabase, spawnService, testServiceUrls, waitFor, type TestDatabase } from '@sts/testing';
import { createAdvisoryRole } from './advisoryLock';
import { DirectSession } from '@sts/db';
import { SESSION_APPLICATION_NAME } from './session';
import { OUTBOX_CHANNEL } from '../domain/pipeline';
import { TWEETS_CHANNEL } from '../poller';
import { openProcessBed } from '../../test/processBed';
import { scrape } from '../../test/scrape';

const logger = createLogger({ service: 'session-test', level: 'error' });
/** every channel a poller process listens on */
const CHANNELS = [OUTBOX_CHANNEL, TWEETS_CHANNEL];

/** PostgreSQL's backends of the poller's direct session on `database` */
async function sessionBackends(admin: Client, database: string): Promise<{ pid: number; locks: number }[]> {
  const { rows } = await admin.query<{ pid: number; locks: number }>(
    `SELECT a.pid, (SELECT count(*)::int FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory') AS locks
       FROM pg_stat_activity a WHERE a.datname = $1 AND a.application_name = $2`,
    [database, SESSION_APPLICATION_NAME],
  );
  return rows;
}

/** kills the session's backend; returns its pid */
async function killSession(admin: Client, database: string): Promise<number> {
  const [before] = await sessionBackends(admin, database);
  await admin.query('SELECT pg_terminate_backend($1)', [before!.pid]);
  return before!.pid;
}

describe('the direct session', () => {
  let t: TestDatabase;
  let admin: Client;

  beforeAll(async () => {
    t = await createTestDatabase();
    admin = new Client({ connectionString: testServiceUrls().postgres });
    await admin.connect();
  });

  afterAll(async () => {
    await admin.end();
    await t.drop();
  });

  it('hears every channel on one connection, and again after that connection is killed', async () => {
    const session = new DirectSession({ databaseUrl: t.directUrl, applicationName: SESSION_APPLICATION_NAME, logger });
    const heard: string[] = [];
    const resynced: string[] = [];
    for (const channel of CHANNELS)
      await session.listen(channel, {
        onNotify: (payload) => heard.push(`${channel}:${payload}`),
        onReconnect: () => resynced.push(channel),
      });
    const role = createAdvisoryRole({ session, logger, lock: 'sts:test:role', role: 'test role' });
    try {
      await session.start();
      expect(await role.check()).toBe(true);
      const [first] = await sessionBackends(admin, t.name);
      expect(first!.locks).toBe(1);
      const notifier = new Client({ connectionString: t.directUrl });
      await notifier.connect();
      const notifyAll = async (round: string) => {
        for (const channel of CHANNELS) await notifier.query('SELECT pg_notify($1, $2)', [channel, round]);
      };
      try {
        await notifyAll('one');
        await waitFor(() => heard.length === CHANNELS.length);
        expect(heard.sort()).toEqual(CHANNELS.map((c) => `${c}:one`).sort());

        const killed = await killSession(admin, t.name);
        // each subscriber is told once the new connection listens again
        await waitFor(() => resynced.length === CHANNELS.length, 15_000);
        expect(resynced.sort()).toEqual([...CHANNELS].sort());
        expect(session.generation()).toBe(2);
        const after = await sessionBackends(admin, t.name);
        expect(after).toHaveLength(1);
        expect(after[0]!.pid).not.toBe(killed);
        await notifyAll('two');
        await waitFor(() => heard.length === 2 * CHANNELS.length);
        expect(heard.filter((h) => h.endsWith(':two')).sort()).toEqual(CHANNELS.map((c) => `${c}:two`).sort());
        // the lock died with the killed connection; the next check takes it on the new one
        expect(await role.check()).toBe(true);
        expect((await sessionBackends(admin, t.name))[0]!.locks).toBe(1);
      } finally {
        await notifier.end();
      }
    } finally {
      await role.close();
      await session.stop();
    }
  }, 60_000);
});

describe('a running poller', () => {
  it('holds exactly one direct session (its LISTENs and the reporter lock), which comes back when killed', async () => {
    const bed = await openProcessBed();
    const db = bed.db;
    const [{ name }] = await db.$queryRaw<[{ name: string }]>`SELECT current_database() AS name`;
    const admin = new Client({ connectionString: testServiceUrls().postgres });
    const amqp = new AmqpClient({ url: bed.env.AMQP_URL, logger, name: 'session-test' });
    const received: Envelope<'monitor.hit'>[] = [];
    // the tick polls every hour: only the push (LISTEN sts_tweets) finds a tweet in time
    const proc = spawnService('services/poller/src/main.ts', {
      ...bed.env,
      POLL_INTERVAL_SECONDS: '3600',
      LOG_LEVEL: 'error',
    });
    try {
      await admin.connect();
      await amqp.start();
      await amqp.consume({
        queue: 'session-test',
        bindings: ['monitor.hit'],
        handler: (e) => (received.push(e), Promise.resolve('ack' as const)),
      });
      const account = await db.account.create({ data: { email: 'session@example.com', plan: 'starter' } });
      await createSocialUser(db, { username: 'sessioned', name: 'Sessioned' });
      const monitor = await db.monitor.create({
        data: { accountId: account.id, targetUsername: 'sessioned', targetKey: 'sessioned' },
      });
      const { opsPort } = JSON.parse(await proc.waitForLine(/poller started/)) as { opsPort: number };
      // a scrape makes this replica the metrics reporter: its advisory lock is on the same session
      expect(await scrape(opsPort)).toMatch(/^poller_metrics_reporter({[^}]*})? 1$/m);
      const sessions = await sessionBackends(admin, name);
      expect(sessions).toHaveLength(1); // services/poller/README.md, "Database connections"
      expect(sessions[0]!.locks).toBe(1);
      await waitFor(async () => (await db.pollCursor.count({ where: { targetKey: 'sessioned' } })) === 1, 15_000);

      const killedAt = new Date();
      const killed = await killSession(admin, name);
      await waitFor(async () => {
        const now = await sessionBackends(admin, name);
        return now.length === 1 && now[0]!.pid !== killed;
      }, 15_000);
      // the push's resync: its targets were made due and the tick polled them (next in an hour)
      await waitFor(async () => {
        const c = await db.pollCursor.findUnique({ where: { targetKey: 'sessioned' } });
        const p = await db.pollTarget.findUnique({ where: { targetKey: 'sessioned' } });
        return c?.lastPolledAt && c.lastPolledAt > killedAt && p && p.nextDueAt.getTime() > Date.now() + 600_000;
      }, 15_000);
      // the push's LISTEN came back: a tweet is found long before the hourly tick
      await createSocialTweet(db, { authorUsername: 'sessioned', text: 'after the reconnect' });
      const event = await waitFor(() => received.find((e) => e.payload.monitor.id === monitor.id), 15_000);
      expect(event.payload.tweet.text).toBe('after the reconnect');
      expect(await scrape(opsPort)).toMatch(/^poller_metrics_reporter({[^}]*})? 1$/m);
      expect(await sessionBackends(admin, name)).toEqual([expect.objectContaining({ locks: 1 })]);
      proc.child.kill('SIGTERM');
      expect(await proc.exited).toBe(0);
    } finally {
      proc.child.kill('SIGKILL');
      await amqp.stop();
      await admin.end();
      await bed.close();
    }
  }, 90_000);
});
