/**
 * From a received message to the delivery it asks for: which monitor (and does the message's
 * account own it), which payload, which delivery id. The payloads are the @sts/messaging contracts
 * (validated by the consumer before the handler runs), narrowed by routing key, never cast.
 */
import type { Logger } from '@sts/common';
import { isUuid } from '@sts/core';
import {
  contracts,
  monitorHitPayload,
  monitorRef,
  monitorTestPayload,
  type EnvelopeOf,
  type MonitorPostDeletedEvent,
  type MonitorProfileChangedEvent,
  type MonitorTargetUnavailableEvent,
} from '@sts/messaging';
import type { WebhookPayload } from './domain/payloads';
import { finalOutcome } from './domain/policy';
import type { ConsumeOutcome, DeliveryEvent, DispatcherRoutingKey } from './adapters/consumer';
import type { ClaimedDue } from './adapters/dueStore';
import type { MonitorContext, MonitorReader } from './adapters/monitorReader';

/** one delivery to make: its event, its id, the monitor it goes to and what it says */
export interface Job {
  event: DeliveryEvent;
  deliveryId: string;
  hitId: string | null;
  monitor: MonitorContext;
  payload: WebhookPayload;
  detectedAt?: string;
}

/** a message's job, or what becomes of a message that asks for none */
export type Prepared = { kind: 'job'; job: Job } | Settled;
/** the message is settled without a delivery */
type Settled = { kind: 'settled'; outcome: ConsumeOutcome };

const settled = (outcome: ConsumeOutcome): Settled => ({ kind: 'settled', outcome });

/** what the steps below read: the repository and the log */
interface Context {
  repo: MonitorReader;
  logger: Logger;
}

/** the monitor of a message, or why the message is dropped */
async function monitorFor(
  { repo, logger }: Context,
  env: EnvelopeOf<DispatcherRoutingKey>,
  monitorId: string,
): Promise<{ kind: 'found'; monitor: MonitorContext } | Settled> {
  if (!isUuid(monitorId)) {
    logger.warn('message names no valid monitor id; dead-lettered', {
      messageId: env.messageId,
      routingKey: env.routingKey,
    });
    return settled('dead-letter');
  }
  const monitor = await repo.getMonitor(monitorId);
  if (!monitor) {
    // deleted since the event was published: nothing to deliver, nowhere to log an attempt
    logger.info('monitor no longer exists; message dropped', { messageId: env.messageId, monitorId });
    return settled('ack');
  }
  // every publisher names the account; a message without one is refused like another account's
  if (env.headers.accountId !== monitor.accountId) {
    logger.warn('message account does not own the monitor (or names none); dead-lettered', {
      messageId: env.messageId,
      monitorId,
    });
    return settled('dead-letter');
  }
  return { kind: 'found', monitor };
}

async function hit(ctx: Context, env: EnvelopeOf<'monitor.hit'>): Promise<Prepared> {
  const { repo, logger } = ctx;
  const { payload, headers } = env;
  if (headers.hitId !== '' && !isUuid(headers.hitId)) {
    logger.warn('malformed monitor.hit message (hitId); dead-lettered', { messageId: env.messageId });
    return settled('dead-letter');
  }
  if (env.redelivered) {
    // The broker re-sent a message we may have handled already (we stopped before the ack).
    // Its attempt is logged: do not send again (delivered, or failed: a retry, when its webhook
    // has a schedule, was written in the same statement as the attempt). Not logged: it was never sent, or sent but not recorded; send it (at least once).
    const logged = finalOutcome(await repo.loggedAttempts(env.messageId));
    if (logged) {
      logger.info('hit already handled; redelivered message acknowledged', {
        deliveryId: env.messageId,
        outcome: logged,
      });
      return settled('ack');
    }
  }
  const found = await monitorFor(ctx, env, payload.monitor.id);
  if (found.kind === 'settled') return found;
  return {
    kind: 'job',
    job: {
      event: 'monitor.hit',
      deliveryId: env.messageId,
      hitId: headers.hitId === '' ? null : headers.hitId,
      monitor: found.monitor,
      payload,
      detectedAt: payload.detectedAt,
    },
  };
}

