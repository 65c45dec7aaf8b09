/**
 * `npm run bench:activity`: the X Activity API intake (XAA) against the fake X of packages/testing
 * (its XAA: fakeX/activity.ts). The poller and the webhook dispatcher run as child processes (as
 * deployed, BENCH_RUNTIME as in bench/lib/services.ts) with SOCIAL_SOURCE=x, X_MONITOR_MODE=search
 * (no filtered stream to fake; posts as today are searched) and the plan defaults. BENCH_XAA_TARGETS
 * (2,000) X accounts, each watched by one Starter username monitor with `events` posts, profile,
 * deletes and a webhook to a local HTTPS receiver that verifies every signature.
 *
 * The X tier modelled: Enterprise (X_ACTIVITY_MAX_SUBS and the fake's limit 20,000): 2,000
 * accounts want 6 subscriptions each (5 profile types and `post.delete`; `all` adds `post.create`),
 * which Pro's 2,500 cannot hold (416 accounts). The fake's search window is raised (the search
 * intake's budget is not under test here); users, the account lookup's family, keeps its Pro
 * window (300 per 15 minutes). The subscription calls go through the governor's `rules` family,
 * whose Pro-like default (450 per 15 minutes, shared with the filtered stream's rules) would take
 * hours to create 12,000 subscriptions: the poller gets X_RATE_LIMITS `rules=` BENCH_XAA_RULES_LIMIT
 * (100,000; X documents no rate limit for the subscription endpoints that the fake could copy).
 *
 * Phases, X_INTAKE_ACTIVITY=profiles (the default):
 * 1. set-up: until every account is pushed (x_activity_accounts) and the activity stream is up
 *    (at most BENCH_XAA_SETUP_MINUTES, 40: the subscriptions are created one call each);
 * 2. reads: every account's last look spread over the last X_HEALTH_LOOKUP_SECONDS (3,600), as
 *    after hours of running, then the users reads X answers (user objects in `GET /2/users?ids=`
 *    and `/2/users/by…`) over the rest of the phase, at least BENCH_XAA_READS_SECONDS (240) →
 *    reads per watched account per day (× 86,400 / the window's seconds);
 * 3. profile: BENCH_XAA_RATE (10) bio changes a second for BENCH_XAA_SECONDS (30) on random
 *    accounts → the change at the fake X → signed `monitor.profile_changed` received, p50/p99;
 * 4. deletes: posts made at the start (searched meanwhile, so most have a hit), deleted at the same
 *    rate → signed `monitor.post_deleted` received, p50/p99.
 * Then the poller restarts with X_INTAKE_ACTIVITY=all and a Starter interval of a day, so that a
 * post can only become a hit through `post.create` (the searches during the phase are printed):
 * 5. posts, once a probe post is hit (the restarted holder first handles X's replay of the last 5
 *    minutes; the probe's wait is printed as `restart_probe_s`): the same rate → hit recorded
 *    (detected_at − the post's time) and signed `monitor.hit` received, p50/p99;
 * 6. gap: the activity stream down (503s) for BENCH_XAA_GAP_SECONDS (60) with one post a second
 *    → lost (no hit within BENCH_XAA_DRAIN_SECONDS, 180, of the stream's return), and how long
 *    after the return the last one was hit.
 *
 * One line per target at the end (`xaa_…`). Own database, vhost and Redis prefix, removed
 * afterwards. Run: `npm run bench:activity` (re-runs itself with the test CA trusted).
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { loadDevEnv } from '../packages/common/src';
import { classifyWebhookUrl, createSecretBox, generateWebhookSecret } from '../packages/core/src';
import { createDbClient, type Db } from '../packages/db/src';
import { verify } from '../packages/signing/src';
import { createFakeActivity, startFakeX, type FakeActivity, type FakeX } from '../packages/testing/src/fakeX';
import { startHttpsReceiver, type HttpsReceiver } from '../packages/testing/src/https';
import { createVhost, deleteVhosts } from '../packages/testing/src/services';
import { percentile, positiveEnv } from './lib/numbers';
import { paced } from './lib/pace';
import {
  createDatabase,
  deleteKeys,
  dropDatabase,
  serviceUrls,
  stopChild,
  startService,
  trustTestCa,
} from './lib/services';

const TARGETS = positiveEnv('BENCH_XAA_TARGETS', 2000, { whole: true });
const RATE = positiveEnv('BENCH_XAA_RATE', 10);
const SECONDS = positiveEnv('BENCH_XAA_SECONDS', 30);
const READS_SECONDS = positiveEnv('BENCH_XAA_READS_SECONDS', 240);
const GAP_SECONDS = positiveEnv('BENCH_XAA_GAP_SECONDS', 60);
const DRAIN_SECONDS = positiveEnv('BENCH_XAA_DRAIN_SECONDS', 180);
const RULES_LIMIT = positiveEnv('BENCH_XAA_RULES_LIMIT', 100_000, { whole: true });
const SETUP_MINUTES = positiveEnv('BENCH_XAA_SETUP_MINUTES', 40);
const MAX_SUBS = 20_000;
const HEALTH_SECONDS = 3600;
const DAY_S = 86_400;

const log = (msg: string) => console.log(`[bench:activity] ${msg}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(check: () => Promise<boolean> | boolean, timeoutMs: number, everyMs = 250): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await sleep(everyMs);
  }
  return check();
}

/** what the receiver saw: the first verified receipt of each key, by event */
interface Receipts {
  profile: Map<string, number>;
  deleted: Map<string, number>;
  hit: Map<string, number>;
  badSignatures: number;
}

