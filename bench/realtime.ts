/**
 * `npm run bench:realtime`: how fast a post becomes a signed webhook.
 *
 * Local store: the poller and the webhook dispatcher run as child processes (as deployed), with
 * the plan defaults (no POLL_INTERVAL_SECONDS: a Starter target's interval is 60 s, so anything
 * under that is the push). BENCH_TARGETS (default 200) targets, one Starter monitor each with a
 * webhook to a local HTTPS receiver that verifies every signature; posts at BENCH_RATE per second
 * (default 5) for BENCH_SECONDS (default 30) to random targets. Latency = receipt at the receiver
 * − the moment before the post's insert. Prints p50, p99, lost (posted, never received within
 * 30 s after the last post) and bad signatures; last line
 * `local_post_to_webhook_p50_ms <a> p99_ms <b> lost <n>`.
 *
 * X modes (bench/realtimeX.ts: search, timeline; bench/realtimeStream.ts: stream; see X_MODE_RUNS
 * below) run against the fake X of @sts/testing with Pro-like windows:
 * BENCH_X_TARGETS (1,000) targets, the same rate and duration (the target's run: BENCH_SECONDS=120),
 * then a drain until every post is hit or BENCH_X_DRAIN_SECONDS (default per mode; `timeline` 16
 * minutes: lost is reported apart from late). BENCH_X=0 skips them; BENCH_X_MODES=search,timeline
 * picks some. BENCH_POST_VIA=cli posts through `npm run cli -- social tweet` instead (bench/realtimeCli.ts).
 *
 * Own database, vhost and Redis key prefix, removed afterwards. The receivers use the test CA
 * (packages/testing/src/https.ts), trusted through NODE_EXTRA_CA_CERTS: this script re-runs
 * itself with it set.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { loadDevEnv } from '../packages/common/src';
import { createSecretBox } from '../packages/core/src';
import { createDbClient, type Db } from '../packages/db/src';
import { verify } from '../packages/signing/src';
import { createSocialTweet, createSocialUser } from '../packages/social/src';
import { startHttpsReceiver, type HttpsReceiver } from '../packages/testing/src/https';
import { createVhost, deleteVhosts, type ServiceUrls } from '../packages/testing/src/services';
import { createAccount, createMonitor, type MonitorFixture } from '../packages/testing/src/fixtures';
import { runXBench, type XBenchOptions } from './realtimeX';
import { runStreamBench } from './realtimeStream';
import { runCliPosts, type Receipt } from './realtimeCli';
import { createKey, idleStreamsMemory, openSse, startGateway, type SseGateway } from './realtimeSse';
import { percentile, positiveEnv } from './lib/numbers';
import { paced } from './lib/pace';
import {
  createDatabase,
  deleteKeys,
  dropDatabase,
  serviceUrls,
  startService,
  stopChild,
  trustTestCa,
  tsxEntry,
} from './lib/services';

const TARGETS = positiveEnv('BENCH_TARGETS', 200);
const RATE = positiveEnv('BENCH_RATE', 5);
const SECONDS = positiveEnv('BENCH_SECONDS', 30);
const DRAIN_MS = 30_000;
const X_TARGETS = positiveEnv('BENCH_X_TARGETS', 1000);
/** BENCH_SSE=1: the gateway runs too and an SSE client on GET /api/v1/stream times each post's event */
const SSE = process.env.BENCH_SSE === '1';
const SSE_STREAMS = positiveEnv('BENCH_SSE_STREAMS', 1000);

