/**
 * `npm run bench:pipeline`: monitor.hit events through RabbitMQ and the webhook dispatcher (a child
 * process, as deployed) to local HTTPS receivers, on its own database and vhost (both removed
 * afterwards).
 *
 *   1. throughput: BENCH_HITS (default 20,000) hits published as fast as the broker confirms;
 *      deliveries/s = hits / (last receipt - first publish)
 *   2. latency: a steady BENCH_RATE hits/s (default 200) for BENCH_SECONDS (default 10);
 *      latency = receipt at the receiver - detectedAt of the hit (set when it is published)
 *   3. isolation: a dead endpoint (TLS up, never answers) of another account gets
 *      BENCH_DEAD_BACKLOG (default 1,000) hits; once its deliveries are in flight, the healthy
 *      endpoints get BENCH_ISOLATION_RATE hits/s (default 20) for BENCH_ISOLATION_SECONDS
 *      (default 5); isolation latency = receipt - detectedAt of those healthy hits
 *   4. the poller cycle of bench/poller.ts (source calls per cycle), when that file exists
 *      (BENCH_POLLER=0 leaves it out: `source_calls_per_cycle n/a`, for rounds of the dispatcher alone)
 *
 * BENCH_VIA_PGBOUNCER=1: the dispatcher's DATABASE_URL goes through a PgBouncer in transaction
 * mode (bench/lib/pgbouncer.ts, BENCH_PGBOUNCER_POOL server connections); either way the
 * PostgreSQL backends the dispatcher holds are sampled during the phases and reported
 * (`postgres_backends peak <n> median <m>`, before the last three lines).
 *
 * Third-to-last line: `dispatcher_cpu_us_per_delivery <n>` (the dispatcher's CPU time over phases 1
 * and 2 divided by their deliveries: less sensitive to a busy machine than the rates). The log also
 * gives the two phases apart with the dispatcher's system calls per delivery (/proc/<pid>/io), and
 * what this machine charges a process for one wake-up at the latency phase's rate and at 5,000/s
 * (bench/lib/wake.ts): at 200 hits/s each delivery is handled alone, and its CPU is mostly that.
 *
 * BENCH_RUNTIME: `bundle` (default) runs the dispatcher as the image does, the bundle of
 * scripts/build.mjs under `node --enable-source-maps`; `tsx` runs the TypeScript sources through tsx.
 * Second-to-last line: `isolation_p99_ms <n>`.
 * Last line: `deliveries_per_s <n> p50_ms <a> p99_ms <b> source_calls_per_cycle <c>`.
 * Targets on the 2-core reference machine: >= 1,000 deliveries/s, p99 < 50 ms.
 *
 * The receivers use the test CA (packages/testing/src/https.ts); Node trusts it only through
 * NODE_EXTRA_CA_CERTS at start, so this script makes the CA and re-runs itself with it set.
 *
 * Read top to bottom, `main` is: set up (database, vhost, receivers, monitors, hits, dispatcher) →
 * warm up → the three phases, each publishing and measuring → tear down → report.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createLogger, loadDevEnv } from '../packages/common/src';
import { createSecretBox, snowflakeId, type SecretBox } from '../packages/core/src';
import { createDbClient, type Db } from '../packages/db/src';
import { AmqpClient } from '../packages/messaging/src';
import { startHttpsReceiver, type HttpsReceiver } from '../packages/testing/src/https';
import { createVhost, deleteVhosts, type ServiceUrls } from '../packages/testing/src/services';
import { createAccount, createMonitor, hitPayload, type MonitorFixture } from '../packages/testing/src/fixtures';
import { percentile } from './lib/numbers';
import { commandCpuMicros, cpuMs, machineBusyMicros, sleeps, syscalls } from './load';
import { scrapeMetrics, total } from './lib/scrape';
import { wakeCostMicros } from './lib/wake';
import type { PgBouncer } from '../packages/testing/src/pgbouncer';
import { benchClientUrl, maybeStartPgBouncer, PGBOUNCER_POOL, sampleBackends } from './lib/pgbouncer';
import {
  createDatabase,
  dispatcherEnv,
  dropDatabase,
  RUNTIME,
  serviceUrls,
  startService,
  stopChild,
  trustTestCa,
} from './lib/services';

const HITS = Number(process.env.BENCH_HITS ?? 20_000);
const RATE = Number(process.env.BENCH_RATE ?? 200);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const RECEIVERS = Number(process.env.BENCH_RECEIVERS ?? 4);
const MONITORS = Number(process.env.BENCH_MONITORS ?? 40);
const DEAD_BACKLOG = Number(process.env.BENCH_DEAD_BACKLOG ?? 1000);
const ISOLATION_RATE = Number(process.env.BENCH_ISOLATION_RATE ?? 20);
const ISOLATION_SECONDS = Number(process.env.BENCH_ISOLATION_SECONDS ?? 5);

/** the hits, in the order they are published: warm-up, throughput burst, latency, isolation */
const WARMUP = 500;
const LATENCY_HITS = RATE * SECONDS;
const ISOLATION_HITS = ISOLATION_RATE * ISOLATION_SECONDS;
const TOTAL = WARMUP + HITS + LATENCY_HITS + ISOLATION_HITS;

