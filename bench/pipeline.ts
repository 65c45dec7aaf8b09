/**
 * `npm run bench:pipeline`: monitor.hit events through RabbitMQ and the webhook dispatcher (a child
 * process, as deployed) to local HTTPS receivers, on its own database and vhost (both removed
 * afterwards).
 *
 *   1. throughput: BENCH_HITS (default 20,000) hits published as fast as the broker confirms;
 *      deliveries/s = hits / (last receipt - first publish)
 *   2. latency: a steady BENCH_RATE hits/s (default 200) for BENCH_SECONDS (default 10);
 *      latency = receipt at the receiver - detectedAt of the hit (set when it is published)
 *   3. isolation (issue 10): a dead endpoint (TLS up, never answers) of another account gets
 *      BENCH_DEAD_BACKLOG (default 1,000) hits; once its deliveries are in flight, the healthy
 *      endpoints get BENCH_ISOLATION_RATE hits/s (default 20) for BENCH_ISOLATION_SECONDS
 *      (default 5); isolation latency = receipt - detectedAt of those healthy hits
 *   4. the poller cycle of bench/poller.ts (source calls per cycle), when that file exists
 *
 * Third-to-last line: `dispatcher_cpu_us_per_delivery <n>` (the dispatcher's CPU time over phases 1
 * and 2 divided by their deliveries: less sensitive to a busy machine than the rates).
 * Second-to-last line: `isolation_p99_ms <n>`.
 * Last line: `deliveries_per_s <n> p50_ms <a> p99_ms <b> source_calls_per_cycle <c>`.
 * Targets on the 2-core reference machine: >= 1,000 deliveries/s, p99 < 50 ms.
 *
 * The receivers use the test CA (packages/testing/src/https.ts); Node trusts it only through
 * NODE_EXTRA_CA_CERTS at start, so this script makes the CA and re-runs itself with it set.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { createLogger, loadDevEnv } from '../packages/common/src';
import { createSecretBox, snowflakeId } from '../packages/core/src';
import { createDbClient, ensureDatabase, migrate, type Db } from '../packages/db/src';
import { AmqpClient } from '../packages/messaging/src';
import { ensureTestCa, startHttpsReceiver, testCaTrusted, type HttpsReceiver } from '../packages/testing/src/https';
import {
  createVhost,
  deleteVhosts,
  LOCAL_DEFAULTS,
  urlsFromEnv,
  type ServiceUrls,
} from '../packages/testing/src/services';
import { createAccount, createMonitor, hitPayload, type MonitorFixture } from '../packages/testing/src/fixtures';

const root = path.resolve(__dirname, '..');
const HITS = Number(process.env.BENCH_HITS ?? 20_000);
const RATE = Number(process.env.BENCH_RATE ?? 200);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const RECEIVERS = Number(process.env.BENCH_RECEIVERS ?? 4);
const MONITORS = Number(process.env.BENCH_MONITORS ?? 40);
const DEAD_BACKLOG = Number(process.env.BENCH_DEAD_BACKLOG ?? 1000);
const ISOLATION_RATE = Number(process.env.BENCH_ISOLATION_RATE ?? 20);
const ISOLATION_SECONDS = Number(process.env.BENCH_ISOLATION_SECONDS ?? 5);

const log = (msg: string) => console.log(`[bench:pipeline] ${msg}`);

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits;

async function reexecWithCa(): Promise<never> {
  const ca = await ensureTestCa();
  const child = spawn(process.execPath, ['--import', 'tsx', __filename, ...process.argv.slice(2)], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, NODE_EXTRA_CA_CERTS: ca.certPath },
  });
  const code = await new Promise<number>((resolve) => child.on('exit', (c) => resolve(c ?? 1)));
  process.exit(code);
}

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
  const text = await (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^webhook_dispatcher_messages_total\{[^}]*result="deferred"[^}]*\} (\d+)/gm))
    n += Number(m[1]);
  return n;
}

let dispatcherPort = 0;

/** CPU time (user + system, µs) a process used so far, from /proc (clock ticks, 10 ms steps) */
function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(stat[11]) + Number(stat[12])) * 1e6) / 100;
}

