/**
 * Query monitors on X (docs/queries.md): each query monitor of a Starter or trial account is one
 * filtered-stream rule, its query as X reads it (`parseQuery(...).rule`, the grouping spelled
 * out), tagged `sts:q:<monitor id>:<value hash>` so a streamed post's `matching_rules` name the
 * monitor. A rule is kept while its monitor wants the same value; a changed query is a new tag
 * (X has no rule update: add the new one, delete the old). Query rules and username rules share
 * X's rule cap: neither evicts the other's rules in force; new ones take the room left, and the
 * query monitors that find none (or whose rule X refused) are read by recent search instead.
 * No I/O.
 */
import { createHash } from 'node:crypto';
import { parseQuery } from '@sts/core';
import type { NewRule, StreamRule } from './streamRules';
import { inStream } from './streamRules';
import type { WatchingAccount } from '@sts/db';

const QUERY_TAG_PREFIX = 'sts:q:';

/** a query monitor's rule, with the monitor it records for */
export interface QueryRule extends NewRule {
  monitorId: string;
}

export interface QueryRulePlan {
  add: QueryRule[];
  /** ids of rules to delete */
  delete: string[];
  /** the query rules in force after the change (kept + added) */
  count: number;
  /** monitors wanted in the stream that no rule could take (no room, rule too long): read by search */
  overflow: string[];
}

/** what a query rule needs of a monitor */
export interface QueryCandidate {
  id: string;
  query: string;
  account: WatchingAccount;
}

const hash = (text: string): string => createHash('sha256').update(text).digest('hex').slice(0, 12);

function queryRuleTag(monitorId: string, value: string): string {
  return `${QUERY_TAG_PREFIX}${monitorId}:${hash(value)}`;
}

/** the monitor a rule of this service records for, or null (a username rule, another app's rule) */
export function queryRuleMonitor(rule: Pick<StreamRule, 'tag'>): string | null {
  if (!rule.tag?.startsWith(QUERY_TAG_PREFIX)) return null;
  const id = rule.tag.slice(QUERY_TAG_PREFIX.length).split(':')[0];
  return id ? id : null;
}

export function isQueryRule(rule: Pick<StreamRule, 'tag'>): boolean {
  return queryRuleMonitor(rule) !== null;
}

/** the query as X reads it (rule and search text), or null when the stored query no longer parses */
export function queryRuleValue(query: string): string | null {
  try {
    return parseQuery(query).rule;
  } catch {
    return null;
  }
}

/** The rules the stream's query monitors want (Starter/trial, parsing, within `maxLength`), oldest first. */
export function wantedQueryRules(
  monitors: readonly QueryCandidate[],
  now: Date,
  maxLength: number,
): { rules: QueryRule[]; tooLong: string[] } {
  const rules: QueryRule[] = [];
  const tooLong: string[] = [];
  for (const m of monitors) {
    if (!inStream([m.account], now)) continue;
    const value = queryRuleValue(m.query);
    if (value === null) continue; // matches nothing (compileMonitors): no rule, no search
    if (value.length > maxLength) tooLong.push(m.id);
    else rules.push({ value, tag: queryRuleTag(m.id, value), monitorId: m.id });
  }
  return { rules, tooLong };
}

/**
 * The changes that bring the query rules X holds (`current`, query rules only) to `wanted`,
 * within `room` rules in all: a wanted rule in force is kept, others deleted, new ones added
 * while room is left (in `wanted`'s order); the rest overflow.
 */
export function planQueryRules(
  current: readonly StreamRule[],
  wanted: readonly QueryRule[],
  room: number,
): QueryRulePlan {
  const wantedTags = new Set(wanted.map((r) => r.tag));
  const kept = current.filter((r) => r.tag !== undefined && wantedTags.has(r.tag));
  const keptTags = new Set(kept.map((r) => r.tag));
  const remove = current.filter((r) => !keptTags.has(r.tag)).map((r) => r.id);
  const fresh = wanted.filter((r) => !keptTags.has(r.tag));
  const free = Math.max(0, room - kept.length);
  const add = fresh.slice(0, free);
  return {
    add,
    delete: remove,
    count: kept.length + add.length,
    overflow: fresh.slice(free).map((r) => r.monitorId),
  };
}
