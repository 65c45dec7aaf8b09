/**
 * `npm run bench:dueclaim`: the dispatcher's claim of due deliveries (adapters/repository.ts
 * `claimDue`) with a backlog waiting and without one. The backlog is DUECLAIM_ROWS due rows
 * (default 100000): two thirds of one fifo webhook whose endpoint keeps failing (its rows wait
 * behind its head), one third retries of one standard webhook, all due now. Beside them
 * DUECLAIM_HEALTHY webhooks (default 64) with DUECLAIM_HEALTHY_ROWS due rows each (default 4).
 *
 * Each round claims DUECLAIM_LIMIT (default 64, at most DUECLAIM_PER_WEBHOOK = 4 of a webhook) and
 * gives the claims back (not timed), DUECLAIM_ROUNDS times (default 200) with the backlog present,
 * then as many with the backlog deleted. Target: the claim's median with the backlog within 2× the
 * median without it. In a database of its own, removed at the end (DUECLAIM_KEEP=1: filled, kept
 * and its URL printed, nothing measured: for EXPLAIN). Last line: `rows <n> backlog_p50_ms <x> backlog_p99_ms <y>
 * empty_p50_ms <x> empty_p99_ms <y> claimed <n> ratio_p50 <r>`.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { loadDevEnv } from '../packages/common/src';
import { createSecretBox } from '../packages/core/src';
import { createDbClient, sqlPool, type Db } from '../packages/db/src';
import { createAccount, createMonitor } from '../packages/testing/src/fixtures';
import { createPrismaRepository } from '../services/webhook-dispatcher/src/adapters/repository';
import { percentile, positiveEnv } from './lib/numbers';
import { createDatabase, dropDatabase, serviceUrls } from './lib/services';

const ROWS = positiveEnv('DUECLAIM_ROWS', 100_000, { whole: true });
const HEALTHY = positiveEnv('DUECLAIM_HEALTHY', 64, { whole: true });
const HEALTHY_ROWS = positiveEnv('DUECLAIM_HEALTHY_ROWS', 4, { whole: true });
const LIMIT = positiveEnv('DUECLAIM_LIMIT', 64, { whole: true });
const PER_WEBHOOK = positiveEnv('DUECLAIM_PER_WEBHOOK', 4, { whole: true });
const ROUNDS = positiveEnv('DUECLAIM_ROUNDS', 200, { whole: true });
const KEEP = process.env.DUECLAIM_KEEP === '1';

const log = (s: string) => console.log(`[bench:dueclaim] ${s}`);

/** a webhook (its monitor's endpoint) with the given delivery rules; its id */
async function webhook(db: Db, accountId: string, ordering: 'fifo' | 'unordered'): Promise<string> {
  const box = createSecretBox(randomBytes(32).toString('base64'));
  const m = await createMonitor(db, box, { accountId, url: 'https://receiver.example.test/in' });
  const w = await db.webhookEndpoint.update({
    where: { monitorId: m.id },
    data: { retryPolicy: 'standard', ordering },
    select: { id: true },
  });
  return w.id;
}

/** `n` due rows of the webhook, due a minute ago, each its own delivery and event sequence, in one statement */
async function fill(db: Db, webhookId: string, n: number): Promise<void> {
  await sqlPool(db).query(
    `INSERT INTO webhook_deliveries_due (delivery_id, monitor_id, webhook_id, event, payload, attempt, due_at, event_sequence)
     SELECT $3 || ':' || i, w.monitor_id, w.id, 'monitor.hit', jsonb_build_object('sequence', i), 2,
            now() - interval '1 minute' + i * interval '1 microsecond', i
     FROM webhook_endpoints w, generate_series(1, $2::int) AS i WHERE w.id = $1::uuid`,
    [webhookId, n, randomUUID()],
  );
}

/** DUECLAIM_ROUNDS claims, each given back untimed; their times (ms, ascending) and the rows claimed per round */
async function measure(db: Db): Promise<{ times: number[]; claimed: number }> {
  const repository = createPrismaRepository(db);
  const sql = sqlPool(db);
  const times: number[] = [];
  let claimed = 0;
  for (let i = 0; i < ROUNDS; i++) {
    const start = process.hrtime.bigint();
    const rows = await repository.claimDue({
      limit: LIMIT,
      perWebhook: PER_WEBHOOK,
      busyWebhooks: [],
      leaseMs: 60_000,
    });
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
    claimed = rows.length;
    await sql.query('UPDATE webhook_deliveries_due SET claimed_until = NULL WHERE claimed_until IS NOT NULL');
  }
  return { times: times.sort((a, b) => a - b), claimed };
}

async function main(): Promise<void> {
  loadDevEnv();
  const urls = serviceUrls();
  const dbName = `sts_bench_dueclaim_${randomBytes(4).toString('hex')}`;
  const dbUrl = await createDatabase(urls.postgres, dbName);
  const db = createDbClient({ url: dbUrl, poolSize: 2 });
  try {
    const account = await createAccount(db, 'starter');
    const fifo = await webhook(db, account.id, 'fifo');
    const standard = await webhook(db, account.id, 'unordered');
    for (let i = 0; i < HEALTHY; i++) await fill(db, await webhook(db, account.id, 'unordered'), HEALTHY_ROWS);
    const fifoRows = Math.round((ROWS * 2) / 3);
    await fill(db, fifo, fifoRows);
    await fill(db, standard, ROWS - fifoRows);
    await sqlPool(db).query('VACUUM ANALYZE webhook_deliveries_due');
    log(
      `${ROWS} backlog rows (${fifoRows} fifo, ${ROWS - fifoRows} standard), ${HEALTHY} healthy webhooks × ${HEALTHY_ROWS}`,
    );
    if (KEEP) return log(`database kept: ${dbUrl}`);
    const backlog = await measure(db);
    await sqlPool(db).query('DELETE FROM webhook_deliveries_due WHERE webhook_id = ANY($1::uuid[])', [
      [fifo, standard],
    ]);
    await sqlPool(db).query('VACUUM ANALYZE webhook_deliveries_due');
    const empty = await measure(db);
    const b50 = percentile(backlog.times, 50);
    const e50 = percentile(empty.times, 50);
    console.log(
      `rows ${ROWS} backlog_p50_ms ${b50.toFixed(2)} backlog_p99_ms ${percentile(backlog.times, 99).toFixed(2)} ` +
        `empty_p50_ms ${e50.toFixed(2)} empty_p99_ms ${percentile(empty.times, 99).toFixed(2)} ` +
        `claimed ${backlog.claimed}/${empty.claimed} ratio_p50 ${(b50 / e50).toFixed(2)}`,
    );
  } finally {
    await db.$disconnect();
    if (!KEEP) await dropDatabase(urls.postgres, dbName);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
