/**
 * A monitor's events other than hits (`monitor.profile_changed`, `monitor.target_unavailable`,
 * `monitor.post_deleted`): one monitor_events row and one outbox row per event, numbered in the
 * same statement (./sequences.ts; a monitor's events in the list's order), and the relay's
 * wake-up. Every writer of these events goes through here, so a monitor's sequence has no gap.
 * A caller writes all its events in one call, so its transaction takes the monitors' counter rows
 * once, in order.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '@sts/db';
import type {
  MonitorPostDeletedEvent,
  MonitorProfileChangedEvent,
  MonitorTargetUnavailableEvent,
} from '@sts/messaging';
import { OUTBOX_CHANNEL } from '../domain/pipeline';
import { sequenceCtes } from './sequences';

type Tx = Parameters<Parameters<Db['$transaction']>[0]>[0];

type MonitorEventPayload = MonitorProfileChangedEvent | MonitorTargetUnavailableEvent | MonitorPostDeletedEvent;

/** one event for one monitor, before its number */
export interface MonitorEventRow<P extends MonitorEventPayload = MonitorEventPayload> {
  monitorId: string;
  accountId: string;
  payload: P;
}

export async function writeMonitorEvents(tx: Tx, events: readonly MonitorEventRow[]): Promise<void> {
  if (events.length === 0) return;
  await tx.$executeRaw`
    WITH e AS (
      SELECT * FROM unnest(
        ${events.map(() => randomUUID())}::uuid[], ${events.map((e) => e.monitorId)}::uuid[],
        ${events.map((e) => e.accountId)}::text[], ${events.map((e) => e.payload.event)}::text[],
        ${events.map((e) => JSON.stringify(e.payload))}::jsonb[]
      ) WITH ORDINALITY AS e(id, monitor_id, account_id, kind, payload, ord)
    ),
    ${sequenceCtes('e')},
    stored AS (
      INSERT INTO monitor_events (id, monitor_id, kind, payload, sequence)
      SELECT id, monitor_id, kind, payload || jsonb_build_object('sequence', sequence), sequence FROM numbered
    ),
    sent AS (
      INSERT INTO outbox (routing_key, message_id, payload, headers)
      SELECT kind, gen_random_uuid()::text, payload || jsonb_build_object('sequence', sequence),
             jsonb_build_object('accountId', account_id, 'eventId', id::text)
      FROM numbered ORDER BY ord
    )
    SELECT pg_notify(${OUTBOX_CHANNEL}, '')`;
}
