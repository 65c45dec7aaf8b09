/**
 * `npm run bench:retry`: the retry schedule against a receiver that is down. A webhook with
 * `retry_policy: standard` gets RETRY_RATE hits a second (default 20) for RETRY_DOWN_S seconds
 * (default 60) while its receiver answers 503 to everything; then the receiver is back (200). With
 * RETRY_KILL=1 (default) the dispatcher process is killed (SIGKILL) halfway through the outage and
 * started again RETRY_KILL_PAUSE_S (default 3) later, while retries wait.
 *
 * Target: every hit delivered once the receiver is back, at most the 10-minute step later, each
 * `webhook-id` accepted (answered 2xx) once, nothing lost to the kill.
 *
 * Isolation: beside it a healthy endpoint (another receiver, so another lane) gets RETRY_HEALTHY_RATE
 * hits a second (default 20) through the outage; its p99 from publish to receipt is reported.
 * RETRY_POLICY=none runs the same with the failing webhook on `none`, the figure to compare with.
 *
 * In a database and RabbitMQ vhost of its own (removed at the end), the dispatcher a child process
 * (BENCH_RUNTIME as in the other benches), the receiver a local HTTPS server with the test CA.
 * Last line: `policy <p> hits <n> delivered <d> lost <l> accepted_twice <a> attempts <t>
 * last_after_back_s <s> p50_after_back_s <p> healthy_p99_ms <h>`: hits whose webhook-id was
 * accepted at least once, never, more than once; attempts logged in all; when the last (and the
 * median) first acceptance came after the receiver was back; the healthy endpoint's p99. Run it small with RETRY_DOWN_S=10 RETRY_RATE=5 (the schedule's 5 s and 30 s steps).
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { createLogger, loadDevEnv } from '../packages/common/src';
import { createSecretBox } from '../packages/core/src';
import { createDbClient, type Db } from '../packages/db/src';
import { AmqpClient } from '../packages/messaging/src';
import { createAccount, createHit, createMonitor, type MonitorFixture } from '../packages/testing/src/fixtures';
import { startHttpsReceiver } from '../packages/testing/src/https';
import { createVhost, deleteVhosts } from '../packages/testing/src/services';
import { percentile, positiveEnv } from './lib/numbers';
import { coresBetween, readCpu } from './lib/cpu';
import { delta, histogramMean, histogramPercentile, scrapeMetrics, type Scrape } from './lib/scrape';
import { paced } from './lib/pace';
import {
  createDatabase,
  dispatcherEnv,
  dropDatabase,
  serviceUrls,
  startService,
  stopChild,
  trustTestCa,
} from './lib/services';

const RATE = positiveEnv('RETRY_RATE', 20);
const DOWN_S = positiveEnv('RETRY_DOWN_S', 60);
const KILL = process.env.RETRY_KILL !== '0';
const KILL_PAUSE_S = positiveEnv('RETRY_KILL_PAUSE_S', 3);
/** the schedule's step after which every hit of the outage has had its attempt after it: 10 min, plus margin */
const SETTLE_MS = positiveEnv('RETRY_SETTLE_S', 12 * 60) * 1000;
const HEALTHY_RATE = positiveEnv('RETRY_HEALTHY_RATE', 20);
const POLICY = process.env.RETRY_POLICY === 'none' ? 'none' : 'standard';