const log = (msg: string) => console.log(`[bench:pipeline] ${msg}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits;

interface Receipts {
  /** delivery id -> receipt time (ms) */
  at: Map<string, number>;
  /** detectedAt -> receipt, ms, for the latency phase */
  latencies: number[];
  /** the same for the isolation phase */
  isolation: number[];
  phase: 'throughput' | 'latency' | 'isolation';
  waiters: Set<() => void>;
}

/** messages the dispatcher parked so far (webhook_dispatcher_messages_total{result="deferred"}) */
async function parkedSoFar(opsPort: number): Promise<number> {
  return total(await scrapeMetrics(opsPort), 'webhook_dispatcher_messages_total', ['result="deferred"']);
}

let dispatcherPort = 0;

async function startDispatcher(env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  // BENCH_DISPATCHER_NODE_ARGS: extra node flags for the dispatcher, e.g. "--cpu-prof --cpu-prof-dir=.tmp/prof"
  const nodeArgs = (process.env.BENCH_DISPATCHER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  log(`dispatcher runtime: ${RUNTIME}`);
  const { child, line } = await startService('webhook-dispatcher', env, { nodeArgs });
  dispatcherPort = line.opsPort ?? 0;
  // keep the last lines, to show them if the dispatcher dies during the run
  let tail: string[] = [];
  child.stdout?.on('data', (c: Buffer) => {
    tail = [...tail, ...c.toString('utf8').split('\n')].slice(-30);
  });
  child.once('exit', (code, signal) => {
    if (code !== 0 && signal !== 'SIGTERM')
      log(`dispatcher exited (${code ?? signal}); its last lines:\n${tail.join('\n')}`);
  });
  return child;
}

/** What the bench made, as far as it got: tearDown removes it. */
interface Bench {
  urls: ServiceUrls;
  dbName: string;
  dbUrl: string;
  vhost: string;
  key: string;
  db?: Db;
  amqp?: AmqpClient;
  dispatcher?: ChildProcess;
  pgbouncer?: PgBouncer | null;
  receivers: HttpsReceiver[];
}

interface Hit {
  id: string;
  monitor: MonitorFixture;
  tweetId: string;
}

/** What the phases work with, once everything is set up. */
interface Run {
  db: Db;
  dbName: string;
  adminUrl: string;
  dispatcher: ChildProcess;
  receivers: HttpsReceiver[];
  receipts: Receipts;
  /** deliveries to the dead endpoint that started (and never finish) */
  dead: { inFlight: number };
  /** TOTAL hits for the healthy endpoints, in publishing order */
  hits: Hit[];
  deadHits: Hit[];
  publish: (h: Hit) => Promise<unknown>;
}

interface Result {
  backends: { peak: number; median: number; samples: number };
  deliveriesPerS: number;
  p50: number;
  p99: number;
  isolationP99: number;
  cpuPerDelivery: number;
}

function newBench(): Bench {
  const urls = serviceUrls();
  const id = randomBytes(4).toString('hex');
  return {
    urls,
    dbName: `sts_bench_${id}`,
    dbUrl: '',
    vhost: `sts_bench_${id}`,
    key: randomBytes(32).toString('base64'),
    receivers: [],
  };
}

// ---- set up --------------------------------------------------------------------------------

/** RECEIVERS healthy HTTPS endpoints that record each delivery's first receipt (and its latency). */
async function startReceivers(b: Bench, receipts: Receipts): Promise<void> {
  for (let i = 0; i < RECEIVERS; i++) {
    b.receivers.push(
      await startHttpsReceiver({
        record: false,
        handler: () => ({ status: 200, body: '{"ok":true}' }),
        onRequest: (req) => {
          const deliveryId = String(req.headers['x-service-delivery']);
          if (receipts.at.has(deliveryId)) return;
          receipts.at.set(deliveryId, req.receivedAt);
          if (receipts.phase !== 'throughput') {
            const body = JSON.parse(req.rawBody.toString('utf8')) as { detectedAt: string };
            const list = receipts.phase === 'latency' ? receipts.latencies : receipts.isolation;
            list.push(req.receivedAt - Date.parse(body.detectedAt));
          }
          for (const w of receipts.waiters) w();
        },
      }),
    );
  }
}

/** Starter monitors spread over the receivers (each receiver is its own endpoint), and the dead endpoint's. */
async function createMonitors(
  b: Bench,
  db: Db,
  box: SecretBox,
  dead: { inFlight: number },
): Promise<{ monitors: MonitorFixture[]; deadMonitor: MonitorFixture }> {
  const account = await createAccount(db, 'starter');
  const monitors: MonitorFixture[] = [];
  for (let i = 0; i < MONITORS; i++) {
    const r = b.receivers[i % b.receivers.length]!;
    monitors.push(
      await createMonitor(db, box, { accountId: account.id, url: `${r.url}/hooks/${i}`, targetUsername: `user${i}` }),
    );
  }
  // the dead endpoint of another account (isolation phase)
  const deadReceiver = await startHttpsReceiver({ record: false });
  b.receivers.push(deadReceiver);
  const deadAccount = await createAccount(db, 'starter');
  const deadMonitor = await createMonitor(db, box, {
    accountId: deadAccount.id,
    url: `${deadReceiver.url}/hooks/dead`,
  });
  deadReceiver.setResponder(() => {
    dead.inFlight++;
    return { status: 200, delayMs: 3_600_000 };
  });
  return { monitors, deadMonitor };
}

/** The hits' rows, written before the dispatcher starts (it looks each one up). */
async function seedHits(db: Db, monitors: MonitorFixture[], deadMonitor: MonitorFixture, created: Date) {
  log(`seeding ${TOTAL} hits for ${MONITORS} monitors on ${RECEIVERS} receivers, ${DEAD_BACKLOG} for a dead endpoint`);
  const hits: Hit[] = [];
  for (let i = 0; i < TOTAL; i++) {
    hits.push({ id: randomUUID(), monitor: monitors[i % monitors.length]!, tweetId: snowflakeId() });
  }
  const deadHits = Array.from({ length: DEAD_BACKLOG }, () => ({
    id: randomUUID(),
    monitor: deadMonitor,
    tweetId: snowflakeId(),
  }));
  const allHits = [...hits, ...deadHits];
  for (let i = 0; i < allHits.length; i += 5000) {
    await db.hit.createMany({
      data: allHits.slice(i, i + 5000).map((h) => ({
        id: h.id,
        monitorId: h.monitor.id,
        tweetId: h.tweetId,
        tweetText: `Benchmark post ${h.tweetId} #launch`,
        tweetAuthorId: '1',
        tweetAuthorUsername: h.monitor.targetUsername,
        tweetCreatedAt: created,
        detectedAt: created,
      })),
    });
  }
  return { hits, deadHits };
}

