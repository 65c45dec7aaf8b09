/**
 * Sends what waits in the mail outbox over SMTP (nodemailer), `start()` / `stop()`. One loop per
 * lane (outbox.ts): the account lane's loop never waits for a notice round, and `nudge()` (a mail
 * was just queued) runs it at once rather than at its next poll. A failed send (server down,
 * refused) is a log line and `dashboard_mail_send_failures_total`, and the row is tried again
 * after 2^attempts × MAIL_RETRY_BASE_MS (at most MAIL_RETRY_MAX_MS); it is never dropped. The
 * Message-ID is derived from the row's de-duplication key, so even the one case where a mail can
 * go out twice (the process dies between the server's "250 OK" and the row's update) gives the
 * receiver two copies of the same message id.
 */
import { createHash } from 'node:crypto';
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import { Counter, type Registry } from 'prom-client';
import type { Transporter } from 'nodemailer';
import { MAIL_LANES, type MailLane, type MailOutbox, type MailRow } from './outbox';

export interface MailWorkerOptions {
  outbox: MailOutbox;
  transport: Pick<Transporter, 'sendMail'>;
  from: string;
  logger: Logger;
  registry?: Registry;
  pollMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  /** told about each sent mail (the development sink's log, tests) */
  onSent?: (row: MailRow) => void;
}

export interface MailWorker {
  start(): void;
  stop(): Promise<void>;
  /** one round of every lane now, the account lane first; how many were sent */
  runOnce(): Promise<number>;
  /** a mail of this lane was just queued: its loop runs now (or right after the round in flight) */
  nudge(lane: MailLane): void;
}

/** rows one round of a lane claims; the lease outlasts their SMTP conversations */
const ROUND_ROWS = 10;
const LEASE_MS = 120_000;

function backoffMs(attempts: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, attempts - 1));
}

/** One lane's loop: a round every pollMs, or at once when nudged; rounds never overlap. */
class LaneLoop {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;
  private again = false;
  private stopped = true;

  constructor(
    private readonly round: () => Promise<number>,
    private readonly pollMs: number,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule(this.pollMs);
  }

  nudge(): void {
    if (this.stopped) return;
    if (this.running) this.again = true;
    else this.schedule(0);
  }

  runOnce(): Promise<number> {
    return this.round();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
  }

  private schedule(ms: number): void {
    clearTimeout(this.timer);
    if (this.stopped) return;
    this.timer = setTimeout(() => this.tick(), ms);
  }

  private tick(): void {
    this.running = this.round()
      .catch((err: unknown) => {
        this.logger.warn('mail outbox round failed', { err: errorMessage(err) });
        return 0;
      })
      .finally(() => {
        this.running = undefined;
        // a full round may have left more due rows: go on at once
        const more = this.again;
        this.again = false;
        this.schedule(more ? 0 : this.pollMs);
      });
  }
}

export function createMailWorker(o: MailWorkerOptions): MailWorker {
  const registers = o.registry ? [o.registry] : [];
  const sentTotal = new Counter({
    name: 'dashboard_mail_sent_total',
    help: 'mails the SMTP server accepted',
    labelNames: ['kind'],
    registers,
  });
  const failures = new Counter({
    name: 'dashboard_mail_send_failures_total',
    help: 'mail send attempts that failed (each is retried with back-off)',
    labelNames: ['kind'],
    registers,
  });

  async function send(row: MailRow): Promise<boolean> {
    try {
      await o.transport.sendMail({
        from: o.from,
        to: row.to_address,
        subject: row.subject,
        text: row.text_body,
        html: row.html_body,
        messageId: `<${createHash('sha256').update(row.dedup_key).digest('hex').slice(0, 32)}@sts.mail>`,
      });
      await o.outbox.sent(row.id);
      sentTotal.labels(row.kind).inc();
      o.onSent?.(row);
      return true;
    } catch (err) {
      const error = errorMessage(err);
      const retryIn = backoffMs(row.attempts, o.retryBaseMs, o.retryMaxMs);
      failures.labels(row.kind).inc();
      o.logger.warn('mail send failed; will retry', {
        kind: row.kind,
        mailId: row.id,
        attempts: row.attempts,
        retryInMs: retryIn,
        err: error,
      });
      await o.outbox.failed(row.id, error, retryIn).catch(() => undefined);
      return false;
    }
  }

  function laneRound(lane: MailLane, loop: () => LaneLoop): () => Promise<number> {
    return async () => {
      const rows = await o.outbox.claim(lane, ROUND_ROWS, LEASE_MS);
      // side by side: the transport's pool bounds the connections
      const sent = await Promise.all(rows.map(send));
      if (rows.length === ROUND_ROWS) loop().nudge();
      return sent.filter(Boolean).length;
    };
  }

  const loops = new Map<MailLane, LaneLoop>();
  for (const lane of MAIL_LANES) {
    const self = (): LaneLoop => loops.get(lane)!;
    loops.set(lane, new LaneLoop(laneRound(lane, self), o.pollMs, o.logger));
  }

  return {
    start() {
      for (const l of loops.values()) l.start();
    },
    async stop() {
      await Promise.all([...loops.values()].map((l) => l.stop()));
    },
    async runOnce() {
      let n = 0;
      for (const lane of MAIL_LANES) n += await loops.get(lane)!.runOnce();
      return n;
    },
    nudge(lane) {
      loops.get(lane)!.nudge();
    },
  };
}
