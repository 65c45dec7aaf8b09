/** Server-sent events framing (text/event-stream): pure functions, no I/O. */
import type { MonitorHitEvent } from '@sts/messaging';

/** one `monitor.hit` event: `id` is the resumable cursor, `data` the webhook payload JSON on one line */
export function hitEvent(cursor: string, payload: MonitorHitEvent): string {
  return `event: monitor.hit\nid: ${cursor}\ndata: ${JSON.stringify(payload)}\n\n`;
}

/** why the service ended a stream: the `reason` of its final `stream.closed` event (docs/api.md) */
export type ClosingReason =
  | 'quota_exceeded'
  | 'shutdown'
  | 'slow_reader'
  /** the stream's API key was revoked */
  | 'key_revoked'
  /** the account's plan changed since the stream opened (it was metered and admitted under the old one) */
  | 'plan_changed'
  /** the stream lived STREAM_MAX_LIFETIME_S: the client resumes with Last-Event-ID */
  | 'max_lifetime';

/**
 * The last event of a stream the service ends. `cursor`, when given, is the stream's position (the
 * last event sent, or where it opened): as the event's `id:` it is the Last-Event-ID to resume
 * from, even when no hit was sent on this connection.
 */
export function closingEvent(reason: ClosingReason, message: string, cursor?: string): string {
  const id = cursor === undefined ? '' : `id: ${cursor}\n`;
  return `event: stream.closed\n${id}data: ${JSON.stringify({ reason, message })}\n\n`;
}

export const KEEP_ALIVE = ': keep-alive\n\n';
/** first bytes: the reconnect delay asked of EventSource clients, then a comment so proxies flush */
export const PREAMBLE = 'retry: 2000\n: connected\n\n';
