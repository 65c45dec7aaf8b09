/**
 * The flap rule (domain/flap.ts) on PostgreSQL: the suspects of the source are rows of
 * `target_suspects`, judged inside a target's look (its transaction, under its per-target lock),
 * so every replica counts the same suspects. `judge` is the look's hook: 'mark' lets the look
 * write the change as before, 'hold' leaves the target as it was (status, monitors, events, mail).
 * A hold because the source looks failing counts `poller_target_flap_holds_total{source}` (the
 * alert `PollerSourceReportsTargetsUnavailable`). `due` claims the suspects whose next look is due
 * (each claimed for a window, so one replica asks for it) and forgets suspects no longer watched.
 */
import type { Db } from '@sts/db';
import type { TargetStatus } from '@sts/messaging';
import { Counter, type Registry } from 'prom-client';
import { judgeTurn, turnsUnavailable, type FlapPolicy } from '../domain/flap';
import { isUnavailable } from '../domain/profiles';

type Tx = Parameters<Parameters<Db['$transaction']>[0]>[0];

export interface TargetFlapGate {
  /** a look at `targetKey` found `status` where the last one was `previous` (inside the look's transaction) */
  judge(tx: Tx, targetKey: string, previous: TargetStatus, status: TargetStatus, at: Date): Promise<'mark' | 'hold'>;
  /** the suspects whose next look is due, at most `limit` (claimed for a window) */
  due(limit: number): Promise<string[]>;
}

interface Counts {
  open: bigint;
  watched: bigint;
}

export function createTargetFlapGate(o: {
  db: Db;
  policy: FlapPolicy;
  /** the SOCIAL_SOURCE, the metric's label */
  source: string;
  registry?: Registry;
}): TargetFlapGate {
  const holds = new Counter({
    name: 'poller_target_flap_holds_total',
    help: 'looks that found a watched account unavailable and held it unmarked because too many of the source accounts turned unavailable at once (the source failing)',
    labelNames: ['source'],
    registers: o.registry ? [o.registry] : [],
  });
  const windowMs = o.policy.windowMs;
  return {
    async judge(tx, targetKey, previous, status, at) {
      if (!isUnavailable(status)) {
        await tx.$executeRaw`DELETE FROM target_suspects WHERE target_key = ${targetKey}`;
        return 'mark';
      }
      if (!turnsUnavailable(previous, status)) return 'mark';
      const [seen] = await tx.$queryRaw<{ first_seen_at: Date }[]>`
        INSERT INTO target_suspects (target_key, status, first_seen_at, last_seen_at, recheck_at)
        VALUES (${targetKey}, ${status}, ${at}, ${at}, ${at})
        ON CONFLICT (target_key) DO UPDATE SET status = EXCLUDED.status, last_seen_at = EXCLUDED.last_seen_at
        RETURNING first_seen_at`;
      const [counts] = await tx.$queryRaw<Counts[]>`
        SELECT (SELECT count(*) FROM target_suspects s JOIN poll_targets p USING (target_key)
                WHERE p.active_monitors > 0) AS open,
               (SELECT count(*) FROM poll_targets WHERE active_monitors > 0) AS watched`;
      const verdict = judgeTurn(o.policy, {
        openSuspects: Number(counts!.open),
        watched: Number(counts!.watched),
        firstSeenAt: seen!.first_seen_at,
        now: at,
      });
      if (verdict.kind === 'mark') {
        await tx.$executeRaw`DELETE FROM target_suspects WHERE target_key = ${targetKey}`;
        return 'mark';
      }
      await tx.$executeRaw`UPDATE target_suspects SET recheck_at = ${verdict.recheckAt} WHERE target_key = ${targetKey}`;
      if (verdict.kind === 'source_failing') holds.inc({ source: o.source });
      return 'hold';
    },
    async due(limit) {
      await o.db.$executeRaw`
        DELETE FROM target_suspects s WHERE NOT EXISTS (
          SELECT 1 FROM poll_targets p WHERE p.target_key = s.target_key AND p.active_monitors > 0)`;
      const rows = await o.db.$queryRaw<{ target_key: string }[]>`
        UPDATE target_suspects SET recheck_at = now() + ${windowMs} * interval '1 millisecond'
        WHERE target_key IN (
          SELECT target_key FROM target_suspects WHERE recheck_at <= now()
          ORDER BY recheck_at LIMIT ${limit} FOR UPDATE SKIP LOCKED)
        RETURNING target_key`;
      return rows.map((r) => r.target_key);
    },
  };
}
