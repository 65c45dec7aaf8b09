/**
 * `npm run bench:hold`: a webhook disabled by endpoint health while BENCH_HOLD_HITS (default 200)
 * monitor.hit events arrive over BENCH_HOLD_SECONDS (default 600: ten minutes), then enabled as
 * `webhook enable` does; every held hit must reach the receiver, in the order published, once, and
 * none be logged as skipped. The dispatcher runs as a child process on its own database and vhost
 * (both removed afterwards), with RabbitMQ and a local HTTPS receiver, as in bench/pipeline.ts.
 *
 * Reported (last line): `hold_release_s <n> first_ms <n> in_order <bool> delivered <n> skipped <n>
 * duplicates <n> late_hit_last <bool>`: the time from the enable to the last held hit's receipt,
 * to the first one, whether the receipts follow the publishing order, the attempt rows by outcome,
 * and whether a hit published just after the enable arrived after every held one.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger, loadDevEnv } from '../packages/common/src';
import { createSecretBox, snowflakeId } from '../packages/core/src';
import { createDbClient, type Db } from '../packages/db/src';
import { AmqpClient } from '../packages/messaging/src';
import { startHttpsReceiver, type HttpsReceiver } from '../packages/testing/src/https';
import { createVhost, deleteVhosts } from '../packages/testing/src/services';
import { createAccount, createMonitor, hitPayload, type MonitorFixture } from '../packages/testing/src/fixtures';
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

const HITS = Number(process.env.BENCH_HOLD_HITS ?? 200);
const SECONDS = Number(process.env.BENCH_HOLD_SECONDS ?? 600);

const log = (msg: string) => console.log(`[bench:hold] ${msg}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitUntil(what: string, check: () => Promise<boolean> | boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function startDispatcher(env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  log(`dispatcher runtime: ${RUNTIME}`);
  return (await startService('webhook-dispatcher', env)).child;
}

interface Setup {
  db: Db;
  receiver: HttpsReceiver;
  monitor: MonitorFixture;
  amqp: AmqpClient;
  dispatcher: ChildProcess;
  /** tweet ids in the order received (first receipt of each delivery id) */
  received: string[];
  duplicates: { n: number };
}

/** a hit row, then its monitor.hit message; resolves with its tweet id */
async function publishHit(s: Pick<Setup, 'db' | 'amqp' | 'monitor'>): Promise<string> {
  const tweetId = snowflakeId();
  const text = `Held post ${tweetId} #launch`;
  const now = new Date();
  const hit = await s.db.hit.create({
    data: {
      monitorId: s.monitor.id,
      tweetId,
      tweetText: text,
      tweetAuthorId: '1',
      tweetAuthorUsername: s.monitor.targetUsername,
      tweetCreatedAt: now,
      detectedAt: now,
    },
  });
  await s.amqp.publish('monitor.hit', hitPayload(s.monitor, tweetId, text, now, now), {
    messageId: randomUUID(),
    headers: { accountId: s.monitor.accountId, hitId: hit.id },
  });
  return tweetId;
}

