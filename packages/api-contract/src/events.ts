/**
 * The record of `GET /api/v1/monitors/:id/events` (docs/api.md "Events by sequence"): a monitor's
 * events as its webhook delivers them (docs/webhooks.md, camelCase), oldest first by `sequence`.
 * The fields beyond the common ones are each event's own (docs/webhooks.md "Events").
 */
import { z } from 'zod';

/** the largest `after` accepted: any sequence a monitor can reach, and exact in JSON numbers */
export const SEQUENCE_MAX = Number.MAX_SAFE_INTEGER;

export const MonitorEventRecord = z
  .looseObject({
    event: z.enum(['monitor.hit', 'monitor.profile_changed', 'monitor.target_unavailable']),
    monitor: z.looseObject({ id: z.string() }),
    detectedAt: z.iso.datetime({ precision: 3 }),
    sequence: z.int().min(1).max(SEQUENCE_MAX).meta({
      description: "the event's number among the monitor's events: 1, 2, 3 … without gaps (the X-Service-Sequence header)",
    }),
  })
  .meta({ description: "the event's payload exactly as its webhook delivers it (docs/webhooks.md)" });

export const EVENT_COMPONENTS = { MonitorEvent: MonitorEventRecord } as const;