/** Database, vhost, receivers, monitors, hits, the dispatcher and a publisher. */
async function setUp(b: Bench): Promise<Run> {
  log(`database ${b.dbName}, vhost ${b.vhost}`);
  b.dbUrl = await createDatabase(b.urls.postgres, b.dbName);
  const db = createDbClient({ url: benchClientUrl(b.dbUrl), poolSize: 4 });
  b.pgbouncer = await maybeStartPgBouncer(b.urls.postgres);
  if (b.pgbouncer) log(`the dispatcher's DATABASE_URL through PgBouncer (transaction mode, pool ${PGBOUNCER_POOL})`);
  b.db = db;
  const amqpUrl = await createVhost(b.urls, b.vhost);
  const receipts: Receipts = { at: new Map(), latencies: [], isolation: [], phase: 'throughput', waiters: new Set() };
  await startReceivers(b, receipts);
  const dead = { inFlight: 0 };
  const { monitors, deadMonitor } = await createMonitors(b, db, createSecretBox(b.key), dead);
  const created = new Date();
  const { hits, deadHits } = await seedHits(db, monitors, deadMonitor, created);
  const dispatcher = await startDispatcher({
    ...dispatcherEnv({
      dbUrl: b.pgbouncer ? b.pgbouncer.pooled(b.dbUrl) : b.dbUrl,
      amqpUrl,
      key: b.key,
      logLevel: process.env.BENCH_LOG_LEVEL ?? 'info',
    }),
    // the dead endpoint's deliveries never finish: do not wait the default 20 s at the end
    DISPATCH_SHUTDOWN_GRACE_MS: '1000',
  });
  b.dispatcher = dispatcher;
  const logger = createLogger({ service: 'bench', level: 'warn' });
  const amqp = new AmqpClient({ url: amqpUrl, logger, name: 'bench-publisher' });
  b.amqp = amqp;
  await amqp.start();
  const publish = (h: Hit) => {
    const now = new Date();
    const payload = hitPayload(h.monitor, h.tweetId, `Benchmark post ${h.tweetId} #launch`, created, now);
    return amqp.publish('monitor.hit', payload, {
      messageId: randomUUID(),
      headers: { accountId: h.monitor.accountId, hitId: h.id },
    });
  };
  return {
    db,
    dbName: b.dbName,
    adminUrl: b.urls.postgres,
    dispatcher,
    receivers: b.receivers,
    receipts,
    dead,
    hits,
    deadHits,
    publish,
  };
}