interface Body {
  event: string;
  after?: { description?: string | null };
  postId?: string;
  tweet?: { id: string };
}

function startReceiver(secrets: Map<string, string>, r: Receipts): Promise<HttpsReceiver> {
  return startHttpsReceiver({
    record: false,
    onRequest: (req) => {
      const monitorId = req.path.split('/').pop() ?? '';
      try {
        verify({ body: req.rawBody, headers: req.headers, secret: secrets.get(monitorId) ?? '' });
      } catch {
        r.badSignatures++;
        return;
      }
      const body = JSON.parse(req.rawBody.toString('utf8')) as Body;
      const first = (m: Map<string, number>, key: string | null | undefined) => {
        if (key && !m.has(key)) m.set(key, req.receivedAt);
      };
      if (body.event === 'monitor.profile_changed') first(r.profile, body.after?.description);
      else if (body.event === 'monitor.post_deleted') first(r.deleted, body.postId);
      else if (body.event === 'monitor.hit') first(r.hit, body.tweet?.id);
    },
  });
}

interface Bed {
  db: Db;
  fake: FakeX;
  activity: FakeActivity;
  receipts: Receipts;
  usernames: string[];
  env: NodeJS.ProcessEnv;
}

/** the fake X's accounts, one Starter monitor each (posts, profile, deletes) with a signed webhook */
async function seed(db: Db, fake: FakeX, key: string, receiverUrl: string, secrets: Map<string, string>) {
  const box = createSecretBox(key);
  const account = await db.account.create({ data: { email: `xaa-${randomUUID()}@bench.test`, plan: 'starter' } });
  const usernames: string[] = [];
  for (let i = 0; i < TARGETS; i += 100) {
    await Promise.all(
      Array.from({ length: Math.min(100, TARGETS - i) }, async (_, j) => {
        const username = `xaa_${i + j}`;
        fake.state.addUser({ username, description: 'first bio' });
        const id = randomUUID();
        const secret = generateWebhookSecret();
        const hook = classifyWebhookUrl(`${receiverUrl}/hooks/${id}`);
        await db.monitor.create({
          data: {
            id,
            accountId: account.id,
            targetUsername: username,
            targetKey: username,
            keywords: [],
            events: ['posts', 'profile', 'deletes'],
            webhook: { create: { url: hook.url, kind: hook.kind, secretCiphertext: box.encrypt(secret, id) } },
          },
        });
        secrets.set(id, secret);
        usernames.push(username);
      }),
    );
  }
  return usernames;
}

