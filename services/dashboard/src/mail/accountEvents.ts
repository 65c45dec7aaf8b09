/**
 * Account events → mail, inside the dashboard process:
 * - the consumer (queue `dashboard.account-mail`, bound to every `account.*` routing key) turns
 *   the event into its mail spec under the event's de-duplication key (accountEventKey: per
 *   month and threshold for quota, per monitor, state and day for endpoints, per trial end),
 *   unless the account opted out of that kind: a notice (quota, endpoint, watched account) waits
 *   for the account's digest (notices.ts), a trial mail goes to the outbox's account lane;
 * - the relay publishes what other services wrote to `account_events` (the gateway's quota
 *   thresholds, the trial check below), marking each row published after the broker's confirm;
 * - the trial check (every TRIAL_CHECK_INTERVAL_MS) writes `account.trial.ending` 3 days before
 *   a trial ends and, once it ended, pauses the monitors over the Free limit (oldest kept) and
 *   writes `account.trial.ended` with their ids.
 */
import type { Logger } from '@sts/common';
import type { Db } from '@sts/db';
import {
  ACCOUNT_ROUTING_KEYS,
  accountEventKey,
  contracts,
  type AccountRoutingKey,
  type AmqpClient,
  type Envelope,
  type PayloadOf,
} from '@sts/messaging';
import { isNotice } from './digest';
import type { NoticeStore } from './notices';
import type { MailLane, MailOutbox } from './outbox';
import { linkExpiry, renderMail, type MailSpec } from './templates';

const ACCOUNT_MAIL_QUEUE = 'dashboard.account-mail';
const TRIAL_ENDING_WINDOW_MS = 3 * 86_400_000;

/** what a monitor watches, as mails and banners name it: "@alice" or "the query launch OR release" */
function watchedName(m: { targetUsername: string | null; query: string | null }): string {
  return m.targetUsername !== null ? `@${m.targetUsername}` : `the query ${m.query ?? ''}`;
}

type Prefs = { email: string; notifyQuota: boolean; notifyWebhook: boolean; notifyTrial: boolean };

async function specOf(db: Db, env: Envelope<AccountRoutingKey>): Promise<MailSpec | null> {
  const p = env.payload as PayloadOf<AccountRoutingKey>;
  switch (env.routingKey) {
    case 'account.quota.threshold': {
      const q = p as PayloadOf<'account.quota.threshold'>;
      return { kind: 'quota', threshold: q.threshold, used: q.used, quota: q.quota, month: q.month };
    }
    case 'account.webhook.failing': {
      const w = p as PayloadOf<'account.webhook.failing'>;
      const m = await db.monitor.findFirst({
        where: { id: w.monitorId, accountId: w.accountId },
        select: { targetUsername: true, query: true },
      });
      if (!m) return null;
      return {
        kind: 'webhook',
        state: w.state,
        consecutiveFailures: w.consecutiveFailures,
        monitorId: w.monitorId,
        target: watchedName(m),
      };
    }
    case 'account.target.status': {
      const t = p as PayloadOf<'account.target.status'>;
      return {
        kind: 'target',
        status: t.status,
        username: t.username,
        newUsername: t.newUsername,
        monitors: t.monitorIds.length,
      };
    }
    case 'account.trial.ending':
      return { kind: 'trial_ending', endsAt: (p as PayloadOf<'account.trial.ending'>).trialEndsAt };
    case 'account.trial.ended': {
      const ids = (p as PayloadOf<'account.trial.ended'>).pausedMonitorIds;
      const rows = await db.monitor.findMany({
        where: { id: { in: ids } },
        select: { targetUsername: true, query: true },
      });
      return { kind: 'trial_ended', paused: rows.map(watchedName) };
    }
  }
  return null;
}

function optedIn(prefs: Prefs, key: AccountRoutingKey): boolean {
  if (key === 'account.quota.threshold') return prefs.notifyQuota;
  // a watched account's health is a monitor alert, like an endpoint's
  if (key === 'account.webhook.failing' || key === 'account.target.status') return prefs.notifyWebhook;
  return prefs.notifyTrial;
}

/**
 * The consumer's handler: one notice or one outbox row per event (or none: opted out, account or
 * monitor gone); `queued` is told the lane of a mail put in the outbox (its loop runs at once).
 */
export function accountMailHandler(o: {
  db: Db;
  outbox: MailOutbox;
  notices: NoticeStore;
  baseUrl: string;
  logger: Logger;
  queued: (lane: MailLane) => void;
}) {
  return async (env: Envelope<AccountRoutingKey>): Promise<'ack'> => {
    const accountId = (env.payload as { accountId: string }).accountId;
    const prefs = await o.db.account.findUnique({
      where: { id: accountId },
      select: { email: true, notifyQuota: true, notifyWebhook: true, notifyTrial: true },
    });
    if (!prefs || !optedIn(prefs, env.routingKey)) return 'ack';
    const spec = await specOf(o.db, env);
    if (!spec) return 'ack';
    const dedupKey = accountEventKey(env.routingKey, env.payload as never);
    const fresh = isNotice(spec)
      ? await o.notices.add({ dedupKey, accountId, spec })
      : await o.outbox.enqueue({
          dedupKey,
          accountId,
          kind: spec.kind,
          to: prefs.email,
          mail: renderMail(spec, o.baseUrl),
          expiresAt: linkExpiry(spec),
          lane: 'account',
        });
    if (!fresh) o.logger.debug('account event already mailed', { dedupKey });
    else if (!isNotice(spec)) o.queued('account');
    return 'ack';
  };
}

