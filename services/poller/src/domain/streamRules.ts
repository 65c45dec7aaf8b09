/**
 * X filtered-stream rules for the `stream` mode: which targets the stream covers, and how they are
 * packed into rules (`from:a OR from:b ...`, at most `maxLength` characters, at most `maxRules`)
 * with as few rule changes as possible. No I/O.
 *
 * Stable packing: a rule whose usernames are all still wanted is kept as it is; a rule that lost a
 * username is rewritten with the ones left (X has no rule update: delete + add); new usernames go
 * first into the kept rule with the most room (one rewrite), then into new rules. So adding one
 * target changes at most one rule, and removing one changes at most one rule.
 *
 * Overflow: usernames that fit in no rule once `maxRules` rules are full are returned as
 * `overflow`; the stream holder polls them by batched search instead (README, "stream mode").
 */
import { createHash } from 'node:crypto';
import { effectivePlan, isValidUsername } from '@sts/core';
import { packFromQueries } from '@sts/social';
import type { WatchingAccount } from './schedule';

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

/** A target is in the stream when a Starter account or one on an active trial watches it. */
export function inStream(accounts: readonly WatchingAccount[], now: Date): boolean {
  return accounts.some((a) => effectivePlan(a, now) !== 'free');
}

export function ruleValue(usernames: readonly string[]): string {
  return usernames.map((u) => `from:${u}`).join(' OR ');
}

/** a tag derived from the value: the same rule always carries the same tag */
export function ruleTag(value: string): string {
  return `${RULE_TAG_PREFIX}${createHash('sha256').update(value).digest('hex').slice(0, 16)}`;
}

const FROM = /^from:([A-Za-z0-9_]{1,15})$/;

/** The usernames (lower-cased) of a rule this service wrote, or null for any other rule. */
export function parseRule(rule: Pick<StreamRule, 'value' | 'tag'>): string[] | null {
  if (!rule.tag?.startsWith(RULE_TAG_PREFIX)) return null;
  const parts = rule.value.split(' OR ');
  const out: string[] = [];
  for (const p of parts) {
    const m = FROM.exec(p);
    if (!m) return null;
    out.push(m[1]!.toLowerCase());
  }
  return out.length > 0 ? out : null;
}

const joinedLength = (usernames: readonly string[]): number =>
  usernames.reduce((n, u) => n + u.length + 5, 0) + Math.max(0, usernames.length - 1) * 4;

/** Greedy packing of usernames, in order, into groups whose rule value fits `maxLength` (packFromQueries). */
export function packUsernames(usernames: readonly string[], maxLength: number): string[][] {
  return packFromQueries(usernames, maxLength).map((g) => g.usernames);
}

interface Kept {
  rule: StreamRule;
  usernames: string[];
  changed: boolean;
}

/** Keeps or trims the current rules; returns what they still cover and the ids to delete. */
function reviewCurrent(
  current: readonly StreamRule[],
  wanted: ReadonlySet<string>,
  maxLength: number,
): { kept: Kept[]; covered: Set<string>; remove: string[] } {
  const kept: Kept[] = [];
  const covered = new Set<string>();
  const remove: string[] = [];
  for (const rule of [...current].sort((a, b) => a.value.localeCompare(b.value))) {
    const names = parseRule(rule);
    if (names === null || rule.value.length > maxLength) {
      remove.push(rule.id);
      continue;
    }
    const still = names.filter((u) => wanted.has(u) && !covered.has(u));
    for (const u of still) covered.add(u);
    if (still.length === names.length) kept.push({ rule, usernames: still, changed: false });
    else {
      remove.push(rule.id);
      if (still.length > 0) kept.push({ rule, usernames: still, changed: true });
    }
  }
  return { kept, covered, remove };
}

/**
 * The changes that bring `current` (the rules X holds) to cover `wanted` (lower-cased, valid X
 * usernames): see the file comment for the stability and overflow rules.
 */
export function planRules(
  current: readonly StreamRule[],
  wantedUsernames: Iterable<string>,
  maxLength: number,
  maxRules: number,
): RulePlan {
  const wanted = new Set([...wantedUsernames].map((u) => u.toLowerCase()).filter((u) => isValidUsername(u)));
  const { kept, covered, remove } = reviewCurrent(current, wanted, maxLength);
  let fresh = [...wanted].filter((u) => !covered.has(u)).sort();
  // new usernames first fill the kept rule with the most room (one rewrite per sync at most)
  if (fresh.length > 0 && kept.length > 0) {
    const roomiest = kept.reduce((a, b) => (joinedLength(b.usernames) < joinedLength(a.usernames) ? b : a));
    const taken: string[] = [];
    for (const u of fresh) {
      if (joinedLength([...roomiest.usernames, ...taken, u]) > maxLength) break;
      taken.push(u);
    }
    if (taken.length > 0) {
      if (!roomiest.changed) remove.push(roomiest.rule.id);
      roomiest.usernames = [...roomiest.usernames, ...taken];
      roomiest.changed = true;
      fresh = fresh.slice(taken.length);
    }
  }
  const groups = packUsernames(fresh, maxLength);
  // past maxRules: changed kept rules come first (they existed), then new groups; the rest overflows
  const room = Math.max(0, maxRules - kept.filter((k) => !k.changed).length);
  const candidates = [...kept.filter((k) => k.changed).map((k) => k.usernames), ...groups];
  const placed = candidates.slice(0, room);
  const overflow = candidates.slice(room).flat().sort();
  const add = placed.map((names) => {
    const value = ruleValue(names);
    return { value, tag: ruleTag(value) };
  });
  return {
    add,
    delete: remove,
    rules: [...kept.filter((k) => !k.changed).map((k) => k.usernames), ...placed],
    overflow,
  };
}