const startChild = async (name: string, env: NodeJS.ProcessEnv): Promise<ChildProcess> =>
  (await startService(name, env)).child;

async function pushedCount(db: Db, type: string): Promise<number> {
  const [r] = await db.$queryRaw<{ n: bigint }[]>`
    SELECT count(*) AS n FROM x_activity_accounts WHERE ${type} = ANY(event_types)`;
  return Number(r!.n);
}

/** user objects X answered in the users family since `from` (the log's index) */
function userReads(fake: FakeX, from: number): { calls: number; reads: number } {
  let calls = 0;
  let reads = 0;
  for (const r of fake.requests.log.slice(from)) {
    if (r.family !== 'users' || r.status !== 200) continue;
    calls++;
    const list = r.params.get('ids') ?? r.params.get('usernames');
    reads += list ? list.split(',').length : 1;
  }
  return { calls, reads };
}

/** until every account is pushed for `type` and the activity stream is up; seconds taken */
async function waitPushed(b: Bed, type: string, what: string): Promise<number> {
  const started = Date.now();
  let last = Date.now();
  const ok = await until(async () => {
    const n = await pushedCount(b.db, type);
    if (Date.now() - last >= 30_000) {
      last = Date.now();
      log(`${what}: ${n} of ${TARGETS} accounts pushed, ${b.activity.subscriptions().length} subscriptions`);
    }
    return n === TARGETS && b.activity.connections() === 1;
  }, SETUP_MINUTES * 60_000);
  if (!ok) throw new Error(`${what}: not every account was pushed within ${SETUP_MINUTES} minutes`);
  return (Date.now() - started) / 1000;
}

interface Latency {
  sent: number;
  received: number;
  p50: number;
  p99: number;
}

function latencyOf(sent: Map<string, number>, got: Map<string, number>): Latency {
  const l = [...sent].filter(([k]) => got.has(k)).map(([k, at]) => got.get(k)! - at);
  l.sort((a, b) => a - b);
  return { sent: sent.size, received: l.length, p50: percentile(l, 50), p99: percentile(l, 99) };
}

const random = <T>(list: readonly T[]): T => list[Math.floor(Math.random() * list.length)]!;

async function drain(sent: Map<string, number>, got: Map<string, number>): Promise<void> {
  await until(() => [...sent.keys()].every((k) => got.has(k)), DRAIN_SECONDS * 1000);
}

/** phase 3: bio changes → monitor.profile_changed */
async function profileChanges(b: Bed): Promise<Latency> {
  const sent = new Map<string, number>();
  await paced(RATE, SECONDS, (i) => {
    const description = `bench bio ${i}`;
    sent.set(description, Date.now());
    b.fake.state.update(random(b.usernames), { description });
  });
  await drain(sent, b.receipts.profile);
  return latencyOf(sent, b.receipts.profile);
}

/** phase 4: deletions of the posts made at the start → monitor.post_deleted */
async function deletions(b: Bed, postIds: readonly string[]): Promise<Latency> {
  const sent = new Map<string, number>();
  await paced(RATE, SECONDS, (i) => {
    const id = postIds[i]!;
    sent.set(id, Date.now());
    b.fake.state.deletePost(id);
  });
  await drain(sent, b.receipts.deleted);
  return latencyOf(sent, b.receipts.deleted);
}

async function hitTimes(db: Db, ids: readonly string[]): Promise<Map<string, number>> {
  const rows = await db.hit.findMany({
    where: { tweetId: { in: [...ids] } },
    select: { tweetId: true, detectedAt: true },
  });
  const out = new Map<string, number>();
  for (const h of rows) if (!out.has(h.tweetId)) out.set(h.tweetId, h.detectedAt.getTime());
  return out;
}

