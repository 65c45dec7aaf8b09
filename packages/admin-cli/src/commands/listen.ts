/**
 * `listen`: prints each hit of an account as it is recorded, with its latency, until Ctrl-C: the
 * product seen working without a public HTTPS endpoint for webhooks.
 *
 * Source: PostgreSQL's notifications on `sts_hits` (the hits_notify trigger, delivered at the
 * commit that records the hits, with their ids), then one read of those hits. The LISTEN has a
 * session of its own on DATABASE_DIRECT_URL when it is set (a transaction-mode PgBouncer that
 * DATABASE_URL may name delivers no notification), else on DATABASE_URL. Which account: `--account ID`; else the account of the
 * `--monitor` ids; else the seeded demo account (demo@example.com), so `npm run cli -- listen`
 * next to `npm start` shows the demo monitors' hits. Hits recorded while it was not listening are
 * not shown (the hit history is `npm run cli -- hits`); a lost database connection ends it with
 * exit 1.
 *
 * Latency per hit: detected = the poller's detectedAt − the post's createdAt; recorded = when the
 * notification reached this process (the hit's commit, as seen here) − createdAt.
 */
import { Client } from 'pg';
import { isUuid } from '@sts/core';
import { HIT_SQL_COLUMNS, type Db, type HitSqlRow } from '@sts/db';
import {
  CliUsageError,
  sessionDatabaseUrl,
  optionalString,
  type CliContext,
  type Command,
  type OptionValues,
} from '../command';

const CHANNEL = 'sts_hits';
const DEMO_EMAIL = 'demo@example.com';
/** most --monitor flags (a hostile argv cannot make the filter unbounded) */
const MAX_MONITORS = 100;
/** most hit ids read per notification (the trigger sends at most 100) */
const MAX_IDS = 100;

interface Notification {
  account: string;
  monitor: string;
  hits: string[];
}

/** A shown hit: what a line prints, and what --json prints per line. */
export interface ListenedHit {
  hit_id: string;
  monitor_id: string;
  target: string;
  tweet_id: string;
  author: string;
  text: string;
  tweet_created_at: string;
  detected_at: string;
  recorded_at: string;
  /** detectedAt − createdAt */
  detected_ms: number;
  /** recorded − createdAt */
  recorded_ms: number;
}

export function parseNotification(payload: string): Notification | null {
  try {
    const n = JSON.parse(payload) as Partial<Notification>;
    if (typeof n.account !== 'string' || typeof n.monitor !== 'string' || !Array.isArray(n.hits)) return null;
    const hits = n.hits.filter((h): h is string => typeof h === 'string' && isUuid(h)).slice(0, MAX_IDS);
    return { account: n.account, monitor: n.monitor, hits };
  } catch {
    return null;
  }
}

/** One line per hit: time recorded, author, text, then the latencies. */
export function hitLine(h: ListenedHit): string {
  const text = h.text.replace(/\s+/g, ' ');
  const short = [...text].length > 80 ? `${[...text].slice(0, 79).join('')}…` : text;
  return (
    `${h.recorded_at}  @${h.author}: ${JSON.stringify(short)}  (tweet ${h.tweet_id}, monitor ${h.monitor_id.slice(0, 8)})` +
    `  detected ${h.detected_ms} ms, recorded ${h.recorded_ms} ms after the post`
  );
}

interface Scope {
  accountId: string;
  /** null: every monitor of the account */
  monitors: Set<string> | null;
  label: string;
}

function monitorFlags(values: OptionValues): string[] {
  const raw = values.monitor;
  const list = raw === undefined ? [] : Array.isArray(raw) ? raw.map(String) : [String(raw)];
  if (list.length > MAX_MONITORS) throw new CliUsageError(`at most ${MAX_MONITORS} --monitor flags`);
  for (const id of list) if (!isUuid(id)) throw new CliUsageError(`--monitor must be a monitor id (a UUID): ${id}`);
  return [...new Set(list.map((id) => id.toLowerCase()))];
}

/** The account and monitors to show, from the flags; usage errors (exit 2) for what does not fit. */
async function resolveScope(db: Db, values: OptionValues): Promise<Scope> {
  const account = optionalString(values, 'account');
  if (account !== undefined && !isUuid(account)) throw new CliUsageError('--account must be an account id (a UUID)');
  const ids = monitorFlags(values);
  const monitors = await db.monitor.findMany({
    where: { id: { in: ids } },
    select: { id: true, accountId: true, targetUsername: true },
  });
  for (const id of ids) if (!monitors.some((m) => m.id === id)) throw new CliUsageError(`no monitor ${id}`);
  let accountId = account?.toLowerCase();
  if (accountId === undefined && monitors.length > 0) accountId = monitors[0]!.accountId;
  if (accountId === undefined) {
    const demo = await db.account.findUnique({ where: { email: DEMO_EMAIL }, select: { id: true } });
    if (!demo)
      throw new CliUsageError(`no --account given and no demo account (${DEMO_EMAIL}); run npm run cli -- seed`);
    accountId = demo.id;
  } else if (!(await db.account.findUnique({ where: { id: accountId }, select: { id: true } }))) {
    throw new CliUsageError(`no account ${accountId}`);
  }
  const foreign = monitors.find((m) => m.accountId !== accountId);
  if (foreign) throw new CliUsageError(`monitor ${foreign.id} belongs to another account than ${accountId}`);
  const label =
    monitors.length > 0
      ? `monitor${monitors.length > 1 ? 's' : ''} ${monitors.map((m) => `${m.id} (@${m.targetUsername})`).join(', ')}`
      : 'every monitor';
  return { accountId, monitors: monitors.length > 0 ? new Set(ids) : null, label };
}

