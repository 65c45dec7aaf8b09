/**
 * X filtered-stream rules for the `stream` mode: which targets the stream covers, and how they are
 * packed into rules (`from:a OR from:b ...`, at most `maxLength` characters, at most `maxRules`)
 * with as few rule changes as possible. No I/O.
 *
 * Rule parts: a target whose monitors all leave out a post type or all name languages
 * carries `-is:retweet`, `-is:reply`, `-is:quote` or `lang:` (upstreamRuleParts: only what no
 * monitor of the target needs). Targets are grouped by those parts: a rule holds the targets of one
 * group, `(from:a OR from:b) -is:retweet lang:en`, and its value and tag name the group (the tag
 * `sts:<group>:<value>` hashes). A group's parts are dropped from the end while they would leave no
 * room for one username (fitRuleParts); a target without parts gets today's `from:a OR from:b`.
 *
 * Stable packing: a rule whose usernames are all still wanted in its group is kept as it is; a rule
 * that lost a username (gone, or moved to another group because its monitors' filters changed) is
 * rewritten with the ones left (X has no rule update: delete + add); new usernames of a group go
 * first into that group's kept rule with the most room (one rewrite), then into new rules. So
 * adding one target changes at most one rule, removing one changes at most one rule, and moving
 * one between groups changes at most two.
 *
 * Overflow: usernames that fit in no rule once `maxRules` rules are full are returned as
 * `overflow`; the stream holder polls them by batched search instead (README, "stream mode").
 */
import { createHash } from 'node:crypto';
import { effectivePlan, isValidUsername } from '@sts/core';
import {
  fitRuleParts,
  packFromQueries,
  rulePartsLength,
  splitRuleParts,
  upstreamRuleKey,
  upstreamRuleParts,
  withRuleParts,
  type MonitorRuleColumns,
} from '@sts/social';
import type { WatchingAccount } from '@sts/db';

/** the tag prefix of the rules this service owns; other rules are deleted (one stream per app) */
const RULE_TAG_PREFIX = 'sts:';

export interface StreamRule {
  id: string;
  value: string;
  tag?: string | undefined;
}

export interface NewRule {
  value: string;
  tag: string;
}

export interface RulePlan {
  /** rules to add (value + tag) */
  add: NewRule[];
  /** ids of rules to delete */
  delete: string[];
  /** the rules in force after the change, as username lists (kept + added) */
  rules: string[][];
  /** wanted usernames that no rule could take (beyond maxRules) */
  overflow: string[];
}

/** username → the rule parts its rule carries (upstreamRuleParts; [] = none) */
export type WantedRules = ReadonlyMap<string, readonly string[]>;

/** what the stream needs of a target (stream/repository.ts `StreamTarget`) */
export interface StreamCandidate {
  targetKey: string;
  accounts: readonly WatchingAccount[];
  /** the rule columns of the target's active monitors */
  monitors: readonly MonitorRuleColumns[];
}

/** A target is in the stream when a Starter account or one on an active trial watches it. */
export function inStream(accounts: readonly WatchingAccount[], now: Date): boolean {
  return accounts.some((a) => effectivePlan(a, now) !== 'free');
}

/** The targets the stream covers (inStream), each with the parts every monitor of it allows. */
export function wantedRules(targets: readonly StreamCandidate[], now: Date): Map<string, string[]> {
  return new Map(
    targets.filter((t) => inStream(t.accounts, now)).map((t) => [t.targetKey, upstreamRuleParts(t.monitors)]),
  );
}

/** `from:a OR from:b`, or `(from:a OR from:b) <parts>` for a group with parts (withRuleParts) */
export function ruleValue(usernames: readonly string[], parts: readonly string[] = []): string {
  return withRuleParts(usernames.map((u) => `from:${u}`).join(' OR '), parts);
}

const hash = (text: string, length: number): string => createHash('sha256').update(text).digest('hex').slice(0, length);

/**
 * A tag derived from the value and its group: the same rule always carries the same tag, and the
 * tags of one group share their first part (`sts:<group>:<value>`; a rule without parts keeps the
 * `sts:<value>` of rules written before parts existed, so those rules are not rewritten).
 */
export function ruleTag(value: string, key = ''): string {
  return `${RULE_TAG_PREFIX}${key === '' ? '' : `${hash(key, 8)}:`}${hash(value, 16)}`;
}

const FROM = /^from:([A-Za-z0-9_]{1,15})$/;

/** The usernames (lower-cased) and the group key (upstreamRuleKey) of a rule this service wrote, or null. */
export function parseRuleGroup(rule: Pick<StreamRule, 'value' | 'tag'>): { usernames: string[]; key: string } | null {
  if (!rule.tag?.startsWith(RULE_TAG_PREFIX)) return null;
  const { fromQuery, key } = splitRuleParts(rule.value);
  const usernames: string[] = [];
  for (const p of fromQuery.split(' OR ')) {
    const m = FROM.exec(p);
    if (!m) return null;
    usernames.push(m[1]!.toLowerCase());
  }
  return usernames.length > 0 ? { usernames, key } : null;
}

/** The usernames (lower-cased) of a rule this service wrote, or null for any other rule. */
export function parseRule(rule: Pick<StreamRule, 'value' | 'tag'>): string[] | null {
  return parseRuleGroup(rule)?.usernames ?? null;
}

const joinedLength = (usernames: readonly string[]): number =>
  usernames.reduce((n, u) => n + u.length + 5, 0) + Math.max(0, usernames.length - 1) * 4;