async function startDispatcher(env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  // BENCH_DISPATCHER_NODE_ARGS: extra node flags for the dispatcher, e.g. "--cpu-prof --cpu-prof-dir=.tmp/prof"
  const nodeArgs = (process.env.BENCH_DISPATCHER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', 'services/webhook-dispatcher/src/main.ts'], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    let buf = '';
    // (was never cleared, so it killed a dispatcher still working 60 s after its start)
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`dispatcher did not start within 60 s:\n${buf}`));
    }, 60_000);
    timer.unref();
    const onData = (chunk: Buffer) => {
      buf += chunk.toString('utf8');
      if (buf.includes('webhook-dispatcher started')) {
        clearTimeout(timer);
        const line = buf.split('\n').find((l) => l.includes('webhook-dispatcher started')) ?? '{}';
        dispatcherPort = (JSON.parse(line) as { opsPort?: number }).opsPort ?? 0;
        child.stdout?.off('data', onData);
        // keep the last lines, to show them if the dispatcher dies during the run
        let tail: string[] = [];
        child.stdout?.on('data', (c: Buffer) => {
          tail = [...tail, ...c.toString('utf8').split('\n')].slice(-30);
        });
        child.once('exit', (code, signal) => {
          if (code !== 0 && signal !== 'SIGTERM')
            log(`dispatcher exited (${code ?? signal}); its last lines:\n${tail.join('\n')}`);
        });
        resolve();
      }
    };
    child.stdout?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`dispatcher exited with ${code} before it started`)));
  });
  return child;
}