const log = (s: string) => console.log(`[bench:retry] ${s}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Dispatcher {
  child: ChildProcess;
  /** its /metrics */
  opsPort: number;
}

/** the dispatcher as a child process; resolves once it consumes */
async function startDispatcher(env: NodeJS.ProcessEnv): Promise<Dispatcher> {
  const { child, line } = await startService('webhook-dispatcher', env);
  return { child, opsPort: line.opsPort ?? 0 };
}

interface Receipts {
  /** webhook-id → how many times it was accepted (2xx) */
  accepted: Map<string, number>;
  /** webhook-id → when it was first accepted (ms) */
  firstAt: Map<string, number>;
  backAt: number;
  /** the healthy endpoint: message id → when it was published; latencies of its receipts */
  healthyPublishedAt: Map<string, number>;
  healthyLatencies: number[];
  /** when the failing receiver was asked (ms), in order: every attempt, answered 503 or 200 */
  failingAt: number[];
}

/** the failing receiver (503 until `backAt`) and the healthy one beside it, on their own ports (lanes) */
async function startReceivers(r: Receipts) {
  const failing = await startHttpsReceiver({
    record: false,
    handler: (req) => {
      r.failingAt.push(Date.now());
      if (Date.now() < r.backAt) return { status: 503 };
      const id = String(req.headers['webhook-id']);
      r.accepted.set(id, (r.accepted.get(id) ?? 0) + 1);
      if (!r.firstAt.has(id)) r.firstAt.set(id, Date.now());
      return { status: 200 };
    },
  });
  const healthy = await startHttpsReceiver({
    record: false,
    handler: (req) => {
      const at = r.healthyPublishedAt.get(String(req.headers['x-service-delivery']));
      if (at !== undefined) r.healthyLatencies.push(Date.now() - at);
      return { status: 200 };
    },
  });
  return { failing, healthy };
}

/** `rate` hits a second of `monitor` for `seconds`, each published as the outbox relay does; `sent(id)` as it goes */
async function publishHits(
  b: { db: Db; amqp: AmqpClient },
  monitor: MonitorFixture,
  rate: number,
  seconds: number,
  sent: (messageId: string) => void,
): Promise<void> {
  const publishes: Promise<void>[] = [];
  await paced(rate, seconds, () => {
    publishes.push(
      (async () => {
        const hit = await createHit(b.db, monitor, `post ${randomUUID()} #launch`);
        const messageId = randomUUID();
        sent(messageId);
        await b.amqp.publish('monitor.hit', hit.payload, {
          messageId,
          headers: { accountId: monitor.accountId, hitId: hit.id },
        });
      })(),
    );
  });
  await Promise.all(publishes);
}

/** the last line: what was delivered how often, when, and the healthy endpoint's p99 */
async function report(db: Db, monitorId: string, ids: readonly string[], r: Receipts): Promise<void> {
  const delivered = ids.filter((id) => r.accepted.has(id)).length;
  const twice = ids.filter((id) => (r.accepted.get(id) ?? 0) > 1).length;
  const after = ids
    .map((id) => r.firstAt.get(id))
    .filter((t): t is number => t !== undefined)
    .map((t) => (t - r.backAt) / 1000)
    .sort((a, b) => a - b);
  const attempts = await db.deliveryAttempt.count({ where: { monitorId } });
  const last = after.length ? after[after.length - 1]!.toFixed(1) : 'n/a';
  const p50 = after.length ? percentile(after, 50).toFixed(1) : 'n/a';
  const lat = r.healthyLatencies.sort((a, b) => a - b);
  const p99 = lat.length ? String(percentile(lat, 99)) : 'n/a';
  log(`healthy endpoint: ${lat.length} of ${r.healthyPublishedAt.size} received`);
  console.log(
    `policy ${POLICY} hits ${ids.length} delivered ${delivered} lost ${ids.length - delivered} accepted_twice ${twice} attempts ${attempts} last_after_back_s ${last} p50_after_back_s ${p50} healthy_p99_ms ${p99}`,
  );
}

/**
 * Where the healthy endpoint's time went during the outage, from the dispatcher's metrics (means,
 * ms): `prepare` (consumed → ready), `lane_wait` (ready → slot), `send` (delivered requests: only
 * the healthy endpoint's during the outage), and `consume` = its end-to-end mean less those three
 * (publish → consumed, and signing); the record commit waits (batched rows, rows with their due
 * row) and the retries' lane wait beside it; the dispatcher's CPU (cores busy on average) and its
 * event-loop delay p99 over the outage. `prepare` and `lane_wait` of messages include the failing
 * webhook's first attempts.
 */
