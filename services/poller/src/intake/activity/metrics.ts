/**
 * The X Activity API intake's metrics, per replica (only the holder's move):
 * `poller_x_activity_connected` (1 while this replica's activity stream is up),
 * `poller_x_activity_subscriptions` (this service's subscriptions X holds),
 * `poller_x_activity_accounts{path}` (watched accounts pushed by XAA or left polled),
 * `poller_x_activity_refused_total{event_type, refusal}` (subscriptions X refused: limit,
 * forbidden, invalid), `poller_x_activity_events_total{event_type}` and
 * `poller_x_activity_gaps_total{outcome}` (a reconnect's gap: replayed by X, or owed to the lookup).
 */
import { Counter, Gauge, type Registry } from 'prom-client';

export interface ActivityMetrics {
  connected(up: boolean): void;
  state(subscriptions: number, pushed: number, polled: number): void;
  refused(eventType: string, refusal: string): void;
  event(eventType: string): void;
  gap(outcome: 'replayed' | 'owed'): void;
}

export function createActivityMetrics(registry: Registry): ActivityMetrics {
  const registers = [registry];
  const connected = new Gauge({
    name: 'poller_x_activity_connected',
    help: "1 while this replica's X activity stream is up",
    registers,
  });
  const subscriptions = new Gauge({
    name: 'poller_x_activity_subscriptions',
    help: "this service's X Activity API subscriptions X holds",
    registers,
  });
  const accounts = new Gauge({
    name: 'poller_x_activity_accounts',
    help: 'watched accounts by path: pushed by the X Activity API, or polled',
    labelNames: ['path'],
    registers,
  });
  const refused = new Counter({
    name: 'poller_x_activity_refused_total',
    help: 'X Activity API subscriptions X refused, by event type and refusal',
    labelNames: ['event_type', 'refusal'],
    registers,
  });
  const events = new Counter({
    name: 'poller_x_activity_events_total',
    help: 'X Activity API events received, by event type',
    labelNames: ['event_type'],
    registers,
  });
  const gaps = new Counter({
    name: 'poller_x_activity_gaps_total',
    help: 'X activity stream gaps at a (re)connect: replayed by X, or owed to the account lookup',
    labelNames: ['outcome'],
    registers,
  });
  return {
    connected: (up) => connected.set(up ? 1 : 0),
    state(subs, pushed, polled) {
      subscriptions.set(subs);
      accounts.set({ path: 'pushed' }, pushed);
      accounts.set({ path: 'polled' }, polled);
    },
    refused: (eventType, refusal) => refused.inc({ event_type: eventType, refusal }),
    event: (eventType) => events.inc({ event_type: eventType }),
    gap: (outcome) => gaps.inc({ outcome }),
  };
}