// eslint-disable-next-line max-lines-per-function -- a benchmark script read top to bottom (set up, publish, measure, report); splitting it would only scatter its steps
async function main(): Promise<void> {
  loadDevEnv(); // next to `npm start`: its settings (.tmp/dev.env) where the environment sets none
  if (!testCaTrusted()) await reexecWithCa();

  const urls: ServiceUrls = { ...LOCAL_DEFAULTS, ...urlsFromEnv() };
  if (process.env.BENCH_POSTGRES_URL) urls.postgres = process.env.BENCH_POSTGRES_URL;
  const id = randomBytes(4).toString('hex');
  const dbName = `sts_bench_${id}`;
  const dbUrl = new URL(urls.postgres);
  dbUrl.pathname = `/${dbName}`;
  const vhost = `sts_bench_${id}`;
  const logger = createLogger({ service: 'bench', level: 'warn' });
  const key = randomBytes(32).toString('base64');
  const box = createSecretBox(key);

  let db: Db | undefined;
  let amqp: AmqpClient | undefined;
  let dispatcher: ChildProcess | undefined;
  const receivers: HttpsReceiver[] = [];
  let result = { deliveriesPerS: NaN, p50: NaN, p99: NaN, isolationP99: NaN, cpuPerDelivery: NaN };
  try {
    log(`database ${dbName}, vhost ${vhost}`);
    await ensureDatabase(dbUrl.toString());
    await migrate(dbUrl.toString());
    db = createDbClient({ url: dbUrl.toString(), poolSize: 4 });
    const amqpUrl = await createVhost(urls, vhost);

    const receipts: Receipts = { at: new Map(), latencies: [], isolation: [], phase: 'throughput', waiters: new Set() };
    for (let i = 0; i < RECEIVERS; i++) {
      receivers.push(
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
    const waitForReceipts = (n: number, timeoutMs: number) =>
      new Promise<void>((resolve, reject) => {
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

    // Starter monitors spread over the receivers (each receiver is its own endpoint)
    const account = await createAccount(db, 'starter');
    const monitors: MonitorFixture[] = [];
    for (let i = 0; i < MONITORS; i++) {
      const r = receivers[i % receivers.length]!;
      monitors.push(
        await createMonitor(db, box, { accountId: account.id, url: `${r.url}/hooks/${i}`, targetUsername: `user${i}` }),
      );
    }
    // the dead endpoint of another account (isolation phase)
    const dead = await startHttpsReceiver({ record: false });
    receivers.push(dead);
    let deadInFlight = 0;
    const deadAccount = await createAccount(db, 'starter');
    const deadMonitor = await createMonitor(db, box, { accountId: deadAccount.id, url: `${dead.url}/hooks/dead` });
    dead.setResponder(() => {
      deadInFlight++;
      return { status: 200, delayMs: 3_600_000 };
    });
    const warmup = 500;
    const latencyHits = RATE * SECONDS;
    const isolationHits = ISOLATION_RATE * ISOLATION_SECONDS;
    const total = warmup + HITS + latencyHits + isolationHits;
    log(
      `seeding ${total} hits for ${MONITORS} monitors on ${RECEIVERS} receivers, ${DEAD_BACKLOG} for a dead endpoint`,
    );
    const hits: { id: string; monitor: MonitorFixture; tweetId: string }[] = [];
    for (let i = 0; i < total; i++) {
      hits.push({ id: randomUUID(), monitor: monitors[i % monitors.length]!, tweetId: snowflakeId() });
    }
    const deadHits = Array.from({ length: DEAD_BACKLOG }, () => ({
      id: randomUUID(),
      monitor: deadMonitor,
      tweetId: snowflakeId(),
    }));
    const created = new Date();
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

    dispatcher = await startDispatcher({
      ...process.env,
      DATABASE_URL: dbUrl.toString(),
      AMQP_URL: amqpUrl,
      SECRETS_ENCRYPTION_KEY: key,
      WEBHOOK_ALLOW_PRIVATE_HOSTS: 'localhost',
      OPS_PORT: '0',
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
      // the dead endpoint's deliveries never finish: do not wait the default 20 s at the end
      DISPATCH_SHUTDOWN_GRACE_MS: '1000',
    });
    amqp = new AmqpClient({ url: amqpUrl, logger, name: 'bench-publisher' });
    await amqp.start();
    const client = amqp;

    const publish = (h: (typeof hits)[number]) => {
      const now = new Date();
      const payload = hitPayload(h.monitor, h.tweetId, `Benchmark post ${h.tweetId} #launch`, created, now);
      return client.publish('monitor.hit', payload, {
        messageId: randomUUID(),
        headers: { accountId: h.monitor.accountId, hitId: h.id },
      });
    };
    const publishAll = async (list: typeof hits, window = 500) => {
      for (let i = 0; i < list.length; i += window) await Promise.all(list.slice(i, i + window).map(publish));
    };

    // 0. warm-up (connections, JIT, caches)
    await publishAll(hits.slice(0, warmup));
    await waitForReceipts(warmup, 60_000);
    log(`warm-up: ${warmup} delivered`);

    // CPU per delivery: the dispatcher's CPU time over the throughput and latency phases (after the
    // warm-up, before the isolation phase, whose dead endpoint's backlog circulates through parking)
    const cpuBefore = cpuMicros(dispatcher.pid!);
    // statements the database committed (each autocommit statement is one transaction)
    const commits = async () =>
      Number(
        (
          await db!.$queryRawUnsafe<{ n: bigint }[]>(
            `SELECT xact_commit AS n FROM pg_stat_database WHERE datname = '${dbName}'`,
          )
        )[0]?.n ?? 0,
      );
    const commitsBefore = await commits();

    // 1. throughput
    const burst = hits.slice(warmup, warmup + HITS);
    const t0 = Date.now();
    await publishAll(burst);
    const published = Date.now();
    await waitForReceipts(warmup + HITS, 300_000);
    const last = Math.max(...[...receipts.at.values()]);
    log(`parked (deferred) messages so far: ${await parkedSoFar(dispatcherPort)}`);
    const tls = receivers.slice(0, RECEIVERS).reduce((n, r) => n + r.connectionCount(), 0);
    log(`TLS connections accepted by the receivers so far: ${tls} (for ${receipts.at.size} deliveries)`);
    const deliveriesPerS = HITS / ((last - t0) / 1000);
    log(
      `throughput: ${HITS} hits published in ${published - t0} ms, all delivered after ${last - t0} ms: ${Math.round(deliveriesPerS)} deliveries/s`,
    );

    const publishSteady = async (list: typeof hits, rate: number) => {
      const start = Date.now();
      const interval = 1000 / rate;
      const pending: Promise<unknown>[] = [];
      for (let i = 0; i < list.length; i++) {
        const due = start + i * interval;
        const wait = due - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        pending.push(publish(list[i]!));
      }
      await Promise.all(pending);
    };

    // 2. latency at a steady rate
    receipts.phase = 'latency';
    await publishSteady(hits.slice(warmup + HITS, warmup + HITS + latencyHits), RATE);
    await waitForReceipts(warmup + HITS + latencyHits, 60_000);
    const sorted = [...receipts.latencies].sort((a, b) => a - b);
    const p50 = percentile(sorted, 50);
    const p99 = percentile(sorted, 99);
    log(
      `latency at ${RATE} hits/s for ${SECONDS} s (${sorted.length} hits): p50 ${p50} ms, p99 ${p99} ms, max ${sorted.at(-1)} ms`,
    );

    const cpuPerDelivery = (cpuMicros(dispatcher.pid!) - cpuBefore) / (HITS + latencyHits);
    log(`dispatcher cpu: ${Math.round(cpuPerDelivery)} µs per delivery (throughput and latency phases)`);
    // pg_stat_database lags by up to PGSTAT's flush interval (about 1 s): a rough figure
    await new Promise((r) => setTimeout(r, 1500));
    log(`database transactions per delivery: ${round(((await commits()) - commitsBefore) / (HITS + latencyHits), 2)}`);

    // 3. isolation: a dead endpoint with a backlog, healthy endpoints at a steady rate
    await publishAll(deadHits);
    const deadline = Date.now() + 60_000;
    while (DEAD_BACKLOG > 0 && deadInFlight < 8 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    receipts.phase = 'isolation';
    await publishSteady(hits.slice(warmup + HITS + latencyHits), ISOLATION_RATE);
    await waitForReceipts(total, 60_000);
    const isolated = [...receipts.isolation].sort((a, b) => a - b);
    const isolationP99 = percentile(isolated, 99);
    log(
      `isolation: ${DEAD_BACKLOG} hits queued for a dead endpoint (${deadInFlight} in flight); ${isolated.length} healthy hits at ${ISOLATION_RATE}/s: p50 ${percentile(isolated, 50)} ms, p99 ${isolationP99} ms, max ${isolated.at(-1)} ms`,
    );
    log(`parked (deferred) messages so far: ${await parkedSoFar(dispatcherPort)}`);
    const attempts = await db.deliveryAttempt.groupBy({ by: ['outcome'], _count: { _all: true } });
    log(`attempt log: ${attempts.map((a) => `${a.outcome} ${a._count._all}`).join(', ')}`);
    result = { deliveriesPerS, p50, p99, isolationP99, cpuPerDelivery };
  } finally {
    if (dispatcher?.pid && dispatcher.exitCode === null) {
      // CPU time the dispatcher used for the whole run (less sensitive to a busy machine than rates)
      log(`dispatcher cpu: ${(cpuMicros(dispatcher.pid) / 1e6).toFixed(1)} s (user+system) for the whole run`);
    }
    if (dispatcher && dispatcher.exitCode === null) {
      const exited = new Promise((r) => dispatcher!.once('exit', r));
      dispatcher.kill('SIGTERM');
      await exited;
    }
    await amqp?.stop().catch(() => undefined);
    for (const r of receivers) await r.close();
    await db?.$disconnect();
    const admin = createDbClient({ url: urls.postgres, poolSize: 1 });
    await admin.$executeRawUnsafe(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`).catch(() => undefined);
    await admin.$disconnect();
    await deleteVhosts(urls, vhost).catch(() => undefined);
    log('database and vhost removed');
  }

  let sourceCalls: number | string = 'n/a';
  const pollerBench = path.join(__dirname, 'poller.ts');
  if (existsSync(pollerBench)) {
    const mod = (await import(pollerBench)) as {
      measurePollerCycle?: () => Promise<{ sourceCallsPerCycle: number }>;
    };
    if (mod.measurePollerCycle) sourceCalls = (await mod.measurePollerCycle()).sourceCallsPerCycle;
    else log('bench/poller.ts has no measurePollerCycle()');
  } else {
    log('bench/poller.ts not found: source calls per cycle not measured');
  }

  console.log(`dispatcher_cpu_us_per_delivery ${Math.round(result.cpuPerDelivery)}`);
  console.log(`isolation_p99_ms ${round(result.isolationP99)}`);
  console.log(
    `deliveries_per_s ${Math.round(result.deliveriesPerS)} p50_ms ${round(result.p50)} p99_ms ${round(result.p99)} source_calls_per_cycle ${sourceCalls}`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
