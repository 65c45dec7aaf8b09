/**
 * The X `stream` mode on the real PostgreSQL against the fake X (filtered stream, rules, search):
 * rules follow monitors, posts become hits through the poller's recording path, a disconnect and
 * a stall lose nothing (backfill), a killed holder process fails over, two replicas hold one
 * connection, and every (monitor, tweet) is exactly one hit and one event whatever the overlap.
 */
import { Registry } from 'prom-client';
import { createAccount, spawnService, startFakeX, waitFor, type FakeStream, type FakeX } from '@sts/testing';
import { withLastCheck, type Db } from '@sts/db';
import { parseRule } from '@sts/x-stream/src/domain/streamRules';
import { useStreamHarness } from '../../../test/streamMode';

const h = useStreamHarness('stream-test');
// the harness's fields under short names, current in every test
let db: Db;
let fake: FakeX;
let stream: FakeStream;
beforeEach(() => {
  ({ db, fake, stream } = h);
});
const startMode = h.startMode.bind(h);
const hitsOf = h.hitsOf.bind(h);

async function monitor(username: string, plan: 'free' | 'starter' = 'starter', keywords: string[] = []) {
  if (!fake.state.user(username)) fake.state.addUser({ username });
  const account = await createAccount(db, plan);
  return db.monitor.create({
    data: { accountId: account.id, targetUsername: username, targetKey: username.toLowerCase(), keywords },
  });
}

const ruled = (): string[] =>
  stream
    .rules()
    .flatMap((r) => parseRule({ value: r.value, tag: r.tag }) ?? [])
    .sort();

/** every hit has exactly one event, and no (monitor, tweet) twice */
async function expectOneEventPerHit(): Promise<void> {
  const hits = await db.hit.count();
  expect(await db.outboxEvent.count()).toBe(hits);
}

