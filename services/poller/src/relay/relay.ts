/**
 * The outbox relay: publishes monitor.hit (and monitor.profile_changed, monitor.target_unavailable) events written by the poller's transactions to
 * RabbitMQ. Rows are claimed in id order with FOR UPDATE SKIP LOCKED (replicas share the work),
 * published with confirms, and marked published only after the broker confirmed them. A failed
 * publish leaves its row for the next round (attempts + 1, last_error); a crash between publish
 * and mark means the same message id is published again: at least once, never lost. Published
 * rows are deleted in batches by the maintenance step (@sts/db maintenance), not here.
 */
import type { Logger } from '@sts/common';
import { contracts, type HeadersOf, type PayloadOf } from '@sts/messaging';
import { subscribe, type Db, type DirectSession, type Subscription } from '@sts/db';
import { SESSION_APPLICATION_NAME } from '../adapters/session';
import { OUTBOX_CHANNEL } from '../domain/pipeline';
import { errorMessage } from '@sts/core';

/** what the poller's transactions write to the outbox */
type OutboxKey = 'monitor.hit' | 'monitor.profile_changed' | 'monitor.target_unavailable' | 'monitor.post_deleted';
const OUTBOX_KEYS: readonly string[] = [
  'monitor.hit',
  'monitor.profile_changed',
  'monitor.target_unavailable',
  'monitor.post_deleted',
] satisfies OutboxKey[];

interface Publisher {
  publish<K extends OutboxKey>(
    routingKey: K,
    payload: PayloadOf<K>,
    opts: { messageId: string; headers: HeadersOf<K> },
  ): Promise<void>;
}

export interface OutboxRelayOptions {
  db: Db;
  publisher: Publisher;
  logger: Logger;
  /** the process's direct session, for LISTEN/NOTIFY wake-ups */
  session?: DirectSession;
  /** without `session`: a session of its own for the wake-ups; without either the relay polls every `idleMs` */
  databaseUrl?: string;
  batchSize?: number;
  /** fallback poll interval when nothing woke the relay */
  idleMs?: number;
  onPublished?: (count: number) => void;
}

export interface OutboxRelay {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** one round: publishes up to batchSize rows; returns how many were published */
  runOnce(): Promise<number>;
  /** unpublished rows and the age of the oldest, for metrics and readiness */
  lag(): Promise<{ pending: number; oldestMs: number }>;
}

interface Row {
  id: bigint;
  routing_key: string;
  message_id: string;
  payload: unknown;
  headers: unknown;
}

type Tx = Parameters<Parameters<Db['$transaction']>[0]>[0];

interface RoundResult {
  published: number;
  failed: number;
}

async function publishRow(publisher: Publisher, row: Row): Promise<void> {
  if (!OUTBOX_KEYS.includes(row.routing_key)) throw new Error(`unknown routing key ${row.routing_key}`);
  const key = row.routing_key as OutboxKey;
  const payload = contracts[key].payload.parse(row.payload) as PayloadOf<OutboxKey>;
  const headers = contracts[key].headers.parse(row.headers) as HeadersOf<OutboxKey>;
  await publisher.publish(key, payload, { messageId: row.message_id, headers });
}

/** Publishes the claimed rows; marks the confirmed ones published and the others failed. */
async function publishClaimed(tx: Tx, rows: Row[], options: OutboxRelayOptions): Promise<RoundResult> {
  const results = await Promise.allSettled(rows.map((row) => publishRow(options.publisher, row)));
  const ok: bigint[] = [];
  for (const [i, r] of results.entries()) {
    const row = rows[i]!;
    if (r.status === 'fulfilled') ok.push(row.id);
    else {
      const message = errorMessage(r.reason);
      options.logger.warn('outbox publish failed', { messageId: row.message_id, err: message });
      await tx.$executeRaw`UPDATE outbox SET attempts = attempts + 1, last_error = ${message.slice(0, 500)} WHERE id = ${row.id}`;
    }
  }
  if (ok.length > 0)
    await tx.$executeRaw`UPDATE outbox SET published_at = now(), attempts = attempts + 1 WHERE id = ANY(${ok}::bigint[])`;
  options.onPublished?.(ok.length);
  return { published: ok.length, failed: rows.length - ok.length };
}