// ---- publish -------------------------------------------------------------------------------

/** as fast as the broker confirms, `window` publishes at a time */
async function publishAll(run: Run, list: Hit[], window = 500): Promise<void> {
  for (let i = 0; i < list.length; i += window) await Promise.all(list.slice(i, i + window).map(run.publish));
}

/** `rate` publishes a second, each at its due time */
async function publishSteady(run: Run, list: Hit[], rate: number): Promise<void> {
  const start = Date.now();
  const interval = 1000 / rate;
  const pending: Promise<unknown>[] = [];
  for (let i = 0; i < list.length; i++) {
    const due = start + i * interval;
    const wait = due - Date.now();
    if (wait > 0) await sleep(wait);
    pending.push(run.publish(list[i]!));
  }
  await Promise.all(pending);
}

function waitForReceipts(receipts: Receipts, n: number, timeoutMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const check = () => {
      if (receipts.at.size >= n) {
        receipts.waiters.delete(check);
        clearTimeout(timer);
        resolve();
      }
    };
    const timer = setTimeout(() => {
      receipts.waiters.delete(check);
      reject(new Error(`only ${receipts.at.size} of ${n} deliveries arrived within ${timeoutMs} ms`));
    }, timeoutMs);
    receipts.waiters.add(check);
    check();
  });
}