function post(b: Bed, sent: Map<string, number>, text: string): void {
  const t = b.fake.state.post({ author: random(b.usernames), text });
  sent.set(t.id, Date.parse(t.created_at));
}

/**
 * A new holder does not know when the last one stopped: it asks X to replay all it can (5
 * minutes), and the events are handled in order, so a post made now waits for that replay. The
 * posts phase starts once one probe post is a hit; its wait is reported apart (a failover's cost).
 */
async function probe(b: Bed): Promise<number> {
  const sent = new Map<string, number>();
  post(b, sent, 'xaa probe');
  const [id, at] = [...sent][0]!;
  let hits = new Map<string, number>();
  await until(async () => (hits = await hitTimes(b.db, [id])).size === 1, DRAIN_SECONDS * 1000, 200);
  if (!hits.has(id)) throw new Error(`the probe post was not hit within ${DRAIN_SECONDS} s`);
  return (hits.get(id)! - at) / 1000;
}

/** phase 5: posts → hits through post.create */
async function posts(b: Bed): Promise<{ hit: Latency; webhook: Latency }> {
  const sent = new Map<string, number>();
  const connects = b.activity.connects();
  const start = Date.now();
  await paced(RATE, SECONDS, (i) => post(b, sent, `xaa post ${i}`));
  let hits = new Map<string, number>();
  await until(
    async () => (hits = await hitTimes(b.db, [...sent.keys()])).size === sent.size,
    DRAIN_SECONDS * 1000,
    500,
  );
  await drain(sent, b.receipts.hit);
  // where the slow ones fall (seconds into the phase: together, a pause; spread, a steady cost)
  const slow = [...sent]
    .filter(([id, at]) => (hits.get(id) ?? Infinity) - at > 1000)
    .map(([, at]) => (at - start) / 1000);
  log(
    `all: ${slow.length} posts hit after more than 1 s, posted at ${slow.map((x) => x.toFixed(1)).join(' ')} s; ` +
      `${b.activity.connects() - connects} activity stream reconnects meanwhile`,
  );
  return { hit: latencyOf(sent, hits), webhook: latencyOf(sent, b.receipts.hit) };
}

/** phase 6: the activity stream down for GAP_SECONDS, a post a second meanwhile */
async function gap(b: Bed): Promise<{ posted: number; lost: number; lastAfterS: number }> {
  const sent = new Map<string, number>();
  b.activity.outage(true);
  await paced(1, GAP_SECONDS, (i) => post(b, sent, `xaa gap post ${i}`));
  b.activity.outage(false);
  const back = Date.now();
  let hits = new Map<string, number>();
  await until(
    async () => (hits = await hitTimes(b.db, [...sent.keys()])).size === sent.size,
    DRAIN_SECONDS * 1000,
    500,
  );
  const last = Math.max(back, ...hits.values());
  return { posted: sent.size, lost: sent.size - hits.size, lastAfterS: (last - back) / 1000 };
}

function serviceEnv(
  e: { dbUrl: string; amqpUrl: string; redis: string; prefix: string; key: string },
  fakeUrl: string,
) {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: e.dbUrl,
    AMQP_URL: e.amqpUrl,
    REDIS_URL: e.redis,
    REDIS_KEY_PREFIX: e.prefix,
    SECRETS_ENCRYPTION_KEY: e.key,
    WEBHOOK_ALLOW_PRIVATE_HOSTS: 'localhost',
    OPS_PORT: '0',
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
    SOCIAL_SOURCE: 'x',
    X_API_BASE_URL: fakeUrl,
    X_BEARER_TOKEN: 'bench',
    X_MONITOR_MODE: 'search',
    X_ACTIVITY_MAX_SUBS: String(MAX_SUBS),
    X_HEALTH_LOOKUP_SECONDS: String(HEALTH_SECONDS),
    // the governor's subscription-call budget (the `rules` family; see the header)
    X_RATE_LIMITS: `rules=${RULES_LIMIT}`,
  };
  for (const k of ['POLL_INTERVAL_SECONDS', 'X_INTAKE_ACTIVITY', 'PLAN_STARTER_POLL_INTERVAL_SECONDS']) delete env[k];
  return env;
}