export async function consumeAccountEvents(
  amqp: AmqpClient,
  handler: ReturnType<typeof accountMailHandler>,
): Promise<void> {
  await amqp.consume({ queue: ACCOUNT_MAIL_QUEUE, bindings: [...ACCOUNT_ROUTING_KEYS], prefetch: 8, handler });
}

interface EventRow {
  dedup_key: string;
  routing_key: string;
  account_id: string;
  payload: unknown;
}

/** account events one relay round publishes */
export const RELAY_BATCH = 50;

/** Publishes unpublished `account_events` rows (one round); returns how many went out. */
export async function relayAccountEvents(db: Db, amqp: Pick<AmqpClient, 'publish'>, logger: Logger): Promise<number> {
  return db.$transaction(
    async (tx) => {
      const rows = await tx.$queryRaw<EventRow[]>`
        SELECT dedup_key, routing_key, account_id::text AS account_id, payload FROM account_events
        WHERE published_at IS NULL ORDER BY created_at LIMIT ${RELAY_BATCH} FOR UPDATE SKIP LOCKED`;
      let n = 0;
      for (const row of rows) {
        try {
          const key = row.routing_key as AccountRoutingKey;
          if (!(ACCOUNT_ROUTING_KEYS as readonly string[]).includes(key))
            throw new Error(`unknown routing key ${row.routing_key}`);
          const payload = contracts[key].payload.parse(row.payload);
          await amqp.publish(key, payload, {
            messageId: row.dedup_key,
            headers: { accountId: row.account_id },
          });
          await tx.$executeRaw`UPDATE account_events SET published_at = now(), attempts = attempts + 1 WHERE dedup_key = ${row.dedup_key}`;
          n++;
        } catch (err) {
          const error = err instanceof Error ? err.message : String(err);
          logger.warn('account event publish failed', { dedupKey: row.dedup_key, error });
          await tx.$executeRaw`UPDATE account_events SET attempts = attempts + 1, last_error = ${error.slice(0, 500)} WHERE dedup_key = ${row.dedup_key}`;
        }
      }
      return n;
    },
    { timeout: 30_000 },
  );
}

const iso = (d: Date) => d.toISOString();

/** One pass of the trial check; returns the events written. */
export async function checkTrials(db: Db, freeMonitors: number, now: Date): Promise<number> {
  let written = 0;
  const ending = await db.account.findMany({
    where: { trialEndsAt: { gt: now, lte: new Date(now.getTime() + TRIAL_ENDING_WINDOW_MS) }, plan: 'free' },
    select: { id: true, trialEndsAt: true },
  });
  for (const a of ending) {
    const payload = { accountId: a.id, occurredAt: iso(now), trialEndsAt: iso(a.trialEndsAt!) };
    const key = accountEventKey('account.trial.ending', payload);
    written += await db.$executeRaw`
      INSERT INTO account_events (dedup_key, routing_key, account_id, payload)
      VALUES (${key}, 'account.trial.ending', ${a.id}::uuid, ${JSON.stringify(payload)}::jsonb)
      ON CONFLICT (dedup_key) DO NOTHING`;
  }
  const ended = await db.account.findMany({
    where: { trialEndsAt: { lte: now }, trialStartedAt: { not: null }, plan: 'free', trialEndedNotifiedAt: null },
    select: { id: true, trialEndsAt: true },
  });
  for (const a of ended) written += await endTrial(db, a.id, a.trialEndsAt!, freeMonitors, now);
  return written;
}

/** Pauses the monitors over the Free limit (the oldest stay active) and writes account.trial.ended, in one transaction. */
async function endTrial(db: Db, accountId: string, endedAt: Date, freeMonitors: number, now: Date): Promise<number> {
  return db.$transaction(async (tx) => {
    const claimed = await tx.account.updateMany({
      where: { id: accountId, trialEndedNotifiedAt: null },
      data: { trialEndedNotifiedAt: now },
    });
    if (claimed.count === 0) return 0;
    const active = await tx.monitor.findMany({
      where: { accountId, isActive: true },
      orderBy: { createdAt: 'asc' },
      select: { id: true },
    });
    const over = active.slice(freeMonitors).map((m) => m.id);
    if (over.length > 0) await tx.monitor.updateMany({ where: { id: { in: over } }, data: { isActive: false } });
    const payload = { accountId, occurredAt: iso(now), trialEndedAt: iso(endedAt), pausedMonitorIds: over };
    const key = accountEventKey('account.trial.ended', payload);
    return tx.$executeRaw`
      INSERT INTO account_events (dedup_key, routing_key, account_id, payload)
      VALUES (${key}, 'account.trial.ended', ${accountId}::uuid, ${JSON.stringify(payload)}::jsonb)
      ON CONFLICT (dedup_key) DO NOTHING`;
  });
}

/** The latest trial end of the account and the monitors it paused (the overview's banner), or null. */
export async function lastTrialEnd(db: Db, accountId: string): Promise<{ endedAt: string; paused: string[] } | null> {
  const row = await db.accountEvent.findFirst({
    where: { accountId, routingKey: 'account.trial.ended' },
    orderBy: { createdAt: 'desc' },
    select: { payload: true },
  });
  if (!row) return null;
  const p = contracts['account.trial.ended'].payload.safeParse(row.payload);
  if (!p.success) return null;
  const monitors = await db.monitor.findMany({
    where: { id: { in: p.data.pausedMonitorIds }, isActive: false },
    select: { targetUsername: true, query: true },
  });
  return { endedAt: p.data.trialEndedAt, paused: monitors.map(watchedName) };
}
