/**
 * The notices waiting for their digest (table mail_notices, digest.ts for the rule). `add` keeps
 * one row per account event (`dedup_key` unique: a redelivered event is not listed twice).
 * `digestDue` builds the digests whose window closed: an account's window opens with its oldest
 * notice not yet digested and closes `periodMs` later, so an account gets at most one digest per
 * period and no notice waits longer than one. A digest takes every waiting notice of its account
 * and queues one mail in the outbox's notice lane, in one transaction, under a transaction-level
 * advisory lock per account (replicas skip an account another one is digesting).
 */
import type { Db } from '@sts/db';
import { MAX_DIGEST_ITEMS, renderDigest, type NoticeSpec } from './digest';
import { createMailOutbox } from './outbox';

export interface NoticeStore {
  /** false when this notice is listed already (nothing written) */
  add(n: { dedupKey: string; accountId: string; spec: NoticeSpec }): Promise<boolean>;
  /** queues the digests whose window closed (at most `limit` accounts a call); how many were queued */
  digestDue(periodMs: number, limit: number): Promise<number>;
}

/** one of the oldest notices a digest lists, and how many it takes in all */
interface Waiting {
  id: string;
  spec: NoticeSpec;
  total: number;
}

type Tx = Parameters<Parameters<Db['$transaction']>[0]>[0];

/** one account's digest, if its window closed and no other replica is at it; true when queued */
async function digestAccount(tx: Tx, accountId: string, periodMs: number, base: string): Promise<boolean> {
  const [lock] = await tx.$queryRaw<{ locked: boolean }[]>`
    SELECT pg_try_advisory_xact_lock(hashtext('sts:mail-digest:' || ${accountId})) AS locked`;
  if (!lock?.locked) return false;
  const [open] = await tx.$queryRaw<{ closed: boolean | null }[]>`
    SELECT min(created_at) <= now() - ${periodMs} * interval '1 millisecond' AS closed
    FROM mail_notices WHERE digested_at IS NULL AND account_id = ${accountId}::uuid`;
  if (!open?.closed) return false;
  // every waiting notice is taken and counted in the database; only the listed ones are read
  const listed = await tx.$queryRaw<Waiting[]>`
    WITH taken AS (
      UPDATE mail_notices SET digested_at = now() WHERE digested_at IS NULL AND account_id = ${accountId}::uuid
      RETURNING id, spec, created_at)
    SELECT id::text AS id, spec, (SELECT count(*) FROM taken)::int AS total FROM taken
    ORDER BY created_at, id LIMIT ${MAX_DIGEST_ITEMS}`;
  const [account] = await tx.$queryRaw<{ email: string }[]>`SELECT email FROM accounts WHERE id = ${accountId}::uuid`;
  const oldest = listed[0];
  if (!account || !oldest) return false;
  const single = oldest.total === 1 ? oldest.spec.kind : 'digest';
  return createMailOutbox(tx).enqueue({
    dedupKey: `digest:${accountId}:${oldest.id}`,
    accountId,
    kind: single,
    to: account.email,
    mail: renderDigest(
      listed.map((t) => t.spec),
      oldest.total,
      base,
    ),
    expiresAt: null,
    lane: 'notice',
  });
}

export function createNoticeStore(db: Db, base: string): NoticeStore {
  return {
    async add({ dedupKey, accountId, spec }) {
      const n = await db.$executeRaw`
        INSERT INTO mail_notices (dedup_key, account_id, kind, spec)
        VALUES (${dedupKey}, ${accountId}::uuid, ${spec.kind}, ${JSON.stringify(spec)}::jsonb)
        ON CONFLICT (dedup_key) DO NOTHING`;
      return n > 0;
    },
    async digestDue(periodMs, limit) {
      const due = await db.$queryRaw<{ account_id: string }[]>`
        SELECT account_id::text AS account_id FROM mail_notices WHERE digested_at IS NULL
        GROUP BY account_id HAVING min(created_at) <= now() - ${periodMs} * interval '1 millisecond'
        ORDER BY min(created_at) LIMIT ${limit}`;
      let queued = 0;
      for (const { account_id } of due) {
        if (await db.$transaction((tx) => digestAccount(tx, account_id, periodMs, base), { timeout: 30_000 })) queued++;
      }
      return queued;
    },
  };
}