/** One round: claims up to `batchSize` rows (`failed` counts rows left for a later round). */
function round(options: OutboxRelayOptions, batchSize: number): Promise<RoundResult> {
  return options.db.$transaction(
    async (tx) => {
      const rows = await tx.$queryRaw<Row[]>`
        SELECT id, routing_key, message_id, payload, headers FROM outbox
        WHERE published_at IS NULL ORDER BY id LIMIT ${batchSize} FOR UPDATE SKIP LOCKED`;
      if (rows.length === 0) return { published: 0, failed: 0 };
      return publishClaimed(tx, rows, options);
    },
    { timeout: 60_000, maxWait: 10_000 },
  );
}

/**
 * A sleep that `wake()` ends early. A wake-up that comes while no sleep runs (a notification during
 * a round) is kept: the next sleep returns at once, so a row committed mid-round waits for no idle poll.
 */
export function wakeableSleep() {
  let wake: (() => void) | undefined;
  let woken = false;
  return {
    sleep: (ms: number) =>
      new Promise<void>((resolve) => {
        if (woken) {
          woken = false;
          return resolve();
        }
        const timer = setTimeout(() => {
          wake = undefined;
          resolve();
        }, ms);
        wake = () => {
          clearTimeout(timer);
          wake = undefined;
          resolve();
        };
      }),
    wake: () => {
      if (wake) wake();
      else woken = true;
    },
  };
}

async function lagOf(db: Db): Promise<{ pending: number; oldestMs: number }> {
  const [row] = await db.$queryRaw<{ pending: bigint; oldest: Date | null }[]>`
    SELECT count(*) AS pending, min(created_at) AS oldest FROM outbox WHERE published_at IS NULL`;
  return { pending: Number(row?.pending ?? 0), oldestMs: row?.oldest ? Date.now() - row.oldest.getTime() : 0 };
}

export function createOutboxRelay(options: OutboxRelayOptions): OutboxRelay {
  const { db, logger } = options;
  const batchSize = options.batchSize ?? 200;
  const idleMs = options.idleMs ?? 250;
  let running = false;
  let loop: Promise<void> | undefined;
  let listener: Subscription | undefined;
  const nap = wakeableSleep();

  /** a round; the delay before the next round (0: at once) */
  async function step(backoff: number): Promise<number> {
    try {
      const { published, failed } = await round(options, batchSize);
      // back off only when nothing went out (broker down); a row that alone keeps failing
      // must not slow the rows behind it
      if (failed > 0 && published === 0) throw new Error(`${failed} outbox row(s) not published`);
      return published + failed >= batchSize ? 0 : -1; // more are waiting: at once
    } catch (err) {
      logger.warn('outbox relay round failed', { err: errorMessage(err) });
      return Math.min(Math.max(backoff * 2, 200), 5000);
    }
  }

  async function run(): Promise<void> {
    let backoff = 0;
    while (running) {
      const next = await step(backoff);
      if (next === 0) continue;
      backoff = Math.max(next, 0);
      if (running) await nap.sleep(backoff || idleMs);
    }
  }

  return {
    async start() {
      if (running) return;
      running = true;
      listener = subscribe({ ...options, applicationName: SESSION_APPLICATION_NAME }, OUTBOX_CHANNEL, {
        onNotify: () => nap.wake(),
        onReconnect: () => nap.wake(),
      });
      await listener?.ready.catch((err: unknown) =>
        logger.warn('outbox listener could not start; polling instead', { err: errorMessage(err) }),
      );
      loop = run();
    },
    async stop() {
      running = false;
      nap.wake();
      await loop;
      await listener?.close();
      listener = undefined;
    },
    runOnce: async () => (await round(options, batchSize)).published,
    lag: () => lagOf(db),
  };
}
