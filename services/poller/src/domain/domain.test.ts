import { compareIds, snowflakeBefore, snowflakeId } from '@sts/core';
import { bareUser, type SocialTweet } from '@sts/social';
import type { WatchingMonitor } from '@sts/db';
import { compileMonitors, findHits, hitEvent } from './hits';
import { dueTargets, fairOrder, intervalFor, oldestCreation, type IntervalPolicy, type TargetState } from './schedule';
import { plans } from '../../test/poller';

const now = new Date('2026-05-01T12:00:00.000Z');

function target(accounts: TargetState['accounts'], lastPolledAt: Date | null = null): TargetState {
  return { targetKey: 't', username: 'T', accounts, lastPolledAt };
}

function tweet(text: string, createdAt = now, id = snowflakeId(createdAt)): SocialTweet {
  return {
    id,
    text,
    authorId: '42',
    author: bareUser('42', 'Author', 'A'),
    createdAt,
    lang: null,
    metrics: { likeCount: 0, retweetCount: 0, replyCount: 0, quoteCount: 0 },
  };
}

function monitor(id: string, keywords: string[], createdAt = new Date(now.getTime() - 60_000)): WatchingMonitor {
  return {
    id,
    accountId: `acc-${id}`,
    targetUsername: 'Author',
    query: null,
    keywords,
    excludeTypes: [],
    langs: [],
    createdAt,
  };
}

describe('intervals', () => {
  const policy: IntervalPolicy = { plans };
  it('uses the shortest plan interval among the accounts watching a target', () => {
    expect(intervalFor(target([{ plan: 'free', trialEndsAt: null }]), policy, now)).toBe(300);
    expect(
      intervalFor(
        target([
          { plan: 'free', trialEndsAt: null },
          { plan: 'starter', trialEndsAt: null },
        ]),
        policy,
        now,
      ),
    ).toBe(60);
    // shortest, even when the configured Free interval is the shorter one
    expect(
      intervalFor(
        target([
          { plan: 'free', trialEndsAt: null },
          { plan: 'starter', trialEndsAt: null },
        ]),
        { plans: { free: { pollIntervalSec: 20 }, starter: { pollIntervalSec: 60 } } },
        now,
      ),
    ).toBe(20);
  });

  it('counts an active trial as Starter, an ended one as Free', () => {
    const soon = new Date(now.getTime() + 1000);
    const past = new Date(now.getTime() - 1000);
    expect(intervalFor(target([{ plan: 'free', trialEndsAt: soon }]), policy, now)).toBe(60);
    expect(intervalFor(target([{ plan: 'free', trialEndsAt: past }]), policy, now)).toBe(300);
  });

  it('POLL_INTERVAL_SECONDS overrides the plans', () => {
    expect(intervalFor(target([{ plan: 'free', trialEndsAt: null }]), { plans, overrideSec: 1 }, now)).toBe(1);
  });

  it('a target is due when never polled or its interval has passed', () => {
    const free = [{ plan: 'free' as const, trialEndsAt: null }];
    const never = { ...target(free), targetKey: 'never' };
    const recent = { ...target(free, new Date(now.getTime() - 299_000)), targetKey: 'recent' };
    const old = { ...target(free, new Date(now.getTime() - 300_000)), targetKey: 'old' };
    expect(dueTargets([never, recent, old], policy, now).map((t) => t.targetKey)).toEqual(['never', 'old']);
  });

  it('a tick polls Starter/trial targets first, then the one read successfully longest ago (never read first)', () => {
    const free = [{ plan: 'free' as const, trialEndsAt: null }];
    const trial = [{ plan: 'free' as const, trialEndsAt: new Date(now.getTime() + 86_400_000) }];
    const starter = [{ plan: 'starter' as const, trialEndsAt: null }];
    const ago = (s: number) => new Date(now.getTime() - s * 1000);
    // lastPolledAt moves on refused polls too: the order follows the last success only
    const t = (key: string, accounts: TargetState['accounts'], success: Date | null) => ({
      ...target(accounts, now),
      targetKey: key,
      lastSuccessAt: success,
    });
    const order = fairOrder(
      [
        t('free-old', free, ago(900)),
        t('starter-recent', starter, ago(60)),
        t('free-never', free, null),
        t('trial-old', trial, ago(600)),
        t('starter-never', starter, null),
      ],
      now,
    );
    expect(order.map((x) => x.targetKey)).toEqual([
      'starter-never',
      'trial-old',
      'starter-recent',
      'free-never',
      'free-old',
    ]);
  });
});

describe('notBefore', () => {
  const created = new Date('2026-05-01T11:00:00.000Z');
  it('a poll starts where the oldest monitor was created', () => {
    expect(oldestCreation([new Date(created.getTime() + 5000), created])).toEqual(created);
    expect(oldestCreation([])).toEqual(new Date(0));
    // as an X since_id it selects a tweet made in the monitor's millisecond and none before it
    const floor = snowflakeBefore(created);
    expect(compareIds(snowflakeId(created), floor)).toBeGreaterThan(0);
    expect(compareIds(snowflakeId(new Date(created.getTime() - 1)), floor)).toBeLessThan(0);
  });
});

describe('matching', () => {
  it('tokenises once and applies each monitor: whole words, phrases, case, accents, no filter', () => {
    const monitors = compileMonitors([
      monitor('cat', ['cat']),
      monitor('phrase', ['new release']),
      monitor('accent', ['Café']),
      monitor('all', []),
    ]);
    const tweets = [
      tweet('concatenate this'),
      tweet('my CAT sleeps'),
      tweet('our new  \n release'),
      tweet('new and release'),
      tweet('au CAFÉ ce matin'),
      tweet('un cafe noir'), // accents are kept (core keywords.ts): cafe ≠ café
      tweet('cafeteria'),
    ];
    const hits = findHits(tweets, monitors).map((h) => `${h.monitor.id}:${h.tweet.text}`);
    expect(hits.filter((h) => !h.startsWith('all:'))).toEqual([
      'cat:my CAT sleeps',
      'phrase:our new  \n release',
      'accent:au CAFÉ ce matin',
    ]);
    expect(hits.filter((h) => h.startsWith('all:'))).toHaveLength(tweets.length);
  });

  it('a tweet older than a monitor does not hit it', () => {
    const [m] = compileMonitors([monitor('m', [], now)]);
    const hits = findHits([tweet('before', new Date(now.getTime() - 1)), tweet('same ms', now)], [m!]);
    expect(hits.map((h) => h.tweet.text)).toEqual(['same ms']);
  });

  it('builds the docs/webhooks.md monitor.hit payload, keywords null when there is no filter', () => {
    const [withKw, without] = compileMonitors([monitor('k', ['launch', 'big news']), monitor('n', [])]);
    const t = tweet('launch day', new Date('2026-05-01T12:00:00.5Z'), '1234567890123456789');
    const detectedAt = new Date('2026-05-01T12:00:01Z');
    expect(hitEvent({ monitor: withKw!, tweet: t }, detectedAt)).toEqual({
      event: 'monitor.hit',
      monitor: { id: 'k', targetUsername: 'Author', query: null, keywords: ['launch', 'big news'] },
      tweet: {
        id: '1234567890123456789',
        text: 'launch day',
        authorUsername: 'Author',
        createdAt: '2026-05-01T12:00:00.500Z',
      },
      detectedAt: '2026-05-01T12:00:01.000Z',
    });
    expect(hitEvent({ monitor: without!, tweet: t }, detectedAt).monitor.keywords).toBeNull();
  });
});
