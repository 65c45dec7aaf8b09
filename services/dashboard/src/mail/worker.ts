/**
 * Sends what waits in the mail outbox over SMTP (nodemailer), `start()` / `stop()`. A failed
 * send (server down, refused) is a log line and `dashboard_mail_send_failures_total`, and the row
 * is tried again after 2^attempts × MAIL_RETRY_BASE_MS (at most MAIL_RETRY_MAX_MS); it is never
 * dropped. The Message-ID is derived from the row's de-duplication key, so even the one case
 * where a mail can go out twice (the process dies between the server's "250 OK" and the row's
 * update) gives the receiver two copies of the same message id.
 */
import { createHash } from 'node:crypto';
import type { Logger } from '@sts/common';
import { Counter, type Registry } from 'prom-client';
import type { Transporter } from 'nodemailer';
import type { MailOutbox, MailRow } from './outbox';

export interface MailWorkerOptions {
  outbox: MailOutbox;
  transport: Pick<Transporter, 'sendMail'>;
  from: string;
  logger: Logger;
  registry?: Registry;
  pollMs?: number;
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** told about each sent mail (the development sink's log, tests) */
  onSent?: (row: MailRow) => void;
}

export interface MailWorker {
  start(): void;
  stop(): Promise<void>;
  /** one round now; how many were sent */
  runOnce(): Promise<number>;
}

function backoffMs(attempts: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, attempts - 1));
}

export function createMailWorker(o: MailWorkerOptions): MailWorker {
  const pollMs = o.pollMs ?? 1000;
  const base = o.retryBaseMs ?? 2000;
  const max = o.retryMaxMs ?? 3_600_000;
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
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<number> | undefined;
  let stopped = false;

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
      const error = err instanceof Error ? err.message : String(err);
      const retryIn = backoffMs(row.attempts, base, max);
      failures.labels(row.kind).inc();
      o.logger.warn('mail send failed; will retry', {
        kind: row.kind,
        mailId: row.id,
        attempts: row.attempts,
        retryInMs: retryIn,
        error,
      });
      await o.outbox.failed(row.id, error, retryIn).catch(() => undefined);
      return false;
    }
  }

  async function runOnce(): Promise<number> {
    // the lease outlasts one SMTP conversation; a crashed replica's rows come back after it
    const rows = await o.outbox.claim(10, 120_000);
    let n = 0;
    for (const row of rows) if (await send(row)) n++;
    return n;
  }

  function schedule(): void {
    if (stopped) return;
    timer = setTimeout(() => {
      running = runOnce()
        .catch((err: unknown) => {
          o.logger.warn('mail outbox round failed', { error: err instanceof Error ? err.message : String(err) });
          return 0;
        })
        .finally(schedule);
    }, pollMs);
  }

  return {
    start() {
      stopped = false;
      schedule();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running?.catch(() => undefined);
    },
    runOnce,
  };
}