const log = (msg: string) => console.log(`[bench:realtime] ${msg}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Receipts {
  /** tweet id → its first verified receipt (ms) and the body's createdAt and detectedAt */
  at: Map<string, Receipt>;
  badSignatures: number;
}

/** The receiver: verifies each signature with its monitor's secret, records the first receipt of each tweet. */
async function startReceiver(secrets: Map<string, string>, receipts: Receipts): Promise<HttpsReceiver> {
  return startHttpsReceiver({
    record: false,
    onRequest: (req) => {
      const monitorId = req.path.split('/').pop() ?? '';
      try {
        verify({
          body: req.rawBody,
          headers: req.headers,
          secret: secrets.get(monitorId) ?? '',
        });
      } catch {
        receipts.badSignatures++;
        return;
      }
      const body = JSON.parse(req.rawBody.toString('utf8')) as {
        tweet: { id: string; createdAt: string };
        detectedAt: string;
      };
      if (!receipts.at.has(body.tweet.id))
        receipts.at.set(body.tweet.id, {
          at: req.receivedAt,
          createdAt: Date.parse(body.tweet.createdAt),
          detectedAt: Date.parse(body.detectedAt),
        });
    },
  });
}

interface LocalSetup {
  accountId: string;
  usernames: string[];
  secrets: Map<string, string>;
}

async function seedLocal(db: Db, key: string, receiverUrl: string): Promise<LocalSetup> {
  const box = createSecretBox(key);
  const account = await createAccount(db, 'starter');
  const usernames: string[] = [];
  const secrets = new Map<string, string>();
  for (let i = 0; i < TARGETS; i++) {
    const username = `rt_target_${i}`;
    await createSocialUser(db, { username, name: username });
    const m: MonitorFixture = await createMonitor(db, box, {
      accountId: account.id,
      targetUsername: username,
      url: `${receiverUrl}/hooks/pending`,
    });
    // the path names the monitor, so the receiver knows which secret signs it
    await db.webhookEndpoint.update({ where: { monitorId: m.id }, data: { url: `${receiverUrl}/hooks/${m.id}` } });
    secrets.set(m.id, m.secret!);
    usernames.push(username);
  }
  return { accountId: account.id, usernames, secrets };
}

/** Posts at RATE per second for SECONDS; returns tweet id → the moment before its insert. */
async function postSteadily(db: Db, usernames: readonly string[]): Promise<Map<string, number>> {
  const posted = new Map<string, number>();
  const inFlight: Promise<void>[] = [];
  await paced(RATE, SECONDS, (i) => {
    const author = usernames[Math.floor(Math.random() * usernames.length)]!;
    const at = Date.now();
    inFlight.push(
      createSocialTweet(db, { authorUsername: author, text: `realtime post ${i}` }).then(
        (t) => void posted.set(t.id, at),
      ),
    );
  });
  await Promise.all(inFlight);
  return posted;
}

async function waitUntil(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await check()) return true;
    await sleep(100);
  }
  return check();
}

interface Env {
  urls: ServiceUrls;
  dbUrl: string;
  amqpUrl: string;
  prefix: string;
  key: string;
}

/** what a developer's shell next to the services holds for `npm run cli` */
function cliEnv(e: Env): NodeJS.ProcessEnv {
  return { ...process.env, DATABASE_URL: e.dbUrl, SECRETS_ENCRYPTION_KEY: e.key, LOG_LEVEL: 'warn' };
}

function serviceEnv(e: Env): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: e.dbUrl,
    AMQP_URL: e.amqpUrl,
    REDIS_URL: e.urls.redis,
    REDIS_KEY_PREFIX: e.prefix,
    SECRETS_ENCRYPTION_KEY: e.key,
    WEBHOOK_ALLOW_PRIVATE_HOSTS: 'localhost',
    OPS_PORT: '0',
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
    SOCIAL_SOURCE: 'local',
  };
  delete env.POLL_INTERVAL_SECONDS; // the plan defaults
  return env;
}

export interface LatencyResult {
  posted: number;
  received: number;
  lost: number;
  p50: number;
  p99: number;
  badSignatures: number;
  /** BENCH_SSE=1: post → SSE event at the client, and the memory of idle streams */
  sse?: { received: number; p50: number; p99: number; streams: number; addedMiB: number };
}

/** The local store: post → signed webhook received. */
async function runLocal(e: Env, db: Db): Promise<LatencyResult | null> {
  const receipts: Receipts = { at: new Map(), badSignatures: 0 };
  const secrets = new Map<string, string>();
  const receiver = await startReceiver(secrets, receipts);
  const children: ChildProcess[] = [];
  let sseClient: { close(): void } | undefined;
  try {
    const setup = await seedLocal(db, e.key, receiver.url);
    for (const [k, v] of setup.secrets) secrets.set(k, v);
    // from the TypeScript sources, as in development
    for (const name of ['webhook-dispatcher', 'poller'])
      children.push((await startService(name, serviceEnv(e), { entry: tsxEntry(name) })).child);
    let gw: SseGateway | undefined;
    const sseAt = new Map<string, number>();
    let sseKey = '';
    if (SSE) {
      // before the gateway starts: its live-key filter reads the keys at start (a key written
      // straight to the database later is unknown to it, 401)
      sseKey = await createKey(db, setup.accountId);
      gw = await startGateway(serviceEnv(e));
      children.push(gw.child);
      sseClient = await openSse(gw.port, sseKey, (id, at) => void (sseAt.has(id) || sseAt.set(id, at)));
    }
    // every target polled once (new targets are due at once) and pushed: the run starts warm
    const ready = await waitUntil(
      async () => (await db.pollTarget.count({ where: { pushed: true, activeMonitors: { gt: 0 } } })) === TARGETS,
      120_000,
    );
    if (!ready) throw new Error('the poller did not schedule every target within 120 s');
    if (process.env.BENCH_POST_VIA === 'cli') {
      log(`${TARGETS} targets ready; posting through the CLI`);
      await runCliPosts({ env: cliEnv(e), dbUrl: e.dbUrl, usernames: setup.usernames, receipts: receipts.at, log });
      return null;
    }
    log(`${TARGETS} targets ready; posting ${RATE}/s for ${SECONDS} s`);
    const posted = await postSteadily(db, setup.usernames);
    await waitUntil(() => [...posted.keys()].every((id) => receipts.at.has(id) && (!SSE || sseAt.has(id))), DRAIN_MS);
    let sse: LatencyResult['sse'];
    if (gw) {
      const l = [...posted].filter(([id]) => sseAt.has(id)).map(([id, at]) => sseAt.get(id)! - at);
      l.sort((a, b) => a - b);
      const mem = await idleStreamsMemory(gw, sseKey, SSE_STREAMS, log);
      sse = {
        received: l.length,
        p50: percentile(l, 50),
        p99: percentile(l, 99),
        streams: mem.opened,
        addedMiB: mem.after - mem.before,
      };
    }
    const latencies = [...posted].filter(([id]) => receipts.at.has(id)).map(([id, at]) => receipts.at.get(id)!.at - at);
    latencies.sort((a, b) => a - b);
    return {
      posted: posted.size,
      received: latencies.length,
      lost: posted.size - latencies.length,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      badSignatures: receipts.badSignatures,
      sse,
    };
  } finally {
    sseClient?.close();
    for (const c of children.reverse()) await stopChild(c);
    await receiver.close();
  }
}

/**
 * X runs, one entry per mode, against the fake X (packages/testing/src/fakeX). A run prints its own
 * figures: upstream requests, 429s, post → hit p50/p99, lost hits. What a run gets: the bench's
 * settings, and the local run's database (the stream run uses it).
 */
export type XModeRun = (o: XBenchOptions) => Promise<void>;
export const X_MODE_RUNS: Record<string, XModeRun> = {
  search: (o) => runXBench('search', o),
  timeline: (o) => runXBench('timeline', o),
  // the filtered stream with a forced disconnect half-way (its lost hits included)
  stream: (o) => runStreamBench(o),
};

async function runXModes(e: Env): Promise<void> {
  if (process.env.BENCH_X === '0') return;
  const only = process.env.BENCH_X_MODES?.split(',').filter(Boolean);
  for (const [mode, run] of Object.entries(X_MODE_RUNS)) {
    if (only && !only.includes(mode)) continue;
    log(`X mode ${mode}: ${X_TARGETS} targets, ${RATE}/s for ${SECONDS} s`);
    await run({
      adminUrl: e.urls.postgres,
      redisUrl: e.urls.redis,
      prefix: `${e.prefix}x:`,
      targets: X_TARGETS,
      rate: RATE,
      seconds: SECONDS,
      // unset: each mode's own drain limit (timeline 16 min, search 90 s, stream 30 s)
      ...(process.env.BENCH_X_DRAIN_SECONDS ? { drainSeconds: positiveEnv('BENCH_X_DRAIN_SECONDS', 90) } : {}),
      log,
    });
  }
}

async function dropAll(e: Env, dbName: string, vhost: string): Promise<void> {
  await dropDatabase(e.urls.postgres, dbName);
  await deleteVhosts(e.urls, vhost).catch(() => undefined);
  await deleteKeys(e.urls.redis, e.prefix);
}

async function main(): Promise<void> {
  loadDevEnv();
  await trustTestCa(__filename);
  const urls = serviceUrls();
  const id = randomBytes(4).toString('hex');
  const dbName = `sts_bench_${id}`;
  const vhost = `sts_bench_${id}`;
  const e: Env = {
    urls,
    dbUrl: await createDatabase(urls.postgres, dbName),
    amqpUrl: await createVhost(urls, vhost),
    prefix: `bench:${id}:`,
    key: randomBytes(32).toString('base64'),
  };
  const db = createDbClient({ url: e.dbUrl, poolSize: 8 });
  try {
    // BENCH_LOCAL=0: the X runs only
    const r = process.env.BENCH_LOCAL === '0' ? null : await runLocal(e, db);
    if (r) log(`local: posted ${r.posted}, received ${r.received}, bad signatures ${r.badSignatures}`);
    await runXModes(e);
    if (r?.sse)
      console.log(
        `local_post_to_sse_event_p50_ms ${Math.round(r.sse.p50)} p99_ms ${Math.round(r.sse.p99)} lost ${r.posted - r.sse.received} idle_streams ${r.sse.streams} added_rss_mib ${r.sse.addedMiB.toFixed(1)}`,
      );
    if (r) console.log(`local_post_to_webhook_p50_ms ${Math.round(r.p50)} p99_ms ${Math.round(r.p99)} lost ${r.lost}`);
  } finally {
    await db.$disconnect();
    await dropAll(e, dbName, vhost);
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
