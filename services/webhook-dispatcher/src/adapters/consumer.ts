/**
 * What the dispatcher needs from the messaging client (@sts/messaging's AmqpClient satisfies it):
 * a durable queue bound to routing keys, a prefetch, and a handler whose result is the ack.
 */
export type ConsumeOutcome = 'ack' | 'dead-letter' | 'requeue';

export interface Envelope {
  routingKey: string;
  messageId: string;
  payload: unknown;
  headers: Record<string, unknown>;
  redelivered: boolean;
  publishedAt?: unknown;
}

export interface DispatcherMessaging {
  consume(options: {
    queue: string;
    bindings: string[];
    prefetch: number;
    handler: (envelope: Envelope) => Promise<ConsumeOutcome>;
  }): Promise<unknown>;
}
