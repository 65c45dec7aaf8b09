/**
 * The mail outbox (table mail_outbox): the durable place every mail waits in until the SMTP
 * server took it. One row per event (`dedup_key` unique: the same event never makes two mails);
 * a row is claimed by moving its `next_attempt_at` ahead (a lease, so replicas do not send the
 * same row at once), then marked sent, or given its next attempt with exponential back-off.
 *
 * Two lanes (`lane`): `account` (verification, reset, trial: what a person waits for) and
 * `notice` (the notice digests). Each lane is claimed on its own, so an account mail never waits
 * behind notices, however many there are.
 *
 * Invariant: a body (which can hold a verification or reset link) is kept only while it may still
 * be sent. Marking a row sent clears its bodies (kind, recipient, subject and times stay); a row
 * past `expires_at` (its link's token expiry) is never sent and `expire()` clears its bodies.
 */
import type { Db } from '@sts/db';
import type { RenderedMail } from './templates';

export const MAIL_LANES = ['account', 'notice'] as const;
export type MailLane = (typeof MAIL_LANES)[number];

export interface MailRow {
  id: string;
  dedup_key: string;
  kind: string;
  to_address: string;
  subject: string;
  text_body: string;
  html_body: string;
  attempts: number;
}

export interface MailOutbox {
  /** false when a mail with this key exists already (nothing written) */
  enqueue(m: {
    dedupKey: string;
    accountId: string | null;
    kind: string;
    to: string;
    mail: RenderedMail;
    /** the link's expiry: not sent, and the bodies cleared, after it (null: no link) */
    expiresAt: Date | null;
    lane: MailLane;
  }): Promise<boolean>;
  /** due rows of one lane, leased for `leaseMs` */
  claim(lane: MailLane, limit: number, leaseMs: number): Promise<MailRow[]>;
  sent(id: string): Promise<void>;
  failed(id: string, error: string, retryInMs: number): Promise<void>;
  /** clears the bodies of unsent rows whose link expired; how many */
  expire(): Promise<number>;
}

/** `db` may be a transaction's client (a digest is queued in the transaction that takes its notices) */
export function createMailOutbox(db: Pick<Db, '$executeRaw' | '$queryRaw'>): MailOutbox {
  return {
    async enqueue({ dedupKey, accountId, kind, to, mail, expiresAt, lane }) {
      const n = await db.$executeRaw`
        INSERT INTO mail_outbox (dedup_key, account_id, kind, to_address, subject, text_body, html_body, expires_at, lane)
        VALUES (${dedupKey}, ${accountId}::uuid, ${kind}, ${to}, ${mail.subject}, ${mail.text}, ${mail.html}, ${expiresAt}, ${lane})
        ON CONFLICT (dedup_key) DO NOTHING`;
      return n > 0;
    },
    claim(lane, limit, leaseMs) {
      return db.$queryRaw<MailRow[]>`
        UPDATE mail_outbox SET next_attempt_at = now() + ${leaseMs} * interval '1 millisecond', attempts = attempts + 1
        WHERE id IN (
          SELECT id FROM mail_outbox WHERE lane = ${lane} AND sent_at IS NULL AND next_attempt_at <= now()
            AND (expires_at IS NULL OR expires_at > now())
          ORDER BY next_attempt_at LIMIT ${limit} FOR UPDATE SKIP LOCKED)
        RETURNING id, dedup_key, kind, to_address, subject, text_body, html_body, attempts`;
    },
    async sent(id) {
      await db.$executeRaw`
        UPDATE mail_outbox SET sent_at = now(), last_error = NULL, text_body = '', html_body = ''
        WHERE id = ${id}::uuid`;
    },
    async failed(id, error, retryInMs) {
      await db.$executeRaw`
        UPDATE mail_outbox SET last_error = ${error.slice(0, 500)},
          next_attempt_at = now() + ${retryInMs} * interval '1 millisecond'
        WHERE id = ${id}::uuid`;
    },
    expire() {
      return db.$executeRaw`
        UPDATE mail_outbox SET text_body = '', html_body = '', last_error = coalesce(last_error, 'link expired before it was sent')
        WHERE sent_at IS NULL AND expires_at <= now() AND (text_body <> '' OR html_body <> '')`;
    },
  };
}
