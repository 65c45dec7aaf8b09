/**
 * The AMQP client's publisher: validates against the contract, publishes persistently on the
 * connection's confirm channel and resolves only on the broker's confirm. Waits (bounded by the
 * publish timeout) for a reconnect when disconnected; keeps track of publishes still waiting for
 * their confirm so stop() can let them finish.
 */
import type { Message, Options } from 'amqplib';
import type { Logger } from '@sts/common';
import { endSpan, SpanKind, startSpan, traceHeaders, tracingEnabled } from '@sts/telemetry';
import {
  ContractError,
  EXCHANGE,
  isRoutingKey,
  parseHeaders,
  parsePayload,
  toAmqpHeaders,
  wireRoutingKey,
  type HeadersOf,
  type PayloadOf,
  type RoutingKey,
} from './contracts';
import type { AmqpConnection, ConnectionContext } from './connection';
import { errorMessage } from '@sts/core';

export interface PublishOptions<K extends RoutingKey> {
  messageId: string;
  headers: HeadersOf<K>;
  /**
   * Reject with PublishError('UNROUTABLE') when no queue is bound for the routing key (the
   * broker returns the message). Default false: an unroutable message is logged and the publish
   * resolves on the confirm.
   */
  requireRoute?: boolean;
  /**
   * Publish on partition `n` of the routing key: the wire routing key is `<routingKey>.<n>`,
   * received by the consumers that consume that partition (ConsumeOptions.partition).
   */
  partition?: number;
}

export type PublishErrorCode = 'NACKED' | 'CONNECTION_LOST' | 'TIMEOUT' | 'UNROUTABLE' | 'STOPPED';

/** Why a publish was not confirmed. The message may or may not have reached the broker: republish (at least once). */
export class PublishError extends Error {
  override name = 'PublishError';
  constructor(
    readonly code: PublishErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export class Publisher {
  private readonly pending = new Set<Promise<void>>();
  private stopped = false;

  constructor(
    private readonly connection: AmqpConnection,
    private readonly settings: { logger: Logger; name: string; publishTimeoutMs: number },
  ) {}

  /** See AmqpClient.publish. */
  async publish<K extends RoutingKey>(routingKey: K, payload: PayloadOf<K>, opts: PublishOptions<K>): Promise<void> {
    if (this.stopped) throw new PublishError('STOPPED', 'AmqpClient is stopped');
    if (!isRoutingKey(routingKey)) throw new ContractError(`unknown routing key ${JSON.stringify(routingKey)}`);
    const parsed = parsePayload(routingKey, payload);
    if (!opts || typeof opts.messageId !== 'string' || opts.messageId.length === 0)
      throw new ContractError('messageId must be a non-empty string');
    const headers = toAmqpHeaders(parseHeaders(routingKey, opts.headers));
    const body = Buffer.from(JSON.stringify(parsed), 'utf8');
    const wireKey = wireRoutingKey(routingKey, opts.partition);
    const properties: Options.Publish = {
      messageId: opts.messageId,
      type: routingKey,
      contentType: 'application/json',
      persistent: true,
      deliveryMode: 2,
      timestamp: Math.floor(Date.now() / 1000),
      appId: this.settings.name,
      headers,
      mandatory: true,
    };
    const attempt = tracingEnabled()
      ? this.tracedPublish(wireKey, body, properties, opts.requireRoute === true)
      : this.publishConfirmed(wireKey, body, properties, opts.requireRoute === true);
    const settled = attempt.then(
      () => undefined,
      () => undefined,
    );
    this.pending.add(settled);
    void settled.then(() => this.pending.delete(settled));
    return attempt;
  }

  /** OpenTelemetry: a PRODUCER span around the publish; its W3C traceparent goes in the AMQP headers */
  private async tracedPublish(
    routingKey: string,
    body: Buffer,
    properties: Options.Publish,
    requireRoute: boolean,
  ): Promise<void> {
    const span = startSpan(`publish ${routingKey}`, SpanKind.PRODUCER, {
      'messaging.system': 'rabbitmq',
      'messaging.destination.name': EXCHANGE,
      'messaging.message.id': String(properties.messageId),
    });
    const headers = { ...(properties.headers as Record<string, unknown>), ...traceHeaders(span) };
    try {
      await this.publishConfirmed(routingKey, body, { ...properties, headers }, requireRoute);
      endSpan(span);
    } catch (err) {
      endSpan(span, err instanceof Error ? err : String(err));
      throw err;
    }
  }

  /** The broker returned a message as unroutable: remember it until its confirm arrives. */
  onReturn(ctx: ConnectionContext, msg: Message): void {
    const messageId = typeof msg.properties.messageId === 'string' ? msg.properties.messageId : undefined;
    if (messageId !== undefined) ctx.returned.add(messageId);
    this.settings.logger.warn('amqp message unroutable: no queue is bound for its routing key', {
      messageId,
      routingKey: msg.fields.routingKey,
      exchange: msg.fields.exchange,
    });
  }

  /** Waits for the publishes still waiting for their confirm; afterwards every publish is refused (STOPPED). */
  async drain(): Promise<void> {
    await Promise.all([...this.pending]);
    this.stopped = true;
  }

  private async publishConfirmed(
    routingKey: string,
    body: Buffer,
    properties: Options.Publish,
    requireRoute: boolean,
  ): Promise<void> {
    const messageId = properties.messageId as string;
    const { publishTimeoutMs, logger } = this.settings;
    const deadline = Date.now() + publishTimeoutMs;
    const ctx = await this.waitForPublishContext(deadline, messageId);
    const ch = ctx.publishChannel;
    await new Promise<void>((resolve, reject) => {
      let done = false;
      const finish = (err?: PublishError): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (err) {
          logger.warn('amqp publish not confirmed', { messageId, routingKey, code: err.code });
          reject(err);
        } else resolve();
      };
      const timer = setTimeout(
        () => finish(new PublishError('TIMEOUT', `no confirm for message ${messageId} within ${publishTimeoutMs} ms`)),
        Math.max(1, deadline - Date.now()),
      );
      try {
        ch.publish(EXCHANGE, routingKey, body, properties, (err: unknown) => {
          const returned = ctx.returned.delete(messageId);
          if (err) {
            const nacked = err instanceof Error && err.message === 'message nacked';
            finish(
              nacked
                ? new PublishError('NACKED', `broker nacked message ${messageId}`)
                : new PublishError('CONNECTION_LOST', `connection lost before the confirm of ${messageId}`),
            );
          } else if (returned && requireRoute) {
            finish(new PublishError('UNROUTABLE', `no queue is bound for ${routingKey} (message ${messageId})`));
          } else finish();
        });
      } catch (err) {
        // the channel closed under us (IllegalOperationError)
        finish(new PublishError('CONNECTION_LOST', `cannot publish ${messageId}: ${errorMessage(err)}`));
      }
    });
  }

  private async waitForPublishContext(deadline: number, messageId: string): Promise<ConnectionContext> {
    for (;;) {
      if (this.stopped) throw new PublishError('STOPPED', 'AmqpClient is stopped');
      const ctx = this.connection.current;
      if (ctx && !this.connection.isClosed(ctx.publishChannel)) return ctx;
      if (this.connection.stopping) throw new PublishError('STOPPED', 'AmqpClient is stopping and not connected');
      const remaining = deadline - Date.now();
      if (remaining <= 0)
        throw new PublishError('TIMEOUT', `not connected to RabbitMQ; gave up publishing ${messageId}`);
      await this.connection.waitForConnection(remaining);
    }
  }
}