/** phases 1–4 (X_INTAKE_ACTIVITY=profiles) */
async function runProfiles(b: Bed) {
  const poller = await startChild('poller', { ...b.env, X_INTAKE_ACTIVITY: 'profiles' });
  try {
    // the posts deleted in phase 4, made now: the searches read them meanwhile
    const toDelete = Array.from({ length: Math.round(RATE * SECONDS) }, (_, i) => {
      return b.fake.state.post({ author: random(b.usernames), text: `to be deleted ${i}` }).id;
    });
    const setupS = await waitPushed(b, 'post.delete', 'set-up');
    const subs = b.activity.subscriptions().length;
    log(`set-up: ${TARGETS} accounts pushed in ${setupS.toFixed(0)} s, ${subs} subscriptions`);
    await b.db.$executeRaw`
      UPDATE target_profiles SET checked_at = now() - random() * make_interval(secs => ${HEALTH_SECONDS})`;
    const readsFrom = b.fake.requests.log.length;
    const readsStart = Date.now();
    const profile = await profileChanges(b);
    log(`profile: ${profile.received} of ${profile.sent} received`);
    const deleted = await deletions(b, toDelete);
    log(`deletes: ${deleted.received} of ${deleted.sent} received`);
    const rest = READS_SECONDS * 1000 - (Date.now() - readsStart);
    if (rest > 0) await sleep(rest);
    const windowS = (Date.now() - readsStart) / 1000;
    const reads = userReads(b.fake, readsFrom);
    const perDay = (reads.reads / TARGETS) * (DAY_S / windowS);
    log(
      `reads: ${reads.reads} user reads in ${reads.calls} calls over ${windowS.toFixed(0)} s for ${TARGETS} accounts`,
    );
    return { setupS, subs, profile, deleted, reads: { ...reads, windowS, perDay } };
  } finally {
    await stopChild(poller);
  }
}

/** phases 5–6 (X_INTAKE_ACTIVITY=all) */
async function runAll(b: Bed) {
  // a Starter interval of a day: no search reads a post during the phase, only post.create
  const poller = await startChild('poller', {
    ...b.env,
    X_INTAKE_ACTIVITY: 'all',
    PLAN_STARTER_POLL_INTERVAL_SECONDS: String(DAY_S),
  });
  try {
    const setupS = await waitPushed(b, 'post.create', 'all: set-up');
    log(`all: ${TARGETS} accounts pushed with post.create in ${setupS.toFixed(0)} s`);
    const probeS = await probe(b);
    log(`all: a probe post hit ${probeS.toFixed(1)} s after it was made (the new holder's replay goes first)`);
    const from = b.fake.requests.log.length;
    const p = await posts(b);
    log(`all: posts ${p.hit.received} of ${p.hit.sent} hit, ${p.webhook.received} webhooks`);
    const g = await gap(b);
    const searches = b.fake.requests.log.slice(from).filter((r) => r.family === 'search').length;
    log(`all: gap ${g.posted} posts, ${g.lost} lost, last hit ${g.lastAfterS.toFixed(1)} s after the stream was back`);
    return { posts: p, gap: g, searches, probeS };
  } finally {
    await stopChild(poller);
  }
}

const ms = (n: number) => (Number.isNaN(n) ? 'none' : String(Math.round(n)));
const met = (ok: boolean) => (ok ? 'met' : 'NOT met');