/** Greedy packing of usernames, in order, into groups whose rule value fits `maxLength` (packFromQueries). */
export function packUsernames(usernames: readonly string[], maxLength: number): string[][] {
  return packFromQueries(usernames, maxLength).map((g) => g.usernames);
}

/** one group of targets: the parts their rules carry and its key */
interface Group {
  parts: string[];
  key: string;
}

interface Kept {
  rule: StreamRule;
  usernames: string[];
  group: Group;
  changed: boolean;
}

/** valid usernames, lower-cased, each with its group (parts fitted to `maxLength`) */
function wantedGroups(wanted: Iterable<string> | WantedRules, maxLength: number): Map<string, Group> {
  const entries: Iterable<[string, readonly string[]]> =
    wanted instanceof Map ? (wanted as WantedRules) : [...(wanted as Iterable<string>)].map((u) => [u, []]);
  const groups = new Map<string, Group>();
  const out = new Map<string, Group>();
  for (const [name, wantedParts] of entries) {
    const u = name.toLowerCase();
    if (!isValidUsername(u)) continue;
    const parts = fitRuleParts(wantedParts, maxLength);
    const key = upstreamRuleKey(parts);
    if (!groups.has(key)) groups.set(key, { parts, key });
    out.set(u, groups.get(key)!);
  }
  return out;
}

/** Keeps or trims the current rules; returns what they still cover and the ids to delete. */
function reviewCurrent(
  current: readonly StreamRule[],
  wanted: ReadonlyMap<string, Group>,
  maxLength: number,
): { kept: Kept[]; covered: Set<string>; remove: string[] } {
  const kept: Kept[] = [];
  const covered = new Set<string>();
  const remove: string[] = [];
  for (const rule of [...current].sort((a, b) => a.value.localeCompare(b.value))) {
    const parsed = parseRuleGroup(rule);
    if (parsed === null || rule.value.length > maxLength) {
      remove.push(rule.id);
      continue;
    }
    // a username stays where its group is still the rule's (filters changed: it moves)
    const still = parsed.usernames.filter((u) => wanted.get(u)?.key === parsed.key && !covered.has(u));
    for (const u of still) covered.add(u);
    const group = still.length > 0 ? wanted.get(still[0]!)! : { parts: [], key: parsed.key };
    if (still.length === parsed.usernames.length) kept.push({ rule, usernames: still, group, changed: false });
    else {
      remove.push(rule.id);
      if (still.length > 0) kept.push({ rule, usernames: still, group, changed: true });
    }
  }
  return { kept, covered, remove };
}

/**
 * New usernames of one group: first into the group's kept rule with the most room (one rewrite per
 * group and sync at most; its id joins `remove`), the rest packed into new username lists.
 */
function placeFresh(kept: Kept[], group: Group, fresh: string[], maxLength: number, remove: string[]): string[][] {
  const room = maxLength - rulePartsLength(group.parts);
  const ofGroup = kept.filter((k) => k.group.key === group.key);
  if (ofGroup.length > 0) {
    const roomiest = ofGroup.reduce((a, b) => (joinedLength(b.usernames) < joinedLength(a.usernames) ? b : a));
    const taken: string[] = [];
    for (const u of fresh) {
      if (joinedLength([...roomiest.usernames, ...taken, u]) > room) break;
      taken.push(u);
    }
    if (taken.length > 0) {
      if (!roomiest.changed) remove.push(roomiest.rule.id);
      roomiest.usernames = [...roomiest.usernames, ...taken];
      roomiest.changed = true;
      fresh = fresh.slice(taken.length);
    }
  }
  return packUsernames(fresh, room);
}

/**
 * The changes that bring `current` (the rules X holds) to cover `wanted`: valid X usernames, or
 * (wantedRules) each with the parts its rule carries. See the file comment for the grouping,
 * stability and overflow rules.
 */
export function planRules(
  current: readonly StreamRule[],
  wanted: Iterable<string> | WantedRules,
  maxLength: number,
  maxRules: number,
): RulePlan {
  const groupOf = wantedGroups(wanted, maxLength);
  const { kept, covered, remove } = reviewCurrent(current, groupOf, maxLength);
  const freshByKey = new Map<string, { group: Group; usernames: string[] }>();
  for (const u of [...groupOf.keys()].filter((n) => !covered.has(n)).sort()) {
    const group = groupOf.get(u)!;
    const entry = freshByKey.get(group.key) ?? { group, usernames: [] };
    entry.usernames.push(u);
    freshByKey.set(group.key, entry);
  }
  const fresh: { usernames: string[]; group: Group }[] = [];
  for (const key of [...freshByKey.keys()].sort()) {
    const { group, usernames } = freshByKey.get(key)!;
    for (const names of placeFresh(kept, group, usernames, maxLength, remove)) fresh.push({ usernames: names, group });
  }
  // past maxRules: changed kept rules come first (they existed), then new ones; the rest overflows
  const room = Math.max(0, maxRules - kept.filter((k) => !k.changed).length);
  const candidates = [...kept.filter((k) => k.changed), ...fresh];
  const placed = candidates.slice(0, room);
  const overflow = candidates
    .slice(room)
    .flatMap((c) => c.usernames)
    .sort();
  const add = placed.map(({ usernames, group }) => {
    const value = ruleValue(usernames, group.parts);
    return { value, tag: ruleTag(value, group.key) };
  });
  return {
    add,
    delete: remove,
    rules: [...kept.filter((k) => !k.changed), ...placed].map((c) => c.usernames),
    overflow,
  };
}
