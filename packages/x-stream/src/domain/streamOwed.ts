/**
 * Packing the stream's owed backfill windows (`x_stream_owed`, one row per username and window)
 * into as few X searches as the query length allows. No I/O.
 *
 * - The rows of one username merge into one window from their oldest `since`.
 * - Usernames no stream target watches any more are dropped (nothing of theirs can be a hit).
 * - Usernames are grouped by the rule parts their target allows (`-is:retweet`, `lang:`
 *   ... only what no monitor of the target needs, so a part never hides a post that could be a
 *   hit) and packed, oldest window first, into `(from:a OR from:b) <parts>` queries of at most
 *   `maxLength` characters; a query reads from its oldest username's `since`.
 * - Searches come oldest window first. The last query of a group is `partial`: the runner may
 *   hold a partial rule-change search back a little so that changes close together share it.
 */
import { queryCursorKeyOf } from '@sts/db';
import { fitRuleParts, packFromQueries, rulePartsLength, upstreamRuleKey, withRuleParts } from '@sts/social';

/** the x_stream_owed key of a query monitor's window (its cursor key) */
export const queryOwedKey = queryCursorKeyOf;

/** the monitor of an owed key or cursor key, or null for a username */
export function queryOwedMonitor(key: string): string | null {
  const prefix = queryCursorKeyOf('');
  return key.startsWith(prefix) && key.length > prefix.length ? key.slice(prefix.length) : null;
}

export interface OwedWindow {
  id: bigint;
  username: string;
  since: Date;
  reason: string;
  dueAt: Date;
  attempts: number;
  /** when the window was owed (its end: the rule in force, the connection back) */
  createdAt: Date;
}

export interface OwedSearch {
  query: string;
  usernames: string[];
  /** the oldest window of the query: it reads posts created after this */
  since: Date;
  /** the rows this search pays */
  ids: bigint[];
  /** the last (not full) query of its group */
  partial: boolean;
  /** every row is a rule change's (no gap, no retry) */
  rulesOnly: boolean;
  /** the earliest due time of its rows */
  dueSince: Date;
  /** the most failures of one of its rows */
  attempts: number;
  /** a query monitor's window (its owed key `?query:<id>`): its posts are recorded for that monitor */
  queryKey?: string;
}

/** the owed rows of one username, merged */
export interface OwedAccount {
  username: string;
  /** the oldest window's start */
  since: Date;
  ids: bigint[];
  /** every row is a rule change's */
  rulesOnly: boolean;
  /** a row is a post known lost (the account did post) */
  lost: boolean;
  /** when its newest row was owed */
  newest: Date;
  /** the earliest due time of its rows */
  dueSince: Date;
  /** the most failures of one of its rows */
  attempts: number;
}

/** the rows of each username (lower-cased) merged into one window from their oldest `since` */
export function mergeOwedWindows(rows: readonly OwedWindow[]): Map<string, OwedAccount> {
  const byName = new Map<string, OwedAccount>();
  for (const r of rows) {
    const u = r.username.toLowerCase();
    const m = byName.get(u);
    if (!m) {
      byName.set(u, {
        username: u,
        since: r.since,
        ids: [r.id],
        rulesOnly: r.reason === 'rules',
        lost: r.reason === 'lost',
        newest: r.createdAt,
        dueSince: r.dueAt,
        attempts: r.attempts,
      });
      continue;
    }
    m.ids.push(r.id);
    if (r.since < m.since) m.since = r.since;
    if (r.dueAt < m.dueSince) m.dueSince = r.dueAt;
    if (r.createdAt > m.newest) m.newest = r.createdAt;
    m.rulesOnly &&= r.reason === 'rules';
    m.lost ||= r.reason === 'lost';
    m.attempts = Math.max(m.attempts, r.attempts);
  }
  return byName;
}

/**
 * The searches that pay `rows`; `partsOf(username)` is the parts its target allows, or null when
 * no stream target watches it (its rows are returned in `dropped`).
 */
export function planOwedSearches(
  rows: readonly OwedWindow[],
  partsOf: (username: string) => readonly string[] | null,
  maxLength: number,
): { searches: OwedSearch[]; dropped: bigint[] } {
  const dropped: bigint[] = [];
  const groups = new Map<string, { parts: string[]; members: OwedAccount[] }>();
  for (const m of mergeOwedWindows(rows).values()) {
    const wanted = partsOf(m.username);
    if (wanted === null) {
      dropped.push(...m.ids);
      continue;
    }
    const parts = fitRuleParts(wanted, maxLength);
    const key = upstreamRuleKey(parts);
    const g = groups.get(key) ?? { parts, members: [] };
    g.members.push(m);
    groups.set(key, g);
  }
  const searches: OwedSearch[] = [];
  for (const { parts, members } of groups.values()) {
    members.sort((a, b) => a.since.getTime() - b.since.getTime() || a.username.localeCompare(b.username));
    const byName = new Map(members.map((m) => [m.username, m]));
    const packed = packFromQueries(
      members.map((m) => m.username),
      maxLength - rulePartsLength(parts),
    );
    packed.forEach((group, i) => {
      const ms = group.usernames.map((u) => byName.get(u)!);
      searches.push({
        query: withRuleParts(group.query, parts),
        usernames: group.usernames,
        since: ms[0]!.since,
        ids: ms.flatMap((m) => m.ids),
        partial: i === packed.length - 1,
        rulesOnly: ms.every((m) => m.rulesOnly),
        dueSince: new Date(Math.min(...ms.map((m) => m.dueSince.getTime()))),
        attempts: Math.max(...ms.map((m) => m.attempts)),
      });
    });
  }
  searches.sort((a, b) => a.since.getTime() - b.since.getTime());
  return { searches, dropped };
}

/**
 * The searches that pay query monitors' rows (keyed `?query:<id>`): one search per monitor with
 * its query (`queryOf(key)`), from its oldest window; a key whose monitor left the stream is dropped.
 */
export function planQueryOwedSearches(
  rows: readonly OwedWindow[],
  queryOf: (key: string) => string | null,
): { searches: OwedSearch[]; dropped: bigint[] } {
  const searches: OwedSearch[] = [];
  const dropped: bigint[] = [];
  for (const m of mergeOwedWindows(rows).values()) {
    const query = queryOf(m.username);
    if (query === null) dropped.push(...m.ids);
    else
      searches.push({
        query,
        usernames: [],
        since: m.since,
        ids: m.ids,
        partial: false,
        rulesOnly: m.rulesOnly,
        dueSince: m.dueSince,
        attempts: m.attempts,
        queryKey: m.username,
      });
  }
  return { searches, dropped };
}

/** the wait after a failed search (not a budget refusal): 5 s doubling, at most 5 minutes */
export function owedRetryMs(attempts: number): number {
  return Math.min(5000 * 2 ** Math.min(attempts, 10), 300_000);
}