describe('X stream mode', () => {
  it('rules follow monitors: Starter and trial targets in, Free-only out, pause and delete remove them', async () => {
    const a = await monitor('alice');
    await monitor('bob', 'free');
    const trial = await db.account.create({
      data: { email: 'trial@example.test', plan: 'free', trialEndsAt: new Date(Date.now() + 86_400_000) },
    });
    fake.state.addUser({ username: 'Carol' });
    const c = await db.monitor.create({
      data: { accountId: trial.id, targetUsername: 'Carol', targetKey: 'carol', keywords: [] },
    });
    startMode();
    await waitFor(() => ruled().join() === 'alice,carol');
    for (const r of stream.rules()) expect(r.tag).toMatch(/^sts:/);

    await db.monitor.update({ where: { id: a.id }, data: { isActive: false } });
    await waitFor(() => ruled().join() === 'carol');
    await db.monitor.delete({ where: { id: c.id } });
    await waitFor(() => stream.rules().length === 0);
  });

  it('a post reaches the hit and outbox path at once, keywords and all, one hit per monitor', async () => {
    const all = await monitor('dave');
    const ship = await monitor('dave', 'starter', ['ship']);
    startMode();
    await waitFor(() => stream.connections() === 1 && ruled().includes('dave'));
    const t1 = fake.state.post({ author: 'dave', text: 'we ship today' });
    const t2 = fake.state.post({ author: 'dave', text: 'lunch' });
    await waitFor(async () => (await hitsOf(all.id)).length === 2);
    expect(await hitsOf(all.id)).toEqual([t1.id, t2.id].sort());
    expect(await hitsOf(ship.id)).toEqual([t1.id]);
    const event = await db.outboxEvent.findFirst({
      where: { headers: { path: ['accountId'], equals: ship.accountId } },
    });
    expect(event?.payload).toMatchObject({ event: 'monitor.hit', tweet: { id: t1.id, text: 'we ship today' } });
    await expectOneEventPerHit();
  });

  it('a forced disconnect loses nothing: the gap is backfilled by search, no hit twice', async () => {
    const m = await monitor('erin');
    const registry = new Registry();
    startMode({}, registry);
    await waitFor(() => stream.connections() === 1 && ruled().includes('erin'));
    const before = fake.state.post({ author: 'erin', text: 'before' });
    await waitFor(async () => (await hitsOf(m.id)).length === 1);
    await waitFor(() => fake.requests.count({ family: 'search' }) >= 1);
    await new Promise((r) => setTimeout(r, 200));
    const searches = fake.requests.count({ family: 'search' });
    stream.disconnect();
    // posted while no stream is connected: only a backfill can find these
    const during = [1, 2, 3].map((i) => fake.state.post({ author: 'erin', text: `during ${i}` }));
    await waitFor(() => stream.connects() >= 2);
    const after = fake.state.post({ author: 'erin', text: 'after' });
    const all = [before, ...during, after].map((t) => t.id).sort();
    await waitFor(async () => (await hitsOf(m.id)).join() === all.join(), 15_000);
    expect(fake.requests.count({ family: 'search' })).toBeGreaterThan(searches);
    const metrics = await registry.metrics();
    expect(metrics).toMatch(/poller_x_stream_reconnects_total\{reason="(network|dropped)"\} [1-9]/);
    expect(metrics).toMatch(/poller_x_stream_backfilled_posts_total [1-9]/);
    expect(metrics).toMatch(/detection_latency_seconds_count\{source="x",mode="stream"\} [1-9]/);
    await expectOneEventPerHit();
  });

  it('a stall (no byte, not even a keep-alive) is detected and its posts are backfilled', async () => {
    const m = await monitor('frank');
    const registry = new Registry();
    startMode({}, registry);
    await waitFor(() => stream.connections() === 1 && ruled().includes('frank'));
    // the new rule's backfill is done (a first start's connection leaves the new rules to it)
    await waitFor(() => fake.requests.count({ family: 'search' }) >= 1);
    await new Promise((r) => setTimeout(r, 200));
    stream.stall();
    const lost = [1, 2].map((i) => fake.state.post({ author: 'frank', text: `stalled ${i}` }));
    await waitFor(
      async () =>
        (await hitsOf(m.id)).join() ===
        lost
          .map((t) => t.id)
          .sort()
          .join(),
      15_000,
    );
    expect(stream.connects()).toBeGreaterThanOrEqual(2);
    expect(await registry.metrics()).toMatch(/poller_x_stream_reconnects_total\{reason="stall"\} [1-9]/);
    await expectOneEventPerHit();
  });

  it('two replicas: one holds the only connection; the other takes over when it stops', async () => {
    const m = await monitor('gina');
    const one = startMode();
    const two = startMode();
    await waitFor(() => stream.connections() === 1 && ruled().includes('gina'));
    await new Promise((r) => setTimeout(r, 500));
    expect([one.isHolder(), two.isHolder()].filter(Boolean)).toHaveLength(1);
    expect(stream.connects()).toBe(1);
    const holder = one.isHolder() ? one : two;
    const other = holder === one ? two : one;
    await holder.stop();
    const posted = fake.state.post({ author: 'gina', text: 'during the failover' });
    await waitFor(() => other.isHolder() && stream.connections() === 1);
    await waitFor(async () => (await hitsOf(m.id)).join() === posted.id, 15_000);
    // set-up and failover cost a handful of requests, not one per post or per target
    expect(fake.requests.count({ family: 'stream_connect', status: 429 })).toBe(0);
    await expectOneEventPerHit();
  });

  it('a killed holder process fails over: the survivor connects and backfills from the saved position', async () => {
    const m = await monitor('hank');
    const proc = spawnService('services/poller/src/main.ts', h.processEnv());
    try {
      await proc.waitForLine(/X stream connected/);
      await waitFor(() => ruled().includes('hank'));
      const first = fake.state.post({ author: 'hank', text: 'seen by the first holder' });
      await waitFor(async () => (await hitsOf(m.id)).includes(first.id));
      // its position is saved every sync (2 s)
      await waitFor(
        async () =>
          (await db.$queryRaw<unknown[]>`SELECT 1 FROM x_stream_state WHERE alive_at IS NOT NULL`).length === 1,
      );
      const survivor = startMode();
      await new Promise((r) => setTimeout(r, 400));
      expect(survivor.isHolder()).toBe(false);
      proc.child.kill('SIGKILL');
      await proc.exited;
      const lost = fake.state.post({ author: 'hank', text: 'while nobody holds the stream' });
      await waitFor(() => survivor.isHolder(), 15_000);
      await waitFor(async () => (await hitsOf(m.id)).join() === [first.id, lost.id].sort().join(), 15_000);
      await expectOneEventPerHit();
    } finally {
      proc.child.kill('SIGKILL');
      await proc.exited;
    }
  });

  it('two replicas never exceed the stream_connect budget, however often X drops the stream', async () => {
    await fake.stop();
    // 3 connects per 3-second window: the shared governor must refuse the 4th itself
    fake = h.fake = await startFakeX({ routes: stream.routes, limits: { stream_connect: 3 }, windowMs: 3000 });
    const m = await monitor('olga');
    startMode();
    startMode();
    await waitFor(() => stream.connections() === 1 && ruled().includes('olga'));
    const posted: string[] = [];
    for (let i = 0; i < 6; i++) {
      stream.disconnect();
      posted.push(fake.state.post({ author: 'olga', text: `drop ${i}` }).id);
      await new Promise((r) => setTimeout(r, 300));
    }
    await waitFor(async () => (await hitsOf(m.id)).join() === posted.sort().join(), 20_000);
    expect(fake.requests.count({ family: 'stream_connect', status: 429 })).toBe(0);
    expect(fake.requests.count({ status: 429 })).toBe(0);
    await expectOneEventPerHit();
  });

  it('beyond X_MAX_RULES the overflow is polled by search instead, and reported', async () => {
    const names = ['ivan', 'jill', 'kate', 'liam', 'mona'];
    const monitors = await Promise.all(names.map((n) => monitor(n)));
    // posted before the holder starts: the stream never delivers them, the overflow search must
    const posts = names.map((n) => fake.state.post({ author: n, text: `early post of ${n}` }));
    const registry = new Registry();
    // a rule of at most 25 characters holds two usernames: 2 rules, one target left over
    startMode({ X_MAX_RULES: 2, X_RULE_MAX_LENGTH: 25 }, registry);
    await waitFor(() => stream.rules().length === 2 && stream.connections() === 1);
    expect(await registry.metrics()).toMatch(/poller_x_stream_overflow_targets 1/);
    const idx = names.findIndex((n) => !ruled().includes(n));
    expect(idx).toBeGreaterThanOrEqual(0);
    await waitFor(async () => (await hitsOf(monitors[idx]!.id)).includes(posts[idx]!.id), 15_000);
    expect(fake.requests.count({ family: 'search' })).toBeGreaterThan(0);
  });

  it('set-up costs at most one request per 20 targets: rules, one connect, the backfill; no user lookup', async () => {
    const account = await createAccount(db, 'starter');
    const names = Array.from({ length: 200 }, (_, i) => `su_${String(i).padStart(3, '0')}`);
    for (const n of names) fake.state.addUser({ username: n });
    await db.monitor.createMany({
      data: names.map((n) => ({ accountId: account.id, targetUsername: n, targetKey: n, keywords: [] })),
    });
    // rules of 64 characters here (the fake's limit; X's is 1,024+): 4 usernames a rule, 50 rules in one call
    startMode();
    await waitFor(() => stream.connections() === 1 && ruled().length === names.length, 15_000);
    // the new rules' backfill (X_RULE_SETTLE_SECONDS 0 here): every group searched once
    const groups = Math.ceil(names.length / Math.floor(512 / ' OR from:su_000'.length));
    await waitFor(() => fake.requests.count({ family: 'search' }) >= groups);
    await new Promise((r) => setTimeout(r, 1000));
    expect(fake.requests.count({ family: 'users' })).toBe(0);
    expect(fake.requests.log.length).toBeLessThanOrEqual(names.length / 20);
    // a post still becomes a hit: the stream needed no user id
    const m = await db.monitor.findFirstOrThrow({ where: { targetKey: 'su_007' } });
    const t = fake.state.post({ author: 'su_007', text: 'hello' });
    await waitFor(async () => (await hitsOf(m.id)).includes(t.id));
  });

  it('renamed and suspended accounts show as last_error by the background check, cleared when readable again', async () => {
    const nina = await monitor('nina');
    const omar = await monitor('omar');
    const pete = await monitor('pete');
    // cache TTL 1 s: a sighting ages out within the test (X_USER_CACHE_TTL_SECONDS, 1 h by default)
    startMode({}, new Registry(), { userCheckMs: 400, userCacheTtlSeconds: 1 });
    await waitFor(() => stream.connections() === 1 && ruled().join() === 'nina,omar,pete');
    expect(fake.requests.count({ family: 'users' })).toBe(0); // not at set-up
    // the first background pass looks the accounts up (and learns their ids)
    await waitFor(() => fake.requests.count({ family: 'users' }) >= 1, 10_000);
    fake.state.rename('nina', 'nina_new');
    fake.state.suspend('omar');
    const errorOf = async (id: string) =>
      (await withLastCheck(db, [await db.monitor.findUniqueOrThrow({ where: { id } })]))[0]!.lastError;
    await waitFor(async () => /renamed/.test((await errorOf(nina.id)) ?? ''), 15_000);
    await waitFor(async () => /suspended/.test((await errorOf(omar.id)) ?? ''), 15_000);
    expect(await errorOf(nina.id)).toMatch(/@nina was renamed on X: account \d+ is now @nina_new/);
    expect(await errorOf(pete.id)).toBeNull();
    // on the target's cursor too; no poll happened (the tick's fallback schedule is untouched)
    const cursor = await db.pollCursor.findUniqueOrThrow({ where: { targetKey: 'omar' } });
    expect(cursor).toMatchObject({ lastError: expect.stringMatching(/suspended/), lastPolledAt: null });
    fake.state.suspend('omar', false);
    await waitFor(async () => (await errorOf(omar.id)) === null, 15_000);
    expect(await errorOf(nina.id)).toMatch(/renamed/);
  });
});
