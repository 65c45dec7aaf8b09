/**
 * The billable resources a process received from X, written to `x_billable_reads` (one row per
 * UTC day, resource kind and resource id) and counted in `x_billable_total{resource}`.
 *
 * `record()` is synchronous and never fails: the reads are queued, and written every `flushMs`
 * (or as soon as `batchSize` are queued) in one `INSERT … SELECT FROM unnest(…) ON CONFLICT DO
 * NOTHING RETURNING` per batch, so the hot path (a poll, a streamed post) pays no database round
 * trip. The primary key keeps the day's first read: every replica and every restart writes into
 * the same rows, and the counter moves only for the rows a batch inserted, so summed over the
 * fleet it counts each resource once a day, as X bills it. A process-local set of the day's keys
 * already written skips the resources read again (the poll overlap, the periodic users lookup)
 * before they reach the database; it is cleared at midnight UTC and when it grows past `seenMax`
 * (the database still deduplicates then).
 *
 * PostgreSQL failing: the queue is kept and retried at the next flush, up to `maxPending` reads;
 * beyond that the oldest are dropped (logged once per outage): the estimate undercounts then.
 * Meanwhile only the timer retries, once every `flushMs`.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import { sqlPool, type Db, type SqlPool } from '@sts/db';
import { utcDay, X_BILLABLE_RESOURCES, type XBillableRead, type XBillableResource } from './billable';

export interface XBilling {
  /** queues what X returned; never waits, never throws */
  record(reads: readonly XBillableRead[]): void;
  /** writes everything queued now */
  flush(): Promise<void>;
  /** the last flush; no timer after it */
  close(): Promise<void>;
}

export const noXBilling: XBilling = {
  record: () => undefined,
  flush: () => Promise.resolve(),
  close: () => Promise.resolve(),
};

export interface XBillingOptions {
  db: Db;
  /** registers x_billable_total (and x_billable_price_usd when `prices` is given) */
  registry?: Registry;
  logger?: Pick<Logger, 'warn'>;
  /** exported as x_billable_price_usd{resource}, for the dashboards' cost panels */
  prices?: Readonly<Record<XBillableResource, number>>;
  /** default 1000 */
  flushMs?: number;
  /** rows per INSERT; default 1000 */
  batchSize?: number;
  /** reads kept while PostgreSQL fails; default 100 000 */
  maxPending?: number;
  /** the day's keys remembered in this process; default 200 000 */
  seenMax?: number;
  now?: () => Date;
}

interface Pending {
  day: string;
  read: XBillableRead;
  at: Date;
}

const INSERT = `
  INSERT INTO x_billable_reads (day, resource, resource_id, account, read_at)
  SELECT * FROM unnest($1::date[], $2::text[], $3::text[], $4::text[], $5::timestamptz[])
  ON CONFLICT DO NOTHING
  RETURNING resource`;

class XBillingRecorder implements XBilling {
  private readonly pool: SqlPool;
  private readonly counter: Counter<'resource'> | null;
  private readonly pending = new Map<string, Pending>();
  private seen = new Set<string>();
  private seenDay = '';
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private failing = false;
  /** reads were dropped since the last successful write (logged once) */
  private dropping = false;

  constructor(private readonly o: XBillingOptions) {
    this.pool = sqlPool(o.db);
    this.counter = o.registry
      ? new Counter({
          name: 'x_billable_total',
          help: 'resources X bills (post_read, user_read, activity_event), each counted once per UTC day across the fleet',
          labelNames: ['resource'],
          registers: [o.registry],
        })
      : null;
    // every kind shows from the start (0), so a rate over it is defined before the first read
    for (const resource of X_BILLABLE_RESOURCES) this.counter?.inc({ resource }, 0);
    if (o.registry && o.prices) {
      const price = new Gauge({
        name: 'x_billable_price_usd',
        help: 'the configured X price of one billable resource in USD (X_PRICE_*)',
        labelNames: ['resource'],
        registers: [o.registry],
      });
      for (const resource of X_BILLABLE_RESOURCES) price.set({ resource }, o.prices[resource]);
    }
  }

  private now(): Date {
    return this.o.now?.() ?? new Date();
  }

  record(reads: readonly XBillableRead[]): void {
    if (reads.length === 0) return;
    const at = this.now();
    const day = utcDay(at);
    if (day !== this.seenDay) {
      this.seen = new Set();
      this.seenDay = day;
    }
    for (const read of reads) {
      const key = `${day}\t${read.resource}\t${read.id}`;
      if (this.seen.has(key) || this.pending.has(key)) continue;
      this.pending.set(key, { day, read, at });
    }
    this.bound();
    // while PostgreSQL fails, only the timer retries (one attempt per flushMs, not one per answer)
    if (!this.failing && this.pending.size >= (this.o.batchSize ?? 1000)) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), this.o.flushMs ?? 1000).unref();
  }

  /** the oldest queued reads past maxPending are dropped (PostgreSQL failing for long) */
  private bound(): void {
    const over = this.pending.size - (this.o.maxPending ?? 100_000);
    if (over <= 0) return;
    let left = over;
    for (const k of this.pending.keys()) {
      if (left-- === 0) break;
      this.pending.delete(k);
    }
    if (!this.dropping)
      this.o.logger?.warn('X billable reads dropped: PostgreSQL did not take them in time', { dropped: over });
    this.dropping = true;
  }

  flush(): Promise<void> {
    this.running ??= this.drain().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  async close(): Promise<void> {
    await this.running;
    await this.flush();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private async drain(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const size = this.o.batchSize ?? 1000;
    while (this.pending.size > 0) {
      const batch: [string, Pending][] = [];
      for (const entry of this.pending) {
        if (batch.length === size) break;
        batch.push(entry);
      }
      try {
        await this.write(batch.map(([, p]) => p));
      } catch (err) {
        if (!this.failing) this.o.logger?.warn('X billable reads not written: retried', { err: errorMessage(err) });
        this.failing = true;
        this.timer ??= setTimeout(() => void this.flush(), this.o.flushMs ?? 1000).unref();
        return;
      }
      this.failing = false;
      this.dropping = false;
      for (const [key, p] of batch) {
        this.pending.delete(key);
        if (p.day === this.seenDay) this.seen.add(key);
      }
      if (this.seen.size > (this.o.seenMax ?? 200_000)) this.seen = new Set();
    }
  }

  private async write(rows: Pending[]): Promise<void> {
    const { rows: inserted } = await this.pool.query<{ resource: XBillableResource }>(INSERT, [
      rows.map((r) => r.day),
      rows.map((r) => r.read.resource),
      rows.map((r) => r.read.id),
      rows.map((r) => r.read.account),
      rows.map((r) => r.at),
    ]);
    const counts = new Map<XBillableResource, number>();
    for (const r of inserted) counts.set(r.resource, (counts.get(r.resource) ?? 0) + 1);
    for (const [resource, n] of counts) this.counter?.inc({ resource }, n);
  }
}

export function createXBilling(options: XBillingOptions): XBilling {
  return new XBillingRecorder(options);
}
