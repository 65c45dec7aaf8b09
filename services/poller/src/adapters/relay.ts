/**
 * The outbox relay: publishes monitor.hit events written by the poller's transactions to
 * RabbitMQ. Rows are claimed in id order with FOR UPDATE SKIP LOCKED (replicas share the work),
 * published with confirms, and marked published only after the broker confirmed them. A failed
 * publish leaves its row for the next round (attempts + 1, last_error); a crash between publish
 * and mark means the same message id is published again: at least once, never lost.
 */
import { Client } from 'pg';
import type { Logger } from '@sts/common';
import type { Db } from '@sts/db';
import { contracts, type HeadersOf, type PayloadOf } from '@sts/messaging';
import { OUTBOX_CHANNEL } from './repository';

export interface Publisher {
  publish<K extends 'monitor.hit'>(
    routingKey: K,
    payload: PayloadOf<K>,
    opts: { messageId: string; headers: HeadersOf<K> },
  ): Promise<void>;
}

export interface OutboxRelayOptions {
  db: Db;
  publisher: Publisher;
  logger: Logger;
  /** for LISTEN/NOTIFY wake-ups; without it the relay polls every `idleMs` */
  databaseUrl?: string;
  batchSize?: number;
  /** fallback poll interval when nothing woke the relay */
  idleMs?: number;
  /** published rows older than this are deleted (default 7 days) */
  retainMs?: number;
  onPublished?: (count: number) => void;
}

export interface OutboxRelay {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** one round: publishes up to batchSize rows; returns how many were published */
  runOnce(): Promise<number>;
  /** deletes published rows older than `retainMs` (unpublished rows are never deleted); returns how many */
  prune(): Promise<number>;
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

// eslint-disable-next-line max-lines-per-function -- a factory of small closures (round, prune, listen, run; each under 40 lines) sharing the relay state
export function createOutboxRelay(options: OutboxRelayOptions): OutboxRelay {
  const { db, publisher, logger } = options;
  const batchSize = options.batchSize ?? 200;
  const idleMs = options.idleMs ?? 250;
  const retainMs = options.retainMs ?? 7 * 24 * 3600 * 1000;
  let running = false;
  let loop: Promise<void> | undefined;
  let wake: (() => void) | undefined;
  let listener: Client | undefined;
  let lastPrune = 0;

  /** One round; `failed` counts rows whose publish failed (they stay for a later round). */
  async function round(): Promise<{ published: number; failed: number }> {
    return db.$transaction(
      async (tx) => {
        const rows = await tx.$queryRaw<Row[]>`
          SELECT id, routing_key, message_id, payload, headers FROM outbox
          WHERE published_at IS NULL ORDER BY id LIMIT ${batchSize} FOR UPDATE SKIP LOCKED`;
        if (rows.length === 0) return { published: 0, failed: 0 };
        const results = await Promise.allSettled(
          rows.map(async (row) => {
            if (row.routing_key !== 'monitor.hit') throw new Error(`unknown routing key ${row.routing_key}`);
            const payload = contracts['monitor.hit'].payload.parse(row.payload);
            const headers = contracts['monitor.hit'].headers.parse(row.headers);
            await publisher.publish('monitor.hit', payload, { messageId: row.message_id, headers });
          }),
        );
        const ok: bigint[] = [];
        for (const [i, r] of results.entries()) {
          const row = rows[i]!;
          if (r.status === 'fulfilled') ok.push(row.id);
          else {
            const message = r.reason instanceof Error ? r.reason.message : String(r.reason);
            logger.warn('outbox publish failed', { messageId: row.message_id, error: message });
            await tx.$executeRaw`UPDATE outbox SET attempts = attempts + 1, last_error = ${message.slice(0, 500)} WHERE id = ${row.id}`;
          }
        }
        if (ok.length > 0)
          await tx.$executeRaw`UPDATE outbox SET published_at = now(), attempts = attempts + 1 WHERE id = ANY(${ok}::bigint[])`;
        options.onPublished?.(ok.length);
        return { published: ok.length, failed: rows.length - ok.length };
      },
      { timeout: 60_000, maxWait: 10_000 },
    );
  }

  async function runOnce(): Promise<number> {
    return (await round()).published;
  }

  async function prune(): Promise<number> {
    lastPrune = Date.now();
    const cutoff = new Date(Date.now() - retainMs);
    const n = await db.outboxEvent.deleteMany({ where: { publishedAt: { lt: cutoff } } });
    if (n.count > 0) logger.info('outbox pruned', { rows: n.count });
    return n.count;
  }

  /** at most once an hour while running */
  async function maybePrune(): Promise<void> {
    if (Date.now() - lastPrune >= 3600_000) await prune();
  }

  async function listen(): Promise<void> {
    if (!options.databaseUrl) return;
    const client = new Client({ connectionString: options.databaseUrl });
    client.on('error', (err) => {
      logger.warn('outbox listener lost its connection; polling until it is back', { error: err.message });
      listener = undefined;
      setTimeout(() => void (running ? listen().catch(() => undefined) : undefined), 1000).unref();
    });
    client.on('notification', () => wake?.());
    await client.connect();
    await client.query(`LISTEN ${OUTBOX_CHANNEL}`);
    listener = client;
  }

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  async function run(): Promise<void> {
    let backoff = 0;
    while (running) {
      try {
        const { published, failed } = await round();
        await maybePrune();
        // back off only when nothing went out (broker down); a row that alone keeps failing
        // must not slow the rows behind it
        if (failed > 0 && published === 0) throw new Error(`${failed} outbox row(s) not published`);
        backoff = 0;
        if (published + failed >= batchSize) continue; // more are waiting
      } catch (err) {
        backoff = Math.min(Math.max(backoff * 2, 200), 5000);
        logger.warn('outbox relay round failed', { error: err instanceof Error ? err.message : String(err) });
      }
      if (!running) break;
      await sleep(backoff || idleMs);
    }
  }

  return {
    async start() {
      if (running) return;
      running = true;
      await listen().catch((err: unknown) =>
        logger.warn('outbox listener could not start; polling instead', {
          error: err instanceof Error ? err.message : String(err),
        }),
      );
      loop = run();
    },
    async stop() {
      running = false;
      wake?.();
      await loop;
      await listener?.end().catch(() => undefined);
      listener = undefined;
    },
    runOnce,
    prune,
    async lag() {
      const [row] = await db.$queryRaw<{ pending: bigint; oldest: Date | null }[]>`
        SELECT count(*) AS pending, min(created_at) AS oldest FROM outbox WHERE published_at IS NULL`;
      return { pending: Number(row?.pending ?? 0), oldestMs: row?.oldest ? Date.now() - row.oldest.getTime() : 0 };
    },
  };
}