// ---- measure -------------------------------------------------------------------------------

/** 0. warm-up (connections, JIT, caches) */
async function warmUp(run: Run): Promise<void> {
  await publishAll(run, run.hits.slice(0, WARMUP));
  await waitForReceipts(run.receipts, WARMUP, 60_000);
  log(`warm-up: ${WARMUP} delivered`);
}

/** statements the database committed (each autocommit statement is one transaction) */
async function commits(run: Run): Promise<number> {
  const rows = await run.db.$queryRawUnsafe<{ n: bigint }[]>(
    `SELECT xact_commit AS n FROM pg_stat_database WHERE datname = '${run.dbName}'`,
  );
  return Number(rows[0]?.n ?? 0);
}

/** 1. throughput: HITS published as fast as the broker confirms; deliveries/s */
async function throughputPhase(run: Run): Promise<number> {
  const burst = run.hits.slice(WARMUP, WARMUP + HITS);
  const t0 = Date.now();
  await publishAll(run, burst);
  const published = Date.now();
  await waitForReceipts(run.receipts, WARMUP + HITS, 300_000);
  const last = Math.max(...[...run.receipts.at.values()]);
  log(`parked (deferred) messages so far: ${await parkedSoFar(dispatcherPort)}`);
  const tls = run.receivers.slice(0, RECEIVERS).reduce((n, r) => n + r.connectionCount(), 0);
  log(`TLS connections accepted by the receivers so far: ${tls} (for ${run.receipts.at.size} deliveries)`);
  const deliveriesPerS = HITS / ((last - t0) / 1000);
  log(
    `throughput: ${HITS} hits published in ${published - t0} ms, all delivered after ${last - t0} ms: ${Math.round(deliveriesPerS)} deliveries/s`,
  );
  return deliveriesPerS;
}

/** 2. latency at a steady rate */
async function latencyPhase(run: Run): Promise<{ p50: number; p99: number }> {
  run.receipts.phase = 'latency';
  await publishSteady(run, run.hits.slice(WARMUP + HITS, WARMUP + HITS + LATENCY_HITS), RATE);
  await waitForReceipts(run.receipts, WARMUP + HITS + LATENCY_HITS, 60_000);
  const sorted = [...run.receipts.latencies].sort((a, b) => a - b);
  const p50 = percentile(sorted, 50);
  const p99 = percentile(sorted, 99);
  log(
    `latency at ${RATE} hits/s for ${SECONDS} s (${sorted.length} hits): p50 ${p50} ms, p99 ${p99} ms, max ${sorted.at(-1)} ms`,
  );
  return { p50, p99 };
}

/** 3. isolation: a dead endpoint with a backlog, healthy endpoints at a steady rate; the healthy p99 */
async function isolationPhase(run: Run): Promise<number> {
  await publishAll(run, run.deadHits);
  const deadline = Date.now() + 60_000;
  while (DEAD_BACKLOG > 0 && run.dead.inFlight < 8 && Date.now() < deadline) await sleep(20);
  run.receipts.phase = 'isolation';
  await publishSteady(run, run.hits.slice(WARMUP + HITS + LATENCY_HITS), ISOLATION_RATE);
  await waitForReceipts(run.receipts, TOTAL, 60_000);
  const isolated = [...run.receipts.isolation].sort((a, b) => a - b);
  const isolationP99 = percentile(isolated, 99);
  log(
    `isolation: ${DEAD_BACKLOG} hits queued for a dead endpoint (${run.dead.inFlight} in flight); ${isolated.length} healthy hits at ${ISOLATION_RATE}/s: p50 ${percentile(isolated, 50)} ms, p99 ${isolationP99} ms, max ${isolated.at(-1)} ms`,
  );
  return isolationP99;
}

