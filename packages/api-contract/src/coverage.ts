/**
 * The coverage record of `GET /api/v1/monitors/:id/coverage` (docs/api.md "Coverage"): what the
 * monitor's source was seen up to, the gaps of the last 30 days, and its speed.
 */
import { z } from 'zod';

const timestamp = z.iso.datetime({ precision: 3 });
const ms = z.int().min(0).nullable();

export const CoverageGapRecord = z.object({
  from: timestamp.meta({ description: 'start of the window the source was not read in' }),
  to: timestamp.nullable().meta({ description: 'its end; null while the gap is still open' }),
  reason: z.enum(['stream_down', 'budget_refused', 'source_error']),
  filled_at: timestamp.nullable().meta({
    description: 'when a later read (a poll from the cursor or a backfill search) read the window; null: not yet',
  }),
});

const LatencyStatsRecord = z.object({
  count: z.int().min(0).meta({ description: 'samples in the window' }),
  p50_ms: ms,
  p95_ms: ms,
});

const LatencyWindowRecord = z.object({
  post_to_detected: LatencyStatsRecord.meta({
    description: "hits detected in the window: the post's time → detected_at",
  }),
  detected_to_delivered: LatencyStatsRecord.meta({
    description: 'hits first delivered in the window: detected_at → the delivered attempt was answered',
  }),
});

const AccountIntakeRecord = z
  .object({
    path: z.enum(['pushed', 'polled']).meta({
      description:
        "pushed: the X Activity API pushes the watched account's events this monitor uses, within seconds; polled: the account lookup reads its profile at the plan's interval and posts come from the post intake",
    }),
    event_types: z.array(z.string()).meta({
      description:
        "the X Activity API event types pushed for the account that this monitor's events use (profile.update.*, post.delete, post.create), sorted; empty when polled",
    }),
    confirmed_at: timestamp.nullable().meta({
      description: 'when the poller last confirmed the subscriptions with X; null when polled',
    }),
  })
  .nullable()
  .meta({
    description:
      "how the watched account's profile changes, deleted posts and (X_INTAKE_ACTIVITY=all) posts reach the monitor; null for a query monitor",
  });

export const CoverageRecord = z.object({
  monitor_id: z.string(),
  covered_until: timestamp.nullable().meta({
    description: 'the time up to which the monitor has seen everything its source has; null: the target was never read',
  }),
  gaps: z.array(CoverageGapRecord).meta({
    description:
      'gaps open at some time in the last 30 days (since the monitor was created), newest first, at most 1,000',
  }),
  latency: z.object({ last_24h: LatencyWindowRecord, last_7d: LatencyWindowRecord }),
  intake: AccountIntakeRecord,
});

export type CoverageRecord = z.output<typeof CoverageRecord>;

export const COVERAGE_COMPONENTS = { Coverage: CoverageRecord, CoverageGap: CoverageGapRecord } as const;
