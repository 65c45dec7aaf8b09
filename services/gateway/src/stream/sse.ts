/** Server-sent events framing (text/event-stream): pure functions, no I/O. */
import type { MonitorHitEvent } from '@sts/messaging';

/** one `monitor.hit` event: `id` is the resumable cursor, `data` the webhook payload JSON on one line */
export function hitEvent(cursor: string, payload: MonitorHitEvent): string {
  return `event: monitor.hit\nid: ${cursor}\ndata: ${JSON.stringify(payload)}\n\n`;
}

/** the last event of a stream the service ends (quota spent, shutdown); the client should not reconnect at once */
export function closingEvent(reason: 'quota_exceeded' | 'shutdown' | 'slow_reader', message: string): string {
  return `event: stream.closed\ndata: ${JSON.stringify({ reason, message })}\n\n`;
}

export const KEEP_ALIVE = ': keep-alive\n\n';
/** first bytes: the reconnect delay asked of EventSource clients, then a comment so proxies flush */
export const PREAMBLE = 'retry: 2000\n: connected\n\n';