interface HitRow extends HitSqlRow {
  target_username: string;
}

/** The notified hits of the scope, oldest detection first. */
async function readHits(db: Db, scope: Scope, ids: string[], recordedAt: Date): Promise<ListenedHit[]> {
  const rows = await db.$queryRaw<HitRow[]>`
    SELECT ${HIT_SQL_COLUMNS}, m.target_username
    FROM hits h JOIN monitors m ON m.id = h.monitor_id
    WHERE h.id = ANY(${ids}::uuid[]) AND m.account_id = ${scope.accountId}::uuid
    ORDER BY h.detected_at, h.tweet_id`;
  return rows.map((r) => ({
    hit_id: r.id,
    monitor_id: r.monitor_id,
    target: r.target_username,
    tweet_id: r.tweet_id,
    author: r.tweet_author_username,
    text: r.tweet_text,
    tweet_created_at: r.tweet_created_at.toISOString(),
    detected_at: r.detected_at.toISOString(),
    recorded_at: recordedAt.toISOString(),
    detected_ms: r.detected_at.getTime() - r.tweet_created_at.getTime(),
    recorded_ms: recordedAt.getTime() - r.tweet_created_at.getTime(),
  }));
}

/** Waits for SIGINT or SIGTERM (Ctrl-C), or for `failed` to reject. */
function untilStopped(failed: Promise<never>): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
    failed.catch((err: unknown) => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      reject(err instanceof Error ? err : new Error(String(err)));
    });
  });
}

async function listen(ctx: CliContext, values: OptionValues): Promise<number> {
  const db = ctx.db();
  const scope = await resolveScope(db, values);
  const json = values.json === true;
  const client = new Client({ connectionString: sessionDatabaseUrl(ctx.env) });
  let lost: (err: Error) => void = () => undefined;
  const failed = new Promise<never>((_, reject) => (lost = reject));
  failed.catch(() => undefined); // handled: a loss before or after the wait below is no crash
  client.on('error', (err) => lost(new Error(`lost the database connection: ${err.message}`)));
  ctx.onClose(() => client.end());
  await client.connect();
  // one read at a time, in notification order: lines come out in commit order
  let shown = 0;
  let queue = Promise.resolve();
  client.on('notification', (msg) => {
    const recordedAt = new Date();
    const n = msg.channel === CHANNEL ? parseNotification(msg.payload ?? '') : null;
    if (!n || n.account !== scope.accountId || (scope.monitors && !scope.monitors.has(n.monitor))) return;
    queue = queue
      .then(async () => {
        for (const h of await readHits(db, scope, n.hits, recordedAt)) {
          process.stdout.write(`${json ? JSON.stringify(h) : hitLine(h)}\n`);
          shown++;
        }
      })
      .catch((err: unknown) => lost(err instanceof Error ? err : new Error(String(err))));
  });
  await client.query(`LISTEN ${CHANNEL}`);
  process.stderr.write(`listening for hits of account ${scope.accountId}, ${scope.label} (Ctrl-C to stop)\n`);
  await untilStopped(failed);
  await queue;
  return shown;
}

const listenCommand: Command = {
  name: 'listen',
  summary: 'print each hit of an account as it is recorded, with its latency, until Ctrl-C',
  usage: [
    'usage: npm run cli -- listen [--account ID] [--monitor ID]... [--json]',
    '',
    'Prints one line per hit as the poller records it: when, the post, and its latency (detected and',
    'recorded, in ms after the post was created). --account: the account (default: the account of',
    'the --monitor ids, else the demo account demo@example.com that `seed` makes). --monitor (may be',
    'repeated): only these monitors, which must belong to the account. --json: one JSON object per',
    'hit. Ctrl-C (SIGINT) or SIGTERM ends it (exit 0). It listens on DATABASE_DIRECT_URL when set, else',
    'DATABASE_URL (a transaction-mode PgBouncer delivers no notification).',
  ].join('\n'),
  options: { account: { type: 'string' }, monitor: { type: 'string', multiple: true } },
  async run(ctx, values) {
    const hits = await listen(ctx, values);
    return { json: { hits }, text: `${hits} hit(s) shown` };
  },
};

export const listenCommands: Command[] = [listenCommand];
