/** The account comparison and the X lookup's schedule (pure). */
import type { SocialUser } from '@sts/social';
import { observe, profileOf, type Profile } from './profiles';
import { dueForLookup, type LookupTarget } from './schedule';
import { plans } from '../../test/poller';

const now = new Date('2026-05-01T12:00:00.000Z');
const ago = (sec: number) => new Date(now.getTime() - sec * 1000);

function lookupTarget(key: string, plan: 'free' | 'starter', checkedAt: Date | null): LookupTarget {
  return {
    targetKey: key,
    username: key,
    accounts: [{ plan, trialEndsAt: null }],
    lastPolledAt: null,
    targetStatus: 'suspended',
    userId: null,
    checkedAt,
    firstMonitorAt: ago(3600),
  };
}

const profile: Profile = {
  userId: '7',
  username: 'Acct',
  name: 'A',
  description: null,
  profileImageUrl: null,
  verified: false,
};

describe('the X account lookup schedule', () => {
  it('takes targets never looked at and those whose plan interval passes within the period', () => {
    const targets = [
      lookupTarget('never', 'free', null),
      lookupTarget('starter_due', 'starter', ago(60)),
      lookupTarget('starter_soon', 'starter', ago(55)),
      lookupTarget('starter_fresh', 'starter', ago(30)),
      lookupTarget('free_fresh', 'free', ago(100)),
      lookupTarget('free_due', 'free', ago(300)),
    ];
    const due = dueForLookup(targets, { plans }, now, 10_000).map((t) => t.targetKey);
    // an unavailable target is looked up at its plan interval, not backed off (the look sees it back)
    expect(due).toEqual(['never', 'starter_due', 'starter_soon', 'free_due']);
    expect(dueForLookup(targets, { plans, overrideSec: 20 }, now, 0).map((t) => t.targetKey)).toEqual([
      'never',
      'starter_due',
      'starter_soon',
      'starter_fresh',
      'free_fresh',
      'free_due',
    ]);
  });
});

describe('observe', () => {
  it('a suspended account X shows without its profile: suspended, nothing changed', () => {
    expect(observe('acct', profile, { profile: null, state: 'suspended' })).toEqual({
      status: 'suspended',
      profile: null,
      changed: [],
      renamedTo: null,
    });
  });

  it('an X user record compares field by field; a new username of the same id is a rename', () => {
    const user: SocialUser = {
      id: '7',
      username: 'Renamed',
      name: 'B',
      description: 'bio',
      followersCount: 9,
      followingCount: 0,
      tweetCount: 0,
      verified: false,
      profileImageUrl: null,
      createdAt: null,
    };
    expect(observe('acct', profile, { profile: profileOf(user), state: 'active' })).toMatchObject({
      status: 'renamed',
      changed: ['username', 'name', 'description'],
      renamedTo: 'Renamed',
    });
    expect(observe('acct', profile, { profile: { ...profile, name: 'A' }, state: 'protected' })).toMatchObject({
      status: 'protected',
      changed: [],
    });
    expect(observe('acct', profile, null).status).toBe('not_found');
  });
});
