/**
 * The monitor cache against a real PostgreSQL: the repository serves a monitor it read before,
 * every change to what a delivery reads (monitor, account plan, webhook endpoint) is announced by
 * the migration's triggers and heard before the next heartbeat returns, the poller's bookkeeping
 * on the same rows is not, and a session that is killed or stops hearing turns the cache off
 * until it proves itself again.
 */
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { createLogger } from '@sts/common';
import { createSecretBox } from '@sts/core';
import { createDbClient, DirectSession, sqlPool, type Db } from '@sts/db';
import {
  createAccount,
  createMonitor,
  createTestDatabase,
  pgbouncerAvailable,
  PGBOUNCER_BIN,
  startPgBouncer,
  TcpProxy,
  testServiceUrls,
  waitFor,
  type MonitorFixture,
  type TestDatabase,
} from '@sts/testing';
import { MonitorContextCache } from '../contextCache';
import { DISPATCHER_SESSION_NAME, listenForContextChanges, type ContextChanges } from './contextChanges';
import type { MonitorContext } from './monitorReader';
import { createPrismaRepository, type DispatcherRepository } from './repository';

const box = createSecretBox(randomBytes(32));
const logger = createLogger({ service: 'context-changes-test', level: 'error' });
const HEARTBEAT_MS = 100;
const bouncerAvailable = pgbouncerAvailable();
if (!bouncerAvailable)
  console.warn(
    `dispatcher: ${PGBOUNCER_BIN} IS NOT INSTALLED (apt-get install pgbouncer): ITS PGBOUNCER CASE IS SKIPPED`,
  );
const itBouncer = bouncerAvailable ? it : it.skip;

