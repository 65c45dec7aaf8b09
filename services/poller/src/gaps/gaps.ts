/**
 * The poller's part of the coverage record (`coverage_gaps`, migration 20261126060000_coverage;
 * docs/api.md "Coverage"): a poll that fails, or that the X budget refuses, opens a gap for its
 * target from the end of its last successful read (or, never read, its oldest active monitor's
 * creation). The database closes and fills the gap when a read of the target next succeeds
 * (a trigger on poll_cursors.last_success_at), and writes the stream's gaps from its owed windows
 * (triggers on x_stream_owed), so the stream and the record step need no call of their own.
 *
 * `noteMiss` is a step of every poll's settling (poll/settle.ts), so every way in (tick, push,
 * search, the stream's fallback) records.
 */
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import type { Db } from '@sts/db';
import type { PollResult } from '../domain/pipeline';

type MissReason = 'budget_refused' | 'source_error';

export interface CoverageRepository {
  /** opens a gap for the target unless one is open (at most one open gap per target) */
  missed(targetKey: string, reason: MissReason): Promise<void>;
}

export function createCoverageRepository(db: Db): CoverageRepository {
  return {
    async missed(targetKey, reason) {
      // a target is polled under its lease, so two replicas do not open a gap for it at once
      await db.$executeRaw`
        INSERT INTO coverage_gaps (target_key, starts_at, reason)
        SELECT ${targetKey}, coalesce(
                 (SELECT last_success_at FROM poll_cursors WHERE target_key = ${targetKey}),
                 (SELECT min(created_at) FROM monitors WHERE target_key = ${targetKey} AND is_active),
                 now()),
               ${reason}
        WHERE NOT EXISTS (SELECT 1 FROM coverage_gaps WHERE target_key = ${targetKey} AND ends_at IS NULL)`;
    },
  };
}

/** the gap a poll result opens, if any */
function missOf(r: PollResult): MissReason | null {
  if (r.outcome !== 'error') return null;
  return r.busy ? 'budget_refused' : 'source_error';
}

/** opens the gap a poll result calls for (a failed or refused poll), if any */
export async function noteMiss(
  coverage: CoverageRepository,
  logger: Logger,
  key: string,
  r: PollResult,
): Promise<void> {
  const reason = missOf(r);
  if (!reason) return;
  // the record is evidence, not a step of the poll: a failure to write it is logged, the poll's outcome stands
  await coverage
    .missed(key, reason)
    .catch((err: unknown) => logger.warn('could not record a coverage gap', { target: key, err: errorMessage(err) }));
}
