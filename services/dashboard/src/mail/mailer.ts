/**
 * The dashboard's mail service: the outbox (two lanes: account mail first, always), the SMTP
 * worker, the account-event consumer and relay, the notice digests and the trial check, as one
 * factory with start()/stop(). Chosen over a separate
 * `services/mailer`: the dashboard already has PostgreSQL, RabbitMQ and the account pages, and
 * every replica can run it (rows are leased with SKIP LOCKED; events are de-duplicated by key).
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import type { Db } from '@sts/db';
import type { AmqpClient } from '@sts/messaging';
import type { Registry } from 'prom-client';
import type { Transporter } from 'nodemailer';
import {
  accountMailHandler,
  checkTrials,
  consumeAccountEvents,
  relayAccountEvents,
  RELAY_BATCH,
} from './accountEvents';
import { laneOf } from './digest';
import { createNoticeStore, type NoticeStore } from './notices';
import { createMailOutbox, type MailLane, type MailOutbox, type MailRow } from './outbox';
import { linkExpiry, renderMail, type MailSpec } from './templates';
import { createMailWorker, type MailWorker } from './worker';

export interface MailerOptions {
  db: Db;
  amqp: AmqpClient;
  logger: Logger;
  registry?: Registry;
  /** null: mail waits in the outbox (no SMTP_URL) */
  transport: Pick<Transporter, 'sendMail' | 'close'> | null;
  from: string;
  baseUrl: string;
  pollMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  /** an account's notices are gathered into one digest per this period (MAIL_DIGEST_MINUTES) */
  digestPeriodMs: number;
  freeMonitors: number;
  onSent?: (row: MailRow) => void;
}

export interface Mailer {
  /**
   * renders and queues one mail; `dedupKey` (default a new id) makes a repeat a no-op; a mail with
   * a link is kept no longer than its token lives
   */
  send(to: string, accountId: string | null, spec: MailSpec, dedupKey?: string): Promise<boolean>;
  outbox: MailOutbox;
  notices: NoticeStore;
  worker: MailWorker | null;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** accounts whose digest one round of the mail tick builds at most (the next round goes on) */
const DIGESTS_PER_ROUND = 100;
/** relay rounds (RELAY_BATCH events each) in one tick at most */
const RELAY_ROUNDS_PER_TICK = 20;

export function createMailer(o: MailerOptions): Mailer {
  const outbox = createMailOutbox(o.db);
  const notices = createNoticeStore(o.db, o.baseUrl);
  const worker = o.transport
    ? createMailWorker({
        outbox,
        transport: o.transport,
        from: o.from,
        logger: o.logger,
        registry: o.registry,
        pollMs: o.pollMs,
        retryBaseMs: o.retryBaseMs,
        retryMaxMs: o.retryMaxMs,
        onSent: o.onSent,
      })
    : null;
  let timer: NodeJS.Timeout | undefined;
  let rounds = 0;
  let busy: Promise<unknown> | undefined;
  const warn =
    (what: string) =>
    (err: unknown): undefined => {
      o.logger.warn(what, { err: errorMessage(err) });
    };
  const queued = (lane: MailLane) => worker?.nudge(lane);

  function tick(): void {
    busy = (async () => {
      // a burst (a poller's statement suspending many watched accounts) is relayed in one tick
      for (let i = 0; i < RELAY_ROUNDS_PER_TICK; i++) {
        const n = await relayAccountEvents(o.db, o.amqp, o.logger).catch(warn('account event relay failed'));
        if (!n || n < RELAY_BATCH) break;
      }
      const digests = await notices.digestDue(o.digestPeriodMs, DIGESTS_PER_ROUND).catch(warn('notice digest failed'));
      if (digests) queued('notice');
      await outbox.expire().catch(warn('clearing expired mail failed'));
      // the trial check every 60 rounds (a minute by default)
      if (rounds++ % 60 === 0) await checkTrials(o.db, o.freeMonitors, new Date()).catch(warn('trial check failed'));
    })().finally(() => {
      if (timer) timer = setTimeout(tick, o.pollMs);
    });
  }

  return {
    outbox,
    notices,
    worker,
    async send(to, accountId, spec, dedupKey = `${spec.kind}:${randomUUID()}`) {
      const mail = renderMail(spec, o.baseUrl);
      const lane = laneOf(spec);
      const fresh = await outbox.enqueue({
        dedupKey,
        accountId,
        kind: spec.kind,
        to,
        mail,
        expiresAt: linkExpiry(spec),
        lane,
      });
      if (fresh) queued(lane);
      return fresh;
    },
    start() {
      if (!worker) o.logger.warn('SMTP_URL is not set: mail is queued in mail_outbox but not sent');
      worker?.start();
      const handler = accountMailHandler({ db: o.db, outbox, notices, baseUrl: o.baseUrl, logger: o.logger, queued });
      // not awaited: the consumer is (re)established whenever RabbitMQ is reachable
      consumeAccountEvents(o.amqp, handler).catch(warn('account event consumer did not start'));
      timer = setTimeout(tick, 0);
      return Promise.resolve();
    },
    async stop() {
      const t = timer;
      timer = undefined;
      clearTimeout(t);
      await busy?.catch(() => undefined);
      await worker?.stop();
      // the pool's idle connections
      o.transport?.close();
    },
  };
}
