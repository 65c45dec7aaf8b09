import { snowflakeId } from '@sts/core';
import type { SocialUser, XAccountState } from '@sts/social';
import { lookupCandidates, provesPosted, provesQuiet, QUIET_MARGIN_MS, type CandidateInput } from './streamQuiet';
import type { OwedWindow } from './streamOwed';

const now = new Date(Date.UTC(2026, 0, 1, 12, 0, 0));
const ago = (s: number) => new Date(now.getTime() - s * 1000);
let nextId = 1n;
function row(username: string, reason: string, createdAgoS = 60, sinceAgoS = 600): OwedWindow {
  return {
    id: nextId++,
    username,
    since: ago(sinceAgoS),
    reason,
    dueAt: ago(createdAgoS),
    attempts: 0,
    createdAt: ago(createdAgoS),
  };
}

const input = (over: Partial<CandidateInput> = {}): CandidateInput => ({
  now,
  lagMs: 10_000,
  budgetShort: false,
  neverLooked: new Set(),
  watched: () => true,
  changesPending: false,
  holdMs: 4000,
  ...over,
});

const user = { id: '1', username: 'a' } as SocialUser;
const active = (mostRecentTweetId: string | null, tweetCount: number | null): XAccountState => ({
  status: 'active',
  user,
  posts: { mostRecentTweetId, tweetCount },
});

describe('lookupCandidates', () => {
  it('a new target’s rule-change window is looked up; a looked-at one only when the budget is short', () => {
    const rows = [row('new', 'rules'), row('old', 'rules'), row('gap', 'gap')];
    const plan = lookupCandidates(rows, input({ neverLooked: new Set(['new']) }));
    expect(plan.check.map((c) => c.username)).toEqual(['new']);
    const short = lookupCandidates(rows, input({ neverLooked: new Set(['new']), budgetShort: true }));
    expect(short.check.map((c) => c.username).sort()).toEqual(['gap', 'new', 'old']);
  });

  it('never a username with a lost post, nor one no target watches; windows merge from the oldest', () => {
    const a1 = row('a', 'gap', 60, 100);
    const a2 = row('A', 'overflow', 60, 900);
    const rows = [a1, a2, row('l', 'gap'), row('l', 'lost'), row('gone', 'gap')];
    const plan = lookupCandidates(rows, input({ budgetShort: true, watched: (u) => u !== 'gone' }));
    expect(plan.check).toEqual([{ username: 'a', since: a2.since, ids: [a1.id, a2.id] }]);
    expect(plan.waiting).toEqual([]);
  });

  it('waits `lagMs` after the newest row was owed, and while rule changes are coming (up to holdMs)', () => {
    const fresh = row('fresh', 'gap', 3);
    const plan = lookupCandidates([fresh, row('ripe', 'gap', 11)], input({ budgetShort: true }));
    expect(plan.check.map((c) => c.username)).toEqual(['ripe']);
    expect(plan.waiting).toEqual([fresh.id]);
    const rules = row('n', 'rules', 12);
    const pending = input({ neverLooked: new Set(['n']), changesPending: true });
    expect(lookupCandidates([rules], { ...pending, holdMs: 60_000 }).waiting).toEqual([rules.id]);
    expect(lookupCandidates([rules], pending).check.map((c) => c.username)).toEqual(['n']);
  });
});

describe('provesQuiet', () => {
  const since = ago(600);
  it('a newest post older than the window (less the margin) proves it empty; a newer one does not', () => {
    expect(provesQuiet(active(snowflakeId(ago(3600)), 5), since)).toBe(true);
    expect(provesQuiet(active(snowflakeId(new Date(since.getTime() - QUIET_MARGIN_MS + 1000)), 5), since)).toBe(false);
    expect(provesQuiet(active(snowflakeId(ago(10)), 5), since)).toBe(false);
  });

  it('no post id: empty only when X counts 0 posts; unsure answers are searched', () => {
    expect(provesQuiet(active(null, 0), since)).toBe(true);
    expect(provesQuiet(active(null, 3), since)).toBe(false);
    expect(provesQuiet(active(null, null), since)).toBe(false);
    expect(provesQuiet(active('not-an-id', 1), since)).toBe(false);
    expect(provesQuiet({ status: 'active', user }, since)).toBe(false);
    expect(provesQuiet({ status: 'suspended', user: null }, since)).toBe(false);
    expect(provesQuiet({ status: 'not_found', user: null }, since)).toBe(false);
    expect(provesQuiet(undefined, since)).toBe(false);
  });
});

describe('provesPosted', () => {
  const since = ago(600);
  it('an active account whose newest post is in the window (less the margin) posted; an older one did not', () => {
    expect(provesPosted(active(snowflakeId(ago(10)), 5), since)).toBe(true);
    expect(provesPosted(active(snowflakeId(new Date(since.getTime() - QUIET_MARGIN_MS + 1000)), 5), since)).toBe(true);
    expect(provesPosted(active(snowflakeId(ago(3600)), 5), since)).toBe(false);
  });

  it('no id, a bad id, a protected, suspended, missing or unanswered account: not known to have posted', () => {
    expect(provesPosted(active(null, 3), since)).toBe(false);
    expect(provesPosted(active('not-an-id', 1), since)).toBe(false);
    expect(provesPosted({ status: 'active', user }, since)).toBe(false);
    const posts = { mostRecentTweetId: snowflakeId(ago(10)), tweetCount: 1 };
    expect(provesPosted({ status: 'protected', user, posts }, since)).toBe(false);
    expect(provesPosted({ status: 'suspended', user: null }, since)).toBe(false);
    expect(provesPosted({ status: 'not_found', user: null }, since)).toBe(false);
    expect(provesPosted(undefined, since)).toBe(false);
  });
});