describe('monitor cache fed by PostgreSQL announcements', () => {
  let t: TestDatabase;
  let db: Db;
  let admin: Client;
  const open: { session: DirectSession; changes: ContextChanges }[] = [];

  beforeAll(async () => {
    t = await createTestDatabase();
    db = createDbClient({ url: t.url, poolSize: 4 });
    admin = new Client({ connectionString: t.directUrl });
    await admin.connect();
  });

  afterEach(async () => {
    for (const { session, changes } of open.splice(0)) {
      await changes.close();
      await session.stop();
    }
  });

  afterAll(async () => {
    await admin.end();
    await db.$disconnect();
    await t.drop();
  });

  /** a cache fed by a session on `databaseUrl`, its heartbeats sent through the test's pool as main.ts does */
  async function listening(databaseUrl: string) {
    const cache = new MonitorContextCache<MonitorContext>({ maxAgeMs: 3_600_000 });
    const confirm = jest.spyOn(cache, 'confirm');
    const session = new DirectSession({ databaseUrl, applicationName: DISPATCHER_SESSION_NAME, logger });
    const changes = listenForContextChanges(cache, session, {
      heartbeatMs: HEARTBEAT_MS,
      logger,
      notify: (channel, payload) => sqlPool(db).query('SELECT pg_notify($1, $2)', [channel, payload]),
    });
    open.push({ session, changes });
    await session.start();
    await changes.ready;
    return { cache, confirm, repo: createPrismaRepository(db, { cache }) };
  }

  /** a cache and repository whose session listens on `databaseUrl`, once its first heartbeat is back */
  async function openCache(databaseUrl = t.directUrl) {
    const { cache, confirm, repo } = await listening(databaseUrl);
    /** resolves after a heartbeat sent from now on came back: every change committed before is heard */
    const heard = async () => {
      const seen = confirm.mock.calls.length;
      await waitFor(() => confirm.mock.calls.length >= seen + 2, 20_000);
    };
    await heard();
    return { cache, repo, heard };
  }

  /** `m` read into the cache and served from it (after the announcement of its creation is heard) */
  async function cachedMonitor(
    { repo, cache, heard }: { repo: DispatcherRepository; cache: MonitorContextCache; heard: () => Promise<void> },
    m: MonitorFixture,
  ) {
    await heard();
    await repo.getMonitor(m.id);
    const hits = cache.counts.hit;
    const context = await repo.getMonitor(m.id);
    expect(cache.counts.hit).toBe(hits + 1);
    return context!;
  }

  it('serves a monitor it read; the poller bookkeeping on the same rows does not drop it', async () => {
    const c = await openCache();
    const { cache, repo, heard } = c;
    const account = await createAccount(db, 'starter');
    const m = await createMonitor(db, box, { accountId: account.id, url: 'https://hooks.example.com/a' });
    const first = await cachedMonitor(c, m);
    await admin.query(
      `UPDATE monitors SET last_check_at = now(), last_error = 'x', target_status = 'suspended' WHERE id = $1`,
      [m.id],
    );
    await admin.query(`UPDATE accounts SET notify_quota = false, updated_at = now() WHERE id = $1`, [account.id]);
    await admin.query(`UPDATE webhook_endpoints SET updated_at = now() WHERE monitor_id = $1`, [m.id]);
    await heard();
    const hits = cache.counts.hit;
    expect(await repo.getMonitor(m.id)).toEqual(first);
    expect(cache.counts.hit).toBe(hits + 1);
  });

  type View = (c: MonitorContext | null) => unknown;
  const changes: [string, (m: MonitorFixture) => [string, unknown[]], View][] = [
    [
      'webhook URL',
      (m) => [`UPDATE webhook_endpoints SET url = 'https://hooks.example.com/moved' WHERE monitor_id = $1`, [m.id]],
      (c) => c?.webhook?.url,
    ],
    [
      'secret rotated with overlap',
      (m) => [
        `UPDATE webhook_endpoints SET previous_secret_ciphertext = secret_ciphertext, secret_ciphertext = 'new',
           previous_secret_until = now() + interval '1 day' WHERE monitor_id = $1`,
        [m.id],
      ],
      (c) => [c?.webhook?.secretCiphertext, c?.webhook?.previousSecretCiphertext !== null],
    ],
    [
      'broken flag',
      (m) => [`UPDATE webhook_endpoints SET is_broken = true, broken_reason = 'gone' WHERE monitor_id = $1`, [m.id]],
      (c) => [c?.webhook?.isBroken, c?.webhook?.brokenReason],
    ],
    [
      'health',
      (m) => [
        `UPDATE webhook_endpoints SET consecutive_failures = 7, first_failure_at = now(), disabled_at = now() WHERE monitor_id = $1`,
        [m.id],
      ],
      (c) => [c?.webhook?.consecutiveFailures, c?.webhook?.disabledAt !== null],
    ],
    ['paused', (m) => [`UPDATE monitors SET is_active = false WHERE id = $1`, [m.id]], (c) => c?.isActive],
    ['keywords', (m) => [`UPDATE monitors SET keywords = '{moon}' WHERE id = $1`, [m.id]], (c) => c?.keywords],
    ['target', (m) => [`UPDATE monitors SET target_username = 'ESA' WHERE id = $1`, [m.id]], (c) => c?.targetUsername],
    ['plan', (m) => [`UPDATE accounts SET plan = 'free' WHERE id = $1`, [m.accountId]], (c) => c?.plan],
    [
      'trial end',
      (m) => [`UPDATE accounts SET trial_ends_at = now() + interval '3 days' WHERE id = $1`, [m.accountId]],
      (c) => c?.trialEndsAt !== null,
    ],
    ['webhook removed', (m) => [`DELETE FROM webhook_endpoints WHERE monitor_id = $1`, [m.id]], (c) => c?.webhook],
    ['monitor deleted', (m) => [`DELETE FROM monitors WHERE id = $1`, [m.id]], (c) => c],
  ];

  it.each(changes)('a change of %s is heard before the next heartbeat returns', async (_name, change, view) => {
    const c = await openCache();
    const { repo, heard } = c;
    const account = await createAccount(db, 'starter');
    const m = await createMonitor(db, box, { accountId: account.id, url: 'https://hooks.example.com/a' });
    const before = view(await cachedMonitor(c, m));
    const [sql, values] = change(m);
    await admin.query(sql, values);
    await heard();
    const after = await repo.getMonitor(m.id);
    expect(view(after)).not.toEqual(before);
    // what the database holds now, as a fresh repository without a cache reads it
    expect(after).toEqual(await createPrismaRepository(db).getMonitor(m.id));
  });

  it('a webhook added to a monitor that had none is heard', async () => {
    const c = await openCache();
    const { repo, heard } = c;
    const account = await createAccount(db, 'starter');
    const m = await createMonitor(db, box, { accountId: account.id });
    expect((await cachedMonitor(c, m)).webhook).toBeNull();
    await admin.query(
      `INSERT INTO webhook_endpoints (monitor_id, url, secret_ciphertext, updated_at) VALUES ($1, 'https://hooks.example.com/new', 'c', now())`,
      [m.id],
    );
    await heard();
    expect((await repo.getMonitor(m.id))?.webhook?.url).toBe('https://hooks.example.com/new');
  });

  it("the dispatcher's own endpoint writes are read back at once, announced or not", async () => {
    // no session: only the repository's own drop can make the next look-up read the row again
    const cache = new MonitorContextCache<MonitorContext>({ maxAgeMs: 3_600_000 });
    cache.confirm(Date.now() + 3_600_000);
    const repo = createPrismaRepository(db, { cache });
    const account = await createAccount(db, 'starter');
    const m = await createMonitor(db, box, { accountId: account.id, url: 'https://hooks.example.com/a' });
    const context = await cachedMonitor({ repo, cache, heard: () => Promise.resolve() }, m);
    await repo.recordHealth({ endpointId: context.webhook!.id, delivered: false, at: new Date() });
    expect((await repo.getMonitor(m.id))?.webhook?.consecutiveFailures).toBe(1);
    await repo.markBroken(context.webhook!.id, 'gone');
    expect((await repo.getMonitor(m.id))?.webhook?.isBroken).toBe(true);
    await repo.clearBroken(context.webhook!.id);
    expect((await repo.getMonitor(m.id))?.webhook?.isBroken).toBe(false);
  });

  it('a killed session turns the cache off; a change made meanwhile is read once it is back', async () => {
    const c = await openCache();
    const { cache, repo, heard } = c;
    const account = await createAccount(db, 'starter');
    const m = await createMonitor(db, box, { accountId: account.id, url: 'https://hooks.example.com/a' });
    await cachedMonitor(c, m);
    const { rows } = await admin.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = $2`,
      [t.name, DISPATCHER_SESSION_NAME],
    );
    expect(rows).toHaveLength(1);
    await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
    await waitFor(async () => {
      const untrusted = cache.counts.untrusted;
      await repo.getMonitor(m.id);
      return cache.counts.untrusted === untrusted + 1;
    });
    await admin.query(`UPDATE monitors SET is_active = false WHERE id = $1`, [m.id]);
    await heard();
    expect((await repo.getMonitor(m.id))?.isActive).toBe(false);
    const hits = cache.counts.hit;
    await repo.getMonitor(m.id);
    expect(cache.counts.hit).toBe(hits + 1);
  });

  itBouncer('a session through a transaction-mode PgBouncer (a wrong DATABASE_DIRECT_URL) never serves', async () => {
    const bouncer = await startPgBouncer({ upstream: testServiceUrls().postgres, poolSize: 2 });
    try {
      const { cache, confirm, repo } = await listening(bouncer.pooled(t.directUrl));
      const account = await createAccount(db, 'starter');
      const m = await createMonitor(db, box, { accountId: account.id, url: 'https://hooks.example.com/a' });
      // ten heartbeats' time: a pooled LISTEN hears none of them (another session sent them)
      for (let i = 0; i < 10; i++) {
        await repo.getMonitor(m.id);
        await new Promise((r) => setTimeout(r, HEARTBEAT_MS));
      }
      expect(confirm).not.toHaveBeenCalled();
      expect(cache.counts).toMatchObject({ hit: 0, untrusted: 10 });
    } finally {
      for (const { session, changes } of open.splice(0)) {
        await changes.close();
        await session.stop();
      }
      await bouncer.stop();
    }
  });

  it('a session that silently stops hearing turns the cache off, and its connection is replaced', async () => {
    const proxy = new TcpProxy('127.0.0.1', Number(new URL(testServiceUrls().postgres).port || 5432));
    await proxy.listen();
    try {
      const c = await openCache(proxy.urlFor(t.directUrl));
      const { cache, repo } = c;
      const account = await createAccount(db, 'starter');
      const m = await createMonitor(db, box, { accountId: account.id, url: 'https://hooks.example.com/a' });
      await cachedMonitor(c, m);
      proxy.freeze(); // nothing reaches the session or PostgreSQL any more, and nothing tells it
      await waitFor(async () => {
        const untrusted = cache.counts.untrusted;
        await repo.getMonitor(m.id);
        return cache.counts.untrusted === untrusted + 1;
      });
      // its entries are gone (the cache's age limit, an hour here, did not do it)
      expect(cache.size).toBe(0);
      // the old connection never answers again (what either side sent was lost): only a new one
      // brings the heartbeats, and the cache, back
      proxy.resume();
      await waitFor(async () => {
        await repo.getMonitor(m.id);
        const hits = cache.counts.hit;
        await repo.getMonitor(m.id);
        return cache.counts.hit === hits + 1;
      }, 5000);
    } finally {
      await proxy.close();
    }
  });
});