async function measure(s: Setup): Promise<string> {
  const endpoint = () => s.db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: s.monitor.id } });
  // disabled as endpoint health leaves it: a failing run of more than 3 days
  await s.db.webhookEndpoint.update({
    where: { monitorId: s.monitor.id },
    data: {
      consecutiveFailures: 6,
      firstFailureAt: new Date(Date.now() - 3 * 86_400_000 - 60_000),
      disabledAt: new Date(),
    },
  });
  log(`publishing ${HITS} hits over ${SECONDS} s while the webhook is disabled`);
  const published: string[] = [];
  const start = Date.now();
  for (let i = 0; i < HITS; i++) {
    await sleep(Math.max(0, start + (i * SECONDS * 1000) / HITS - Date.now()));
    published.push(await publishHit(s));
  }
  await waitUntil(`${HITS} held`, async () => (await endpoint()).heldCount === HITS, 120_000);
  if (s.received.length > 0) throw new Error(`${s.received.length} hits reached a disabled endpoint`);

  log('enabling the webhook (as `webhook enable` does)');
  const enabledAt = Date.now();
  await s.db.webhookEndpoint.update({
    where: { monitorId: s.monitor.id },
    data: { consecutiveFailures: 0, firstFailureAt: null, disabledAt: null },
  });
  const late = await publishHit(s);
  let firstAt = 0;
  await waitUntil('the first held hit', () => s.received.length > 0, 60_000);
  firstAt = Date.now();
  await waitUntil(`${HITS} held hits`, () => s.received.length >= HITS, 600_000);
  const releasedAt = Date.now();
  await waitUntil('the hit published after the enable', () => s.received.includes(late), 60_000);
  await waitUntil('the attempt rows', async () => (await s.db.deliveryAttempt.count()) >= HITS + 1, 60_000);
  const outcomes = await s.db.deliveryAttempt.groupBy({ by: ['outcome'], _count: true });
  const count = (o: string) => outcomes.find((x) => x.outcome === o)?._count ?? 0;
  const inOrder = s.received.slice(0, HITS).every((id, i) => id === published[i]);
  if (!inOrder) {
    const at = s.received.findIndex((id, i) => id !== published[i]);
    log(`first out of order at ${at}: received ${s.received.slice(at, at + 5).join(',')}`);
    log(`published ${published.slice(at, at + 5).join(',')}`);
  }
  const result = [
    `hold_release_s ${((releasedAt - enabledAt) / 1000).toFixed(2)}`,
    `first_ms ${firstAt - enabledAt}`,
    `in_order ${inOrder}`,
    `delivered ${count('delivered')}`,
    `skipped ${count('skipped')}`,
    `duplicates ${s.duplicates.n}`,
    `late_hit_last ${s.received.indexOf(late) === HITS}`,
  ].join(' ');
  return result;
}

async function main(): Promise<void> {
  loadDevEnv();
  await trustTestCa(__filename);
  const urls = serviceUrls();
  const id = randomBytes(4).toString('hex');
  const name = `sts_bench_${id}`;
  const key = randomBytes(32).toString('base64');
  const cleanup: (() => Promise<unknown>)[] = [];
  try {
    const dbUrl = await createDatabase(urls.postgres, name);
    cleanup.push(() => dropDatabase(urls.postgres, name));
    const db = createDbClient({ url: dbUrl, poolSize: 4 });
    cleanup.unshift(() => db.$disconnect());
    const amqpUrl = await createVhost(urls, name);
    cleanup.push(() => deleteVhosts(urls, name));
    const received: string[] = [];
    const seen = new Set<string>();
    const duplicates = { n: 0 };
    const receiver = await startHttpsReceiver({
      record: false,
      onRequest: (req) => {
        const deliveryId = String(req.headers['x-service-delivery']);
        if (seen.has(deliveryId)) duplicates.n++;
        seen.add(deliveryId);
        received.push((JSON.parse(req.rawBody.toString('utf8')) as { tweet: { id: string } }).tweet.id);
      },
    });
    cleanup.unshift(() => receiver.close());
    const account = await createAccount(db, 'starter');
    const monitor = await createMonitor(db, createSecretBox(key), {
      accountId: account.id,
      url: `${receiver.url}/hooks/held`,
    });
    const dispatcher = await startDispatcher(
      dispatcherEnv({ dbUrl, amqpUrl, key, logLevel: process.env.BENCH_LOG_LEVEL ?? 'warn' }),
    );
    cleanup.unshift(() => stopChild(dispatcher));
    const amqp = new AmqpClient({
      url: amqpUrl,
      logger: createLogger({ service: 'bench', level: 'warn' }),
      name: 'bench-hold-publisher',
    });
    await amqp.start();
    cleanup.unshift(() => amqp.stop());
    const line = await measure({ db, receiver, monitor, amqp, dispatcher, received, duplicates });
    console.log(line);
  } finally {
    for (const step of cleanup) await step().catch(() => undefined);
    log('database and vhost removed');
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
