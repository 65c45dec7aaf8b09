import { Client } from 'pg';
import { createTestDatabase } from '@sts/testing';
import { createDbClient, type Db } from './client';
import { latencyQueries, readMonitorCoverage, type CoverageMonitor } from './coverage';
import { Prisma } from './generated/prisma/client';

const NOW = new Date('2027-06-16T12:00:00Z'); // a Wednesday; its week starts 2027-06-14
const MIN = 60_000;
const ago = (ms: number) => new Date(NOW.getTime() - ms);

describe('monitor coverage', () => {
  let t: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let pg: Client;
  let carol: CoverageMonitor;
  const monitors: Record<string, CoverageMonitor> = {};

  const monitor = async (accountId: string, target: string): Promise<CoverageMonitor> => {
    const { rows } = await pg.query<{ id: string }>(
      `INSERT INTO monitors (account_id, target_username, target_key, created_at) VALUES ($1, $2, lower($2), '2027-05-01Z') RETURNING id`,
      [accountId, target],
    );
    return { id: rows[0]!.id, targetKey: target.toLowerCase(), createdAt: new Date('2027-05-01Z') };
  };
  const hit = async (m: string, createdAt: Date, delayMs: number): Promise<{ id: string; detectedAt: Date }> => {
    const detectedAt = new Date(createdAt.getTime() + delayMs);
    const { rows } = await pg.query<{ id: string }>(
      `INSERT INTO hits (monitor_id, tweet_id, tweet_text, tweet_author_id, tweet_author_username, tweet_created_at, detected_at)
       VALUES ($1, $2, 'x', '1', 'carol', $3, $4) RETURNING id`,
      [m, String(createdAt.getTime() + delayMs), createdAt, detectedAt],
    );
    return { id: rows[0]!.id, detectedAt };
  };
  const attempt = (m: string, hitId: string | null, at: Date, outcome: string, event = 'monitor.hit') =>
    pg.query(
      `INSERT INTO delivery_attempts (monitor_id, hit_id, event, delivery_id, url, outcome, created_at)
       VALUES ($1, $2, $3, gen_random_uuid()::text, 'https://r.example/', $4, $5)`,
      [m, hitId, event, outcome, at],
    );
  const gap = (target: string, from: Date, to: Date | null, reason: string, filledAt: Date | null) =>
    pg.query(
      `INSERT INTO coverage_gaps (target_key, starts_at, ends_at, reason, filled_at) VALUES ($1, $2, $3, $4, $5)`,
      [target, from, to, reason, filledAt],
    );

  beforeAll(async () => {
    t = await createTestDatabase();
    db = createDbClient({ url: t.url, poolSize: 4 });
    pg = new Client({ connectionString: t.url });
    await pg.connect();
    for (const w of ['2027-05-03', '2027-05-24', '2027-05-31', '2027-06-07', '2027-06-14']) {
      await pg.query(`SELECT create_week_partition('hits', $1::date)`, [w]);
      await pg.query(`SELECT create_week_partition('delivery_attempts', $1::date)`, [w]);
    }
    const { rows: a } = await pg.query<{ id: string }>(
      `INSERT INTO accounts (email, plan) VALUES ('free@example.com', 'free'), ('starter@example.com', 'starter') RETURNING id`,
    );
    const [free, starter] = [a[0]!.id, a[1]!.id];
    carol = await monitor(free, 'Carol');
    monitors.frank = await monitor(starter, 'Frank');
    monitors.gina = await monitor(free, 'gina');
    monitors.hank = await monitor(free, 'hank');
    monitors.freeFrank = await monitor(free, 'frank');

    // post → detected: 1–5 s in the last day, 10–30 s three days ago
    const recent = [];
    for (let i = 0; i < 5; i++) recent.push(await hit(carol.id, ago(60 * MIN + i * MIN), (i + 1) * 1000));
    const older = [];
    for (const d of [10_000, 20_000, 30_000]) older.push(await hit(carol.id, ago(3 * 86_400_000), d));
    await hit(carol.id, ago(8 * 86_400_000), 500); // detected before the week
    await hit(
      carol.id,
      new Date('2027-05-04T00:00:00Z'),
      NOW.getTime() - 3_600_000 - Date.parse('2027-05-04T00:00:00Z'),
    ); // a post older than the window reaches
    await hit(monitors.gina.id, ago(MIN), 1); // another monitor's
    // detected → delivered: the first delivered attempt counts
    for (const [i, h] of recent.entries()) {
      await attempt(carol.id, h.id, new Date(h.detectedAt.getTime() + 100), 'failed');
      await attempt(carol.id, h.id, new Date(h.detectedAt.getTime() + (i + 1) * 500), 'delivered');
    }
    await attempt(carol.id, recent[0]!.id, new Date(recent[0]!.detectedAt.getTime() + 100_000), 'delivered');
    for (const [i, h] of older.entries())
      await attempt(carol.id, h.id, new Date(h.detectedAt.getTime() + (i + 1) * 10_000), 'delivered');
    await attempt(carol.id, null, ago(MIN), 'delivered', 'monitor.test');

    await gap('carol', new Date('2027-05-09Z'), new Date('2027-05-10Z'), 'source_error', new Date('2027-05-10Z'));
    await gap('carol', ago(120 * MIN), ago(110 * MIN), 'stream_down', ago(60 * MIN));
    await gap('carol', ago(30 * MIN), ago(20 * MIN), 'budget_refused', null);
    await gap('dave', ago(30 * MIN), null, 'source_error', null);
    await pg.query(
      `INSERT INTO poll_cursors (target_key, last_success_at) VALUES ('carol', $1), ('frank', $2), ('gina', $2)`,
      [ago(5 * MIN), ago(60 * MIN)],
    );
    await pg.query(`INSERT INTO x_stream_state (name, alive_at) VALUES ('x', $1)`, [ago(2000)]);
  });

  afterAll(async () => {
    await pg.end();
    await db.$disconnect();
    await t.drop();
  });

  it('computes p50 and p95 of post → detected and detected → delivered over 24 h and 7 days', async () => {
    const c = await readMonitorCoverage(db, carol, NOW);
    expect(c.latency).toEqual({
      last24h: {
        detected: { count: 5, p50Ms: 3000, p95Ms: 4800 },
        delivered: { count: 5, p50Ms: 1500, p95Ms: 2400 },
      },
      last7d: {
        detected: { count: 8, p50Ms: 4500, p95Ms: 26500 },
        delivered: { count: 8, p50Ms: 2250, p95Ms: 26500 },
      },
    });
    const none = await readMonitorCoverage(db, monitors.hank!, NOW);
    expect(none.latency.last7d.detected).toEqual({ count: 0, p50Ms: null, p95Ms: null });
  });

  it('reads only the recent week partitions', async () => {
    const q = latencyQueries(carol.id, NOW);
    for (const sql of [q.detected, q.delivered]) {
      const plan = await db.$queryRaw<{ 'QUERY PLAN': unknown }[]>(Prisma.sql`EXPLAIN (FORMAT JSON) ${sql}`);
      const relations = [...JSON.stringify(plan).matchAll(/"Relation Name":"([a-z_0-9]+)"/g)].map((m) => m[1]);
      expect(relations.length).toBeGreaterThan(0);
      // the window starts 2027-06-09; hits reach posts from 2027-06-02 (the week of 2027-05-31)
      for (const old of [
        'hits_p20270503',
        'hits_p20270524',
        'delivery_attempts_p20270503',
        'delivery_attempts_p20270531',
      ])
        expect(relations).not.toContain(old);
    }
  });

  it('lists the gaps of the last 30 days, newest first, and covered_until stops at the first unfilled one', async () => {
    const c = await readMonitorCoverage(db, carol, NOW);
    expect(c.gaps).toEqual([
      { from: ago(30 * MIN), to: ago(20 * MIN), reason: 'budget_refused', filledAt: null },
      { from: ago(120 * MIN), to: ago(110 * MIN), reason: 'stream_down', filledAt: ago(60 * MIN) },
    ]);
    expect(c.coveredUntil).toEqual(ago(30 * MIN));
    await pg.query(`UPDATE coverage_gaps SET filled_at = $1 WHERE target_key = 'carol' AND filled_at IS NULL`, [
      ago(MIN),
    ]);
    expect((await readMonitorCoverage(db, carol, NOW)).coveredUntil).toEqual(ago(5 * MIN));
  });

  it("a streamed target is covered up to the stream's position, short of a window still owed; others by their reads", async () => {
    // Frank is watched by a Starter account: the stream carries it
    expect((await readMonitorCoverage(db, monitors.frank!, NOW)).coveredUntil).toEqual(ago(2000));
    await pg.query(`INSERT INTO x_stream_owed (username, since, due_at, reason) VALUES ('Frank', $1, $1, 'rules')`, [
      ago(40 * MIN),
    ]);
    expect((await readMonitorCoverage(db, monitors.frank!, NOW)).coveredUntil).toEqual(ago(40 * MIN));
    // Free-only: polled, so its last read
    expect((await readMonitorCoverage(db, monitors.gina!, NOW)).coveredUntil).toEqual(ago(60 * MIN));
    // never read
    expect((await readMonitorCoverage(db, monitors.hank!, NOW)).coveredUntil).toBeNull();
  });

  it("counts the stream only from the monitor's own account: a Free account's monitor of a target a Starter account watches keeps its reads", async () => {
    // the Starter account's monitor of the same target is streamed (see above); the Free one is polled
    expect((await readMonitorCoverage(db, monitors.freeFrank!, NOW)).coveredUntil).toEqual(ago(60 * MIN));
    expect((await readMonitorCoverage(db, monitors.frank!, NOW)).coveredUntil).toEqual(ago(40 * MIN));
  });

  it('the database keeps the record: a read fills an open gap; owed stream windows open, and payments fill, theirs', async () => {
    await gap('ivy', ago(10 * MIN), null, 'source_error', null);
    await pg.query(`INSERT INTO poll_cursors (target_key, last_error) VALUES ('ivy', 'boom')`);
    await pg.query(`UPDATE poll_cursors SET last_error = 'still' WHERE target_key = 'ivy'`);
    expect((await pg.query(`SELECT ends_at FROM coverage_gaps WHERE target_key = 'ivy'`)).rows).toEqual([
      { ends_at: null },
    ]);
    await pg.query(`UPDATE poll_cursors SET last_success_at = $1, last_error = NULL WHERE target_key = 'ivy'`, [
      ago(MIN),
    ]);
    expect((await pg.query(`SELECT ends_at, filled_at FROM coverage_gaps WHERE target_key = 'ivy'`)).rows).toEqual([
      { ends_at: ago(MIN), filled_at: ago(MIN) },
    ]);

    // a reconnect's window is a stream_down gap at once; a rule window only once its search is refused or fails
    const { rows: owed } = await pg.query<{ id: string; reason: string }>(
      `INSERT INTO x_stream_owed (username, since, due_at, reason)
       VALUES ('Jo', $1, now(), 'gap'), ('Kim', $1, now(), 'rules'), ('Lu', $1, now(), 'overflow') RETURNING id, reason`,
      [ago(15 * MIN)],
    );
    const gaps = async () =>
      (
        await pg.query<{ target_key: string; reason: string; filled: boolean }>(
          `SELECT target_key, reason, filled_at IS NOT NULL AS filled FROM coverage_gaps
           WHERE target_key IN ('jo', 'kim', 'lu') ORDER BY target_key`,
        )
      ).rows;
    expect(await gaps()).toEqual([{ target_key: 'jo', reason: 'stream_down', filled: false }]);
    // postpone() as the backfill writes it: a budget refusal, then a failed search
    await pg.query(
      `UPDATE x_stream_owed SET due_at = now() + interval '1 minute', last_error = '429' WHERE id = ANY($1)`,
      [owed.map((o) => o.id)],
    );
    await pg.query(
      `UPDATE x_stream_owed SET due_at = now() + interval '2 minutes', last_error = 'boom', attempts = attempts + 1
       WHERE reason = 'overflow'`,
    );
    expect(await gaps()).toEqual([
      { target_key: 'jo', reason: 'stream_down', filled: false },
      { target_key: 'kim', reason: 'budget_refused', filled: false },
      { target_key: 'lu', reason: 'budget_refused', filled: false },
    ]);
    await pg.query(`DELETE FROM x_stream_owed WHERE reason IN ('gap', 'rules')`);
    expect(await gaps()).toEqual([
      { target_key: 'jo', reason: 'stream_down', filled: true },
      { target_key: 'kim', reason: 'budget_refused', filled: true },
      { target_key: 'lu', reason: 'budget_refused', filled: false },
    ]);
  });

  it("tells whether the watched account is pushed by the X Activity API (the monitor's own event types) or polled", async () => {
    const { rows: a } = await pg.query<{ id: string }>(
      `INSERT INTO accounts (email, plan) VALUES ('pam@example.com', 'starter'), ('other@example.com', 'starter') RETURNING id`,
    );
    const [own, other] = [a[0]!.id, a[1]!.id];
    const watch = async (accountId: string, events: string[], extra = '') => {
      const { rows } = await pg.query<{ id: string }>(
        `INSERT INTO monitors (account_id, target_username, target_key, events, created_at ${extra ? ', is_active' : ''})
         VALUES ($1, 'Pam', 'pam', $2, '2027-05-01Z' ${extra ? `, ${extra}` : ''}) RETURNING id`,
        [accountId, events],
      );
      return { id: rows[0]!.id, targetKey: 'pam', createdAt: new Date('2027-05-01Z') };
    };
    const profile = await watch(own, ['posts', 'profile']);
    const deletes = await watch(other, ['deletes']);
    const postsOnly = await watch(own, ['posts']);
    const paused = await watch(own, ['profile'], 'false');
    const { rows: q } = await pg.query<{ id: string }>(
      `INSERT INTO monitors (account_id, query, created_at) VALUES ($1, 'launch', '2027-05-01Z') RETURNING id`,
      [own],
    );
    const query = { id: q[0]!.id, targetKey: null, createdAt: new Date('2027-05-01Z') };
    const intake = async (m: CoverageMonitor) => (await readMonitorCoverage(db, m, NOW)).intake;
    const polled = { path: 'polled', eventTypes: [], confirmedAt: null };
    const profileTypes = [
      'profile.update.bio',
      'profile.update.handle',
      'profile.update.profile_picture',
      'profile.update.screenname',
      'profile.update.verified_badge',
    ];

    // the account lookup's first look; no subscription yet
    await pg.query(
      `INSERT INTO target_profiles (target_key, user_id, username, name, verified) VALUES ('pam', '42', 'Pam', 'Pam', false)`,
    );
    expect(await intake(profile)).toEqual(polled);
    const confirmed = new Date('2027-06-16T11:59:00Z');
    await pg.query(
      `INSERT INTO x_activity_accounts (target_key, user_id, event_types, updated_at) VALUES ('pam', '42', $1, $2)`,
      [[...profileTypes, 'post.delete'], confirmed],
    );
    // recorded, but no replica holds the activity stream's lease
    expect(await intake(profile)).toEqual(polled);
    await pg.query(
      `INSERT INTO x_stream_lease (name, holder, fence, expires_at) VALUES ('x-activity', 'replica-a', 1, now() + interval '1 minute')`,
    );
    expect(await intake(profile)).toEqual({ path: 'pushed', eventTypes: profileTypes, confirmedAt: confirmed });
    // each monitor sees only the types its own events use: never another tenant's
    expect(await intake(deletes)).toEqual({ path: 'pushed', eventTypes: ['post.delete'], confirmedAt: confirmed });
    expect(await intake(postsOnly)).toEqual(polled);
    expect(await intake(paused)).toEqual(polled);
    expect(await intake(query)).toBeNull();
    // X_INTAKE_ACTIVITY=all: post.create carries the posts
    await pg.query(`UPDATE x_activity_accounts SET event_types = event_types || '{post.create}'`);
    expect(await intake(postsOnly)).toEqual({ path: 'pushed', eventTypes: ['post.create'], confirmedAt: confirmed });
    // the username now names another account: its subscriptions are not this one's
    await pg.query(`UPDATE target_profiles SET user_id = '43' WHERE target_key = 'pam'`);
    expect(await intake(profile)).toEqual(polled);
    await pg.query(`UPDATE target_profiles SET user_id = '42' WHERE target_key = 'pam'`);
    // the lease lapsed (no replica holds the stream): polled again
    await pg.query(`UPDATE x_stream_lease SET expires_at = now() - interval '1 second' WHERE name = 'x-activity'`);
    expect(await intake(profile)).toEqual(polled);
  });
});