function printBreakdown(start: Scrape, end: Scrape, seconds: number, r: Receipts, benchLag: IntervalHistogram): void {
  const ms = (v: number) => (Number.isFinite(v) ? (v * 1000).toFixed(1) : 'n/a');
  const mean = (name: string, ...match: string[]) => histogramMean(start, end, name, match);
  const lat = [...r.healthyLatencies].sort((a, b) => a - b);
  const e2e = lat.reduce((a, b) => a + b, 0) / Math.max(1, lat.length) / 1000;
  const prepare = mean('webhook_dispatcher_prepare_seconds', 'source="message"');
  const lane = mean('webhook_dispatcher_lane_wait_seconds', 'source="message"');
  const send = mean('webhook_delivery_duration_seconds', 'outcome="delivered"');
  const p99 = (name: string, ...match: string[]) => ms(histogramPercentile(start, end, name, 99, match));
  const cpu = delta(start, end, 'process_cpu_seconds_total') / seconds;
  const lag = end.get([...end.keys()].find((k) => k.startsWith('nodejs_eventloop_lag_p99_seconds')) ?? '') ?? NaN;
  console.log(
    `breakdown policy ${POLICY} healthy_mean_ms ${ms(e2e)} healthy_p50_ms ${lat.length ? percentile(lat, 50) : 'n/a'}` +
      ` consume_ms ${ms(e2e - prepare - lane - send)} prepare_ms ${ms(prepare)} lane_wait_ms ${ms(lane)} lane_wait_p99_le_ms ${p99('webhook_dispatcher_lane_wait_seconds', 'source="message"')}` +
      ` prepare_p99_le_ms ${p99('webhook_dispatcher_prepare_seconds', 'source="message"')}` +
      ` send_p99_le_ms ${p99('webhook_delivery_duration_seconds', 'outcome="delivered"')}` +
      ` send_ms ${ms(send)} record_batched_ms ${ms(mean('webhook_dispatcher_record_seconds', 'write="batched"'))}` +
      ` record_with_due_ms ${ms(mean('webhook_dispatcher_record_seconds', 'write="with_due"'))}` +
      ` due_lane_wait_ms ${ms(mean('webhook_dispatcher_lane_wait_seconds', 'source="due"'))}` +
      ` due_attempts ${delta(start, end, 'webhook_dispatcher_lane_wait_seconds_count', ['source="due"'])}` +
      ` dispatcher_cpu_cores ${cpu.toFixed(2)} eventloop_lag_p99_ms ${ms(lag)}` +
      ` bench_eventloop_lag_p99_ms ${(benchLag.percentile(99) / 1e6).toFixed(1)}`,
  );
}

/**
 * How bursty the failing endpoint's traffic was: its receiver's requests in the busiest 100 ms and
 * at the 99th percentile of 100 ms windows. 20 hits a second evenly is about 2 a window (a p99 of
 * 5 with random arrivals); with `standard` its retries come on top, about as many.
 */
function printBursts(r: Receipts): void {
  const perWindow = new Map<number, number>();
  for (const t of r.failingAt) perWindow.set(Math.floor(t / 100), (perWindow.get(Math.floor(t / 100)) ?? 0) + 1);
  const windows = [...perWindow.values()].sort((a, b) => a - b);
  console.log(
    `bursts policy ${POLICY} failing_max_per_100ms ${windows.at(-1) ?? 0} failing_p99_per_100ms ${windows.length ? percentile(windows, 99) : 0}`,
  );
}

/** the outage: both streams of hits, the kill and restart halfway; resolves with the failing webhook's ids */
async function outage(
  b: { db: Db; amqp: AmqpClient },
  monitors: { failing: MonitorFixture; beside: MonitorFixture },
  r: Receipts,
  dispatcher: { restart: () => Promise<void> },
): Promise<string[]> {
  const ids: string[] = [];
  r.backAt = Date.now() + DOWN_S * 1000;
  log(
    `receiver down for ${DOWN_S} s, ${RATE} hits/s, ${POLICY} policy${KILL ? ', dispatcher killed halfway' : ''}; a healthy endpoint beside it at ${HEALTHY_RATE} hits/s`,
  );
  const killer = KILL
    ? (async () => {
        await sleep((DOWN_S * 1000) / 2);
        await dispatcher.restart();
      })()
    : Promise.resolve();
  await Promise.all([
    publishHits(b, monitors.failing, RATE, DOWN_S, (id) => ids.push(id)),
    publishHits(b, monitors.beside, HEALTHY_RATE, DOWN_S, (id) => r.healthyPublishedAt.set(id, Date.now())),
    killer,
  ]);
  return ids;
}