/** the kinds stored in monitor_events (a profile change, a target's status change, a deleted post) */
type NoticeKey = 'monitor.profile_changed' | 'monitor.target_unavailable' | 'monitor.post_deleted';
const NOTICE_KEYS: readonly string[] = [
  'monitor.profile_changed',
  'monitor.target_unavailable',
  'monitor.post_deleted',
] satisfies NoticeKey[];

/** a profile change or a target's status change: delivered like a hit, named by its monitor_events row */
async function notice(ctx: Context, env: EnvelopeOf<NoticeKey>): Promise<Prepared> {
  const { repo, logger } = ctx;
  if (!isUuid(env.headers.eventId)) {
    logger.warn(`malformed ${env.routingKey} message (eventId); dead-lettered`, { messageId: env.messageId });
    return settled('dead-letter');
  }
  if (env.redelivered) {
    const logged = finalOutcome(await repo.loggedAttempts(env.messageId));
    if (logged) return settled('ack');
  }
  const found = await monitorFor(ctx, env, env.payload.monitor.id);
  if (found.kind === 'settled') return found;
  const base = { deliveryId: env.messageId, hitId: env.headers.eventId, monitor: found.monitor };
  return { kind: 'job', job: { ...base, event: env.routingKey, payload: env.payload } };
}

/** a redelivered profile-change or status-change attempt: its stored event, as first sent */
async function redeliverNotice(
  { repo, logger }: Context,
  attempt: { id: string; deliveryId: string; hitId: string | null; event: string },
  m: MonitorContext,
): Promise<Prepared> {
  const row = attempt.hitId ? await repo.getMonitorEvent(attempt.hitId) : null;
  if (!row || row.kind !== attempt.event) {
    logger.warn('redeliver: the event of this attempt no longer exists; dropped', { attemptId: attempt.id });
    return settled('ack');
  }
  const base = { deliveryId: attempt.deliveryId, hitId: row.id, monitor: m };
  if (row.kind === 'monitor.profile_changed') {
    const payload: MonitorProfileChangedEvent = contracts['monitor.profile_changed'].payload.parse(row.payload);
    return {
      kind: 'job',
      job: { ...base, event: 'monitor.profile_changed', payload: { ...payload, monitor: monitorRef(m) } },
    };
  }
  if (row.kind === 'monitor.post_deleted') {
    const payload: MonitorPostDeletedEvent = contracts['monitor.post_deleted'].payload.parse(row.payload);
    return {
      kind: 'job',
      job: { ...base, event: 'monitor.post_deleted', payload: { ...payload, monitor: monitorRef(m) } },
    };
  }
  const payload: MonitorTargetUnavailableEvent = contracts['monitor.target_unavailable'].payload.parse(row.payload);
  return {
    kind: 'job',
    job: { ...base, event: 'monitor.target_unavailable', payload: { ...payload, monitor: monitorRef(m) } },
  };
}

async function test(ctx: Context, env: EnvelopeOf<'monitor.test'>): Promise<Prepared> {
  const found = await monitorFor(ctx, env, env.payload.monitor.id);
  if (found.kind === 'settled') return found;
  const m = found.monitor;
  const sent = env.payload.monitor;
  return {
    kind: 'job',
    job: {
      event: 'monitor.test',
      deliveryId: env.messageId,
      hitId: null,
      monitor: m,
      payload: monitorTestPayload(
        monitorRef({ id: m.id, targetUsername: sent.targetUsername, keywords: sent.keywords ?? m.keywords }),
      ),
    },
  };
}