/** the dispatcher's CPU time (µs) and system calls so far, and when they were read */
interface Usage {
  cpu: number;
  reads: number;
  writes: number;
  /** voluntary context switches: each one a sleep and a wake-up */
  sleeps: number;
  /** the whole machine's busy CPU (the database, the broker and the receivers too) */
  machine: number;
  /** PostgreSQL's processes (every backend of the machine's server) */
  database: number;
  at: number;
}

function usage(pid: number): Usage {
  return {
    cpu: cpuMs(pid) * 1000,
    ...syscalls(pid),
    sleeps: sleeps(pid),
    machine: machineBusyMicros(),
    database: commandCpuMicros('postgres'),
    at: Date.now(),
  };
}

/** one phase's CPU and system calls per delivery (10 ms clock ticks: rough), and its CPU a second */
function perDelivery(from: Usage, to: Usage, deliveries: number) {
  const per = (n: number) => round(n / deliveries, 2);
  return {
    cpu: Math.round((to.cpu - from.cpu) / deliveries),
    reads: per(to.reads - from.reads),
    writes: per(to.writes - from.writes),
    sleeps: per(to.sleeps - from.sleeps),
    machine: Math.round((to.machine - from.machine) / deliveries),
    database: Math.round((to.database - from.database) / deliveries),
    cpuMsPerS: Math.round((to.cpu - from.cpu) / (to.at - from.at)),
  };
}

/** the two phases apart, and what the idle dispatcher spends a second */
function logPhases(idle: { from: Usage; to: Usage }, start: Usage, between: Usage, end: Usage): void {
  const t = perDelivery(start, between, HITS);
  const l = perDelivery(between, end, LATENCY_HITS);
  const idleMsPerS = perDelivery(idle.from, idle.to, 1).cpuMsPerS;
  log(
    `dispatcher syscalls per delivery: throughput ${t.reads} reads, ${t.writes} writes; latency ${l.reads} reads, ${l.writes} writes`,
  );
  log(`dispatcher sleeps (voluntary context switches) per delivery: throughput ${t.sleeps}, latency ${l.sleeps}`);
  log(
    `machine cpu per delivery (every process: dispatcher, database, broker, receivers, bench): throughput ${t.machine} µs, latency ${l.machine} µs`,
  );
  log(`database cpu per delivery (PostgreSQL's processes): throughput ${t.database} µs, latency ${l.database} µs`);
  log(
    `dispatcher cpu by phase: throughput ${t.cpu} µs per delivery, latency ${l.cpu} µs per delivery (${l.cpuMsPerS} ms a second; idle ${idleMsPerS} ms a second)`,
  );
}

/**
 * The phases in order. CPU per delivery: the dispatcher's CPU time over the throughput and latency
 * phases (after the warm-up, before the isolation phase, whose dead endpoint's backlog circulates
 * through parking).
 */