async function main(): Promise<void> {
  await trustTestCa(__filename);
  loadDevEnv();
  const urls = serviceUrls();
  const suffix = randomBytes(4).toString('hex');
  const dbName = `sts_bench_retry_${suffix}`;
  const vhost = `sts_bench_retry_${suffix}`;
  const dbUrl = await createDatabase(urls.postgres, dbName);
  const db = createDbClient({ url: dbUrl, poolSize: 4 });
  const amqpUrl = await createVhost(urls, vhost);
  const r: Receipts = {
    accepted: new Map(),
    firstAt: new Map(),
    backAt: Infinity,
    healthyPublishedAt: new Map(),
    healthyLatencies: [],
    failingAt: [],
  };
  const receivers = await startReceivers(r);
  const logger = createLogger({ service: 'bench-retry', level: 'warn' });
  const amqp = new AmqpClient({ url: amqpUrl, logger, name: 'bench-retry-publisher' });
  let dispatcher: Dispatcher | undefined;
  try {
    const key = randomBytes(32).toString('base64');
    const box = createSecretBox(key);
    const account = await createAccount(db, 'starter');
    const failing = await createMonitor(db, box, { accountId: account.id, url: `${receivers.failing.url}/in` });
    await db.webhookEndpoint.update({ where: { monitorId: failing.id }, data: { retryPolicy: POLICY } });
    const beside = await createMonitor(db, box, { accountId: account.id, url: `${receivers.healthy.url}/ok` });
    const env = { ...dispatcherEnv({ dbUrl, amqpUrl, key, logLevel: 'error' }), DISPATCH_SHUTDOWN_GRACE_MS: '1000' };
    dispatcher = await startDispatcher(env);
    await amqp.start();
    const restart = async () => {
      dispatcher?.child.kill('SIGKILL');
      log('dispatcher killed (SIGKILL)');
      await sleep(KILL_PAUSE_S * 1000);
      dispatcher = await startDispatcher(env);
      log('dispatcher started again');
    };
    const before = await scrapeMetrics(dispatcher.opsPort);
    const cpu = () => readCpu({ dispatcher: dispatcher?.child.pid, bench: process.pid }, ['postgres', 'beam.smp']);
    const cpuBefore = cpu();
    // the receivers and the publisher share this process: its own delay is part of what is measured
    const benchLag = monitorEventLoopDelay({ resolution: 10 });
    benchLag.enable();
    const startedAt = Date.now();
    const ids = await outage({ db, amqp }, { failing, beside }, r, { restart });
    await sleep(1000); // the last healthy hits arrive
    printBreakdown(before, await scrapeMetrics(dispatcher.opsPort), (Date.now() - startedAt) / 1000, r, benchLag);
    benchLag.disable();
    printBursts(r);
    // a killed dispatcher's CPU is not counted (its pid is gone): read with RETRY_KILL=0
    log(`cpu over the outage: ${coresBetween(cpuBefore, cpu())} (postgres, beam.smp: every process of that name)`);
    log(`${ids.length} hits published; waiting for every one to be accepted (at most ${SETTLE_MS / 1000} s)`);
    const deadline = Date.now() + SETTLE_MS;
    while (Date.now() < deadline && ids.some((id) => !r.accepted.has(id))) await sleep(1000);
    await sleep(2000); // anything sent twice would arrive now
    await report(db, failing.id, ids, r);
  } finally {
    await stopChild(dispatcher?.child, 5000);
    await amqp.stop().catch(() => undefined);
    await receivers.failing.close();
    await receivers.healthy.close();
    await db.$disconnect();
    await dropDatabase(urls.postgres, dbName);
    await deleteVhosts(urls, vhost).catch(() => undefined);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