async function redeliver(ctx: Context, env: EnvelopeOf<'webhook.redeliver'>): Promise<Prepared> {
  const { repo, logger } = ctx;
  const { attemptId } = env.payload;
  if (!isUuid(attemptId)) {
    // the contract requires a UUID; handle() may also be driven without the consumer
    logger.warn('malformed webhook.redeliver message; dead-lettered', { messageId: env.messageId });
    return settled('dead-letter');
  }
  const attempt = await repo.getAttempt(attemptId);
  if (!attempt) {
    logger.warn('redeliver: no such delivery attempt; dropped', { messageId: env.messageId, attemptId });
    return settled('ack');
  }
  const found = await monitorFor(ctx, env, attempt.monitorId);
  if (found.kind === 'settled') return found;
  const m = found.monitor;
  if (attempt.event === 'monitor.test') {
    const payload = monitorTestPayload(monitorRef(m));
    return {
      kind: 'job',
      job: { event: 'monitor.test', deliveryId: attempt.deliveryId, hitId: null, monitor: m, payload },
    };
  }
  if (NOTICE_KEYS.includes(attempt.event)) return redeliverNotice(ctx, attempt, m);
  return redeliverHit(ctx, attempt, m);
}

/** a redelivered monitor.hit attempt: its hit as it was detected, with its sequence, or dropped when the hit is gone */
async function redeliverHit(
  { repo, logger }: Context,
  attempt: { id: string; deliveryId: string; hitId: string | null },
  m: MonitorContext,
): Promise<Prepared> {
  const row = attempt.hitId ? await repo.getHit(attempt.hitId) : null;
  if (!row) {
    logger.warn('redeliver: the hit of this attempt no longer exists; dropped', { attemptId: attempt.id });
    return settled('ack');
  }
  const tweet = {
    id: row.tweetId,
    text: row.tweetText,
    authorUsername: row.tweetAuthorUsername,
    createdAt: row.tweetCreatedAt.toISOString(),
  };
  const sequence = row.sequence === null ? null : Number(row.sequence);
  const payload = monitorHitPayload(monitorRef(m), tweet, row.detectedAt.toISOString(), sequence);
  return {
    kind: 'job',
    job: { event: 'monitor.hit', deliveryId: attempt.deliveryId, hitId: row.id, monitor: m, payload },
  };
}

/** a due delivery's job: its payload as first sent, its monitor as it is now */
async function dueJob({ repo, logger }: Context, due: ClaimedDue): Promise<Prepared> {
  const monitor = await repo.getMonitor(due.monitorId);
  // a deleted monitor or webhook took its due rows with it
  if (!monitor) return settled('ack');
  const base = { deliveryId: due.deliveryId, hitId: due.hitId, monitor };
  switch (due.event) {
    case 'monitor.hit':
      return job({ ...base, event: due.event, payload: contracts[due.event].payload.parse(due.payload) });
    case 'monitor.profile_changed':
      return job({ ...base, event: due.event, payload: contracts[due.event].payload.parse(due.payload) });
    case 'monitor.target_unavailable':
      return job({ ...base, event: due.event, payload: contracts[due.event].payload.parse(due.payload) });
    case 'monitor.post_deleted':
      return job({ ...base, event: due.event, payload: contracts[due.event].payload.parse(due.payload) });
    default:
      logger.warn('due delivery of an event that is never scheduled; dropped', { deliveryId: due.deliveryId });
      return settled('dead-letter');
  }
}

const job = (j: Job): Prepared => ({ kind: 'job', job: j });

/** where jobs come from: a message (its first attempt) or a due delivery (a retry, a fifo turn) */
export function createJobSources(repo: MonitorReader, logger: Logger) {
  const ctx: Context = { repo, logger };
  return {
    /** the job of a message (validated by the consumer against its routing key's contract), or what to do with the message when there is none */
    ofMessage(env: EnvelopeOf<DispatcherRoutingKey>): Promise<Prepared> {
      switch (env.routingKey) {
        case 'monitor.hit':
          return hit(ctx, env);
        case 'monitor.test':
          return test(ctx, env);
        case 'monitor.profile_changed':
        case 'monitor.target_unavailable':
        case 'monitor.post_deleted':
          return notice(ctx, env);
        case 'webhook.redeliver':
          return redeliver(ctx, env);
      }
    },
    ofDue: (due: ClaimedDue) => dueJob(ctx, due),
  };
}