function report(a: Awaited<ReturnType<typeof runProfiles>>, all: Awaited<ReturnType<typeof runAll>>, bad: number) {
  const line = (name: string, l: Latency, extra = '') =>
    console.log(
      `xaa_${name} p50_ms ${ms(l.p50)} p99_ms ${ms(l.p99)} received ${l.received} of ${l.sent}${extra} ` +
        `(target p50 <= 1000, p99 <= 3000: ${met(l.p50 <= 1000 && l.p99 <= 3000 && l.received === l.sent)})`,
    );
  console.log(
    `xaa_setup accounts ${TARGETS} subscriptions ${a.subs} pushed_in_s ${a.setupS.toFixed(0)} bad_signatures ${bad}`,
  );
  line('profile_changed', a.profile);
  line('post_deleted', a.deleted);
  console.log(
    `xaa_user_reads_per_account_per_day ${a.reads.perDay.toFixed(1)} (${a.reads.reads} reads in ${a.reads.calls} calls ` +
      `over ${a.reads.windowS.toFixed(0)} s) (target <= 24: ${met(a.reads.perDay <= 24)})`,
  );
  const h = all.posts.hit;
  console.log(
    `xaa_all_post_to_hit p50_ms ${ms(h.p50)} p99_ms ${ms(h.p99)} hit ${h.received} of ${h.sent} ` +
      `webhook_p50_ms ${ms(all.posts.webhook.p50)} webhook_p99_ms ${ms(all.posts.webhook.p99)} searches ${all.searches} ` +
      `restart_probe_s ${all.probeS.toFixed(1)} ` +
      `(target p99 <= 3000: ${met(h.p99 <= 3000 && h.received === h.sent)})`,
  );
  console.log(
    `xaa_all_gap_${GAP_SECONDS}s posts ${all.gap.posted} lost ${all.gap.lost} last_hit_after_return_s ` +
      `${all.gap.lastAfterS.toFixed(1)} (target 0 lost: ${met(all.gap.lost === 0)})`,
  );
}

async function main(): Promise<void> {
  loadDevEnv();
  await trustTestCa(__filename);
  const urls = serviceUrls();
  const id = randomBytes(4).toString('hex');
  const dbName = `sts_bench_xaa_${id}`;
  const vhost = `sts_bench_xaa_${id}`;
  const e = {
    dbUrl: await createDatabase(urls.postgres, dbName),
    amqpUrl: await createVhost(urls, vhost),
    redis: urls.redis,
    prefix: `bench:xaa:${id}:`,
    key: randomBytes(32).toString('base64'),
  };
  const db = createDbClient({ url: e.dbUrl, poolSize: 8 });
  const activity = createFakeActivity({ maxSubscriptions: MAX_SUBS });
  const fake = await startFakeX({ routes: activity.routes, limits: { search: 1_000_000 } });
  const receipts: Receipts = { profile: new Map(), deleted: new Map(), hit: new Map(), badSignatures: 0 };
  const secrets = new Map<string, string>();
  const receiver = await startReceiver(secrets, receipts);
  let dispatcher: ChildProcess | undefined;
  try {
    const usernames = await seed(db, fake, e.key, receiver.url, secrets);
    const env = serviceEnv(e, fake.url);
    dispatcher = await startChild('webhook-dispatcher', env);
    const b: Bed = { db, fake, activity, receipts, usernames, env };
    log(`${TARGETS} accounts watched; X_INTAKE_ACTIVITY=profiles`);
    const a = await runProfiles(b);
    log('X_INTAKE_ACTIVITY=all');
    const all = await runAll(b);
    report(a, all, receipts.badSignatures);
  } finally {
    await stopChild(dispatcher);
    await receiver.close();
    await fake.stop();
    await db.$disconnect();
    await dropDatabase(urls.postgres, dbName);
    await deleteVhosts(urls, vhost).catch(() => undefined);
    await deleteKeys(urls.redis, e.prefix);
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
