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
 * In a database and RabbitMQ vhost of its own (removed at the end), the dispatcher a child process
 * (BENCH_RUNTIME as in the other benches), the receiver a local HTTPS server with the test CA.
 * Last line: `hits <n> delivered <d> lost <l> accepted_twice <a> attempts <t> last_after_back_s <s>
 * p50_after_back_s <p>`: hits whose webhook-id was accepted at least once, never, more than once;
 * attempts logged in all; when the last (and the median) first acceptance came after the receiver
 * was back. Run it small with RETRY_DOWN_S=10 RETRY_RATE=5 (the schedule's 5 s and 30 s steps).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger, loadDevEnv } from '../packages/common/src';
import { createSecretBox } from '../packages/core/src';
import { createDbClient } from '../packages/db/src';
import { AmqpClient } from '../packages/messaging/src';
import { createAccount, createHit, createMonitor } from '../packages/testing/src/fixtures';
import { startHttpsReceiver } from '../packages/testing/src/https';
import { createVhost, deleteVhosts } from '../packages/testing/src/services';
import { percentile, positiveEnv } from './lib/numbers';
import { paced } from './lib/pace';
import { createDatabase, dropDatabase, root, serviceEntry, serviceUrls, stopChild, trustTestCa } from './lib/services';

const RATE = positiveEnv('RETRY_RATE', 20);
const DOWN_S = positiveEnv('RETRY_DOWN_S', 60);
const KILL = process.env.RETRY_KILL !== '0';
const KILL_PAUSE_S = positiveEnv('RETRY_KILL_PAUSE_S', 3);
/** the schedule's step after which every hit of the outage has had its attempt after it: 10 min, plus margin */
const SETTLE_MS = positiveEnv('RETRY_SETTLE_S', 12 * 60) * 1000;

const log = (s: string) => console.log(`[bench:retry] ${s}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** the dispatcher as a child process; resolves once it consumes */
async function startDispatcher(env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  const child = spawn(process.execPath, serviceEntry('webhook-dispatcher'), { cwd: root, env, stdio: 'pipe' });
  await new Promise<void>((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`dispatcher did not start within 60 s:\n${buf}`)), 60_000);
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      if (buf.includes('webhook-dispatcher started')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.stderr.on('data', (d: Buffer) => (buf += d.toString('utf8')));
    child.once('exit', (code) => reject(new Error(`dispatcher exited with ${code} before it started:\n${buf}`)));
  });
  child.stdout?.resume();
  return child;
}

interface Receipts {
  /** webhook-id → how many times it was accepted (2xx) */
  accepted: Map<string, number>;
  /** webhook-id → when it was first accepted (ms) */
  firstAt: Map<string, number>;
  backAt: number;
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
  const receipts: Receipts = { accepted: new Map(), firstAt: new Map(), backAt: Infinity };
  const receiver = await startHttpsReceiver({
    record: false,
    handler: (req) => {
      if (Date.now() < receipts.backAt) return { status: 503 };
      const id = String(req.headers['webhook-id']);
      receipts.accepted.set(id, (receipts.accepted.get(id) ?? 0) + 1);
      if (!receipts.firstAt.has(id)) receipts.firstAt.set(id, Date.now());
      return { status: 200 };
    },
  });
  const logger = createLogger({ service: 'bench-retry', level: 'warn' });
  const amqp = new AmqpClient({ url: amqpUrl, logger, name: 'bench-retry-publisher' });
  let dispatcher: ChildProcess | undefined;
  try {
    const key = randomBytes(32).toString('base64');
    const account = await createAccount(db, 'starter');
    const monitor = await createMonitor(db, createSecretBox(key), { accountId: account.id, url: `${receiver.url}/in` });
    await db.webhookEndpoint.update({ where: { monitorId: monitor.id }, data: { retryPolicy: 'standard' } });
    const env = {
      ...process.env,
      DATABASE_URL: dbUrl,
      AMQP_URL: amqpUrl,
      SECRETS_ENCRYPTION_KEY: key,
      WEBHOOK_ALLOW_PRIVATE_HOSTS: 'localhost',
      OPS_PORT: '0',
      LOG_LEVEL: 'error',
      DISPATCH_SHUTDOWN_GRACE_MS: '1000',
    };
    dispatcher = await startDispatcher(env);
    await amqp.start();
    const ids: string[] = [];
    const downStart = Date.now();
    receipts.backAt = downStart + DOWN_S * 1000;
    log(`receiver down for ${DOWN_S} s, ${RATE} hits/s, standard policy${KILL ? ', dispatcher killed halfway' : ''}`);
    const killer = KILL
      ? (async () => {
          await sleep((DOWN_S * 1000) / 2);
          dispatcher?.kill('SIGKILL');
          log('dispatcher killed (SIGKILL)');
          await sleep(KILL_PAUSE_S * 1000);
          dispatcher = await startDispatcher(env);
          log('dispatcher started again');
        })()
      : Promise.resolve();
    const publishes: Promise<void>[] = [];
    await paced(RATE, DOWN_S, () => {
      publishes.push(
        (async () => {
          const hit = await createHit(db, monitor, `post ${randomUUID()} #launch`);
          const messageId = randomUUID();
          ids.push(messageId);
          await amqp.publish('monitor.hit', hit.payload, {
            messageId,
            headers: { accountId: monitor.accountId, hitId: hit.id },
          });
        })(),
      );
    });
    await Promise.all(publishes);
    await killer;
    log(`${ids.length} hits published; waiting for every one to be accepted (at most ${SETTLE_MS / 1000} s)`);
    const deadline = Date.now() + SETTLE_MS;
    while (Date.now() < deadline && ids.some((id) => !receipts.accepted.has(id))) await sleep(1000);
    await sleep(2000); // anything sent twice would arrive now
    const delivered = ids.filter((id) => receipts.accepted.has(id)).length;
    const twice = ids.filter((id) => (receipts.accepted.get(id) ?? 0) > 1).length;
    const after = ids
      .map((id) => receipts.firstAt.get(id))
      .filter((t): t is number => t !== undefined)
      .map((t) => (t - receipts.backAt) / 1000)
      .sort((a, b) => a - b);
    const attempts = await db.deliveryAttempt.count({ where: { monitorId: monitor.id } });
    const last = after.length ? after[after.length - 1]!.toFixed(1) : 'n/a';
    const p50 = after.length ? percentile(after, 50).toFixed(1) : 'n/a';
    console.log(
      `hits ${ids.length} delivered ${delivered} lost ${ids.length - delivered} accepted_twice ${twice} attempts ${attempts} last_after_back_s ${last} p50_after_back_s ${p50}`,
    );
  } finally {
    await stopChild(dispatcher, 5000);
    await amqp.stop().catch(() => undefined);
    await receiver.close();
    await db.$disconnect();
    await dropDatabase(urls.postgres, dbName);
    await deleteVhosts(urls, vhost).catch(() => undefined);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