async function measure(run: Run): Promise<Result> {
  const sampler = await sampleBackends(run.adminUrl, run.dbName);
  await warmUp(run);
  const parkedBefore = await parkedSoFar(dispatcherPort);
  const pid = run.dispatcher.pid!;
  const idleFrom = usage(pid);
  await sleep(2000);
  const start = usage(pid);
  const commitsBefore = await commits(run);
  const deliveriesPerS = await throughputPhase(run);
  const between = usage(pid);
  const { p50, p99 } = await latencyPhase(run);
  const end = usage(pid);
  const cpu = end.cpu - start.cpu;
  const cpuPerDelivery = cpu / (HITS + LATENCY_HITS);
  log(`dispatcher cpu: ${Math.round(cpuPerDelivery)} µs per delivery (throughput and latency phases)`);
  logPhases({ from: idleFrom, to: start }, start, between, end);
  // a busy machine slows the receivers, lanes back up and messages are parked (consumed, looked up,
  // published again, consumed again): CPU the quiet machine does not spend, counted per message too
  const parked = (await parkedSoFar(dispatcherPort)) - parkedBefore;
  log(
    `dispatcher cpu: ${Math.round(cpu / (HITS + LATENCY_HITS + parked))} µs per message handled (${HITS + LATENCY_HITS} deliveries, ${parked} parked)`,
  );
  // pg_stat_database lags by up to PGSTAT's flush interval (about 1 s): a rough figure
  await sleep(1500);
  log(
    `database transactions per delivery: ${round(((await commits(run)) - commitsBefore) / (HITS + LATENCY_HITS), 2)}`,
  );
  log(
    `this machine's cost of a wake-up (bench/lib/wake.ts): ${wakeCostMicros(RATE)} µs of CPU per timer and datagram at ${RATE}/s, ${wakeCostMicros(5000)} µs at 5,000/s`,
  );
  const isolationP99 = await isolationPhase(run);
  log(`parked (deferred) messages so far: ${await parkedSoFar(dispatcherPort)}`);
  const attempts = await run.db.deliveryAttempt.groupBy({ by: ['outcome'], _count: { _all: true } });
  log(`attempt log: ${attempts.map((a) => `${a.outcome} ${a._count._all}`).join(', ')}`);
  const backends = await sampler.stop();
  return { backends, deliveriesPerS, p50, p99, isolationP99, cpuPerDelivery };
}

// ---- tear down and report ------------------------------------------------------------------

async function tearDown(b: Bench): Promise<void> {
  const { dispatcher } = b;
  if (dispatcher?.pid && dispatcher.exitCode === null) {
    // CPU time the dispatcher used for the whole run (less sensitive to a busy machine than rates)
    log(`dispatcher cpu: ${(cpuMs(dispatcher.pid) / 1e3).toFixed(1)} s (user+system) for the whole run`);
  }
  await stopChild(dispatcher);
  await b.pgbouncer?.stop();
  await b.amqp?.stop().catch(() => undefined);
  for (const r of b.receivers) await r.close();
  await b.db?.$disconnect();
  await dropDatabase(b.urls.postgres, b.dbName).catch(() => undefined);
  await deleteVhosts(b.urls, b.vhost).catch(() => undefined);
  log('database and vhost removed');
}

/** 4. the poller cycle of bench/poller.ts (source calls per cycle), when that file exists */
async function measureSourceCalls(): Promise<number | string> {
  if (process.env.BENCH_POLLER === '0') return 'n/a';
  const pollerBench = path.join(__dirname, 'poller.ts');
  if (!existsSync(pollerBench)) {
    log('bench/poller.ts not found: source calls per cycle not measured');
    return 'n/a';
  }
  const mod = (await import(pollerBench)) as {
    measurePollerCycle?: () => Promise<{ sourceCallsPerCycle: number }>;
  };
  if (mod.measurePollerCycle) return (await mod.measurePollerCycle()).sourceCallsPerCycle;
  log('bench/poller.ts has no measurePollerCycle()');
  return 'n/a';
}

function report(result: Result, sourceCalls: number | string): void {
  const { peak, median, samples } = result.backends;
  console.log(`postgres_backends peak ${peak} median ${median} (${samples} samples of the dispatcher's backends)`);
  console.log(`dispatcher_cpu_us_per_delivery ${Math.round(result.cpuPerDelivery)}`);
  console.log(`isolation_p99_ms ${round(result.isolationP99)}`);
  console.log(
    `deliveries_per_s ${Math.round(result.deliveriesPerS)} p50_ms ${round(result.p50)} p99_ms ${round(result.p99)} source_calls_per_cycle ${sourceCalls}`,
  );
}

async function main(): Promise<void> {
  loadDevEnv(); // next to `npm start`: its settings (.tmp/dev.env) where the environment sets none
  await trustTestCa(__filename);
  const bench = newBench();
  let result: Result;
  try {
    result = await measure(await setUp(bench));
  } finally {
    await tearDown(bench);
  }
  report(result, await measureSourceCalls());
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
