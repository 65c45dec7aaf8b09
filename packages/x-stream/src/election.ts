/**
 * Which replica holds the X stream connection: the one named in the `x_stream_lease` row while
 * it has not expired. The holder renews it at every check (each sync, ~2 s) for `ttlMs`; another
 * replica takes it only once it has expired, and the fence grows by one with every new holder.
 *
 * Why a lease and not a session advisory lock: a holder cut off from PostgreSQL without a closed
 * socket (a network partition, a hung host) keeps a session lock until TCP keepalive notices,
 * hours by default, and nobody else takes the stream. A lease expires on PostgreSQL's clock
 * whatever the sockets do, needs no session (works through a transaction-mode PgBouncer), and
 * the holder side is bounded by its own clock: `holds()` turns false `ttlMs − margin` after the
 * start of the last renewal that succeeded (measured before the query was sent, so it never
 * outlives the row), and the stream mode drops its connection then, before anyone else may take
 * the lease. A failed or slow renewal (`timeoutMs`) counts as not renewed. Failover is at most
 * `ttlMs` plus one check interval after the holder's last renewal.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from '@sts/common';
import type { Db } from '@sts/db';

export interface StreamElection {
  /** renews or takes the lease; true when this replica holds the stream now */
  check(): Promise<boolean>;
  /** true while the last renewal is younger than the lease (minus a margin), without I/O */
  holds(): boolean;
  /** the fence of this replica's current holding (grows with every new holder), or null */
  fence(): bigint | null;
  /** gives the lease up at once (the next replica's check takes it) */
  close(): Promise<void>;
}

export interface StreamElectionOptions {
  db: Db;
  logger: Logger;
  /** the lease's length; default 10 s */
  ttlMs?: number;
  /** a renewal slower than this counts as failed; default a third of the lease */
  timeoutMs?: number;
  /** this replica's name in the row; default host:pid:random */
  holderId?: string;
}

const NAME = 'x';

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the lease query took more than ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

export function createStreamElection(options: StreamElectionOptions): StreamElection {
  const ttlMs = options.ttlMs ?? 10_000;
  const timeoutMs = options.timeoutMs ?? Math.floor(ttlMs / 3);
  // the holder stops this much before the row expires (clock drift, the connection's abort)
  const marginMs = Math.min(1000, Math.floor(ttlMs / 5));
  const me = options.holderId ?? `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  let heldUntil = 0;
  let fence: bigint | null = null;
  let closed = false;
  let pending: Promise<boolean> | undefined;

  async function renew(): Promise<boolean> {
    if (closed) return false;
    const started = Date.now();
    try {
      const rows = await withTimeout(
        options.db.$queryRaw<{ fence: bigint }[]>`
          INSERT INTO x_stream_lease (name, holder, fence, expires_at)
          VALUES (${NAME}, ${me}, 1, now() + ${ttlMs} * interval '1 millisecond')
          ON CONFLICT (name) DO UPDATE SET
            holder = EXCLUDED.holder,
            fence = CASE WHEN x_stream_lease.holder = EXCLUDED.holder AND x_stream_lease.expires_at >= now()
                         THEN x_stream_lease.fence ELSE x_stream_lease.fence + 1 END,
            expires_at = EXCLUDED.expires_at
          WHERE x_stream_lease.holder = EXCLUDED.holder OR x_stream_lease.expires_at < now()
          RETURNING fence`,
        timeoutMs,
      );
      if (closed) return false;
      if (rows.length === 0) {
        heldUntil = 0;
        fence = null;
        return false;
      }
      heldUntil = started + ttlMs - marginMs;
      fence = BigInt(rows[0]!.fence);
      return true;
    } catch (err) {
      options.logger.warn('stream election check failed', { err: err instanceof Error ? err.message : String(err) });
      // not renewed: still ours until the last renewal runs out (holds()), never longer
      return Date.now() < heldUntil;
    }
  }

  return {
    check() {
      pending ??= renew().finally(() => (pending = undefined));
      return pending;
    },
    holds: () => !closed && Date.now() < heldUntil,
    fence: () => (Date.now() < heldUntil ? fence : null),
    async close() {
      closed = true;
      await pending?.catch(() => undefined);
      const was = heldUntil > 0;
      heldUntil = 0;
      fence = null;
      if (!was) return;
      await withTimeout(
        options.db.$executeRaw`
          UPDATE x_stream_lease SET expires_at = now() - interval '1 millisecond' WHERE name = ${NAME} AND holder = ${me}`,
        timeoutMs,
      ).catch(() => undefined);
    },
  };
}
