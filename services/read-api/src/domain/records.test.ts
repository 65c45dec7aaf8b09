import {
  HitRecord as HitSchema,
  listOf,
  MonitorRecord as MonitorSchema,
  TweetRecord as TweetSchema,
  UserRecord as UserSchema,
} from '@sts/api-contract';
import type { SocialTweet, SocialUser } from '@sts/social';
import { hitRecord, listBody, monitorRecord, tweetRecord, userRecord, type HitRow, type MonitorRow } from './records';

const user: SocialUser = {
  id: '42',
  username: 'alice',
  name: 'Alice',
  description: null,
  followersCount: 3,
  followingCount: 4,
  tweetCount: 5,
  verified: true,
  profileImageUrl: 'https://example.test/a.png',
  createdAt: new Date('2024-05-01T12:00:00Z'),
};
const tweet: SocialTweet = {
  id: '1790000000000000000',
  text: 'hello',
  authorId: '42',
  author: user,
  createdAt: new Date('2024-05-01T12:00:01Z'),
  lang: 'en',
  metrics: { likeCount: 1, retweetCount: 2, replyCount: 3, quoteCount: 4 },
  referencedTweets: [{ type: 'replied_to', id: '1780000000000000000' }],
};
const hit: HitRow = {
  id: '0b9f0f3e-8c51-4d59-9a4b-1b2f6f1d2c3a',
  monitorId: '7d9c5a7e-2b7c-4f3e-8a8e-6c0c2b7a9d10',
  tweetId: tweet.id,
  tweetText: 'hello',
  tweetAuthorUsername: 'alice',
  tweetCreatedAt: tweet.createdAt,
  detectedAt: new Date('2024-05-01T12:00:02Z'),
};
const monitor: MonitorRow = {
  id: hit.monitorId,
  targetUsername: 'alice',
  query: null,
  keywords: [],
  excludeTypes: [],
  langs: [],
  events: null,
  targetStatus: 'ok',
  targetStatusAt: null,
  isActive: true,
  checkIntervalSec: 60,
  lastCheckAt: null,
  lastError: null,
  hasWebhook: false,
  heldEvents: 0,
  createdAt: new Date('2024-05-01T11:00:00Z'),
  updatedAt: new Date('2024-05-01T11:00:00Z'),
};

// zod objects strip unknown keys: parse(x) equal to x means every field is declared and valid.
describe('the serialisers write the records of @sts/api-contract, field for field', () => {
  it('user and tweet', () => {
    const u = userRecord(user);
    expect(UserSchema.parse(u)).toEqual(u);
    expect(Object.keys(u).sort()).toEqual(Object.keys(UserSchema.shape).sort());
    const t = tweetRecord(tweet);
    expect(TweetSchema.parse(t)).toEqual(t);
    expect(t.referenced_tweets).toEqual([{ type: 'replied_to', id: '1780000000000000000' }]);
    expect(tweetRecord({ ...tweet, referencedTweets: undefined }).referenced_tweets).toEqual([]);
    expect(Object.keys(t).sort()).toEqual(Object.keys(TweetSchema.shape).sort());
  });

  it('monitor with hits, and the list envelope', () => {
    const m = monitorRecord(monitor, [hit]);
    expect(MonitorSchema.parse(m)).toEqual(m);
    expect(Object.keys(m).sort()).toEqual(Object.keys(MonitorSchema.shape).sort());
    expect(m.keywords).toBeNull();
    expect(m.filters).toEqual({ exclude: [], lang: [], excluded_keywords: [] });
    const ruled = monitorRecord({
      ...monitor,
      keywords: ['launch', '-spam', '-"big sale"'],
      excludeTypes: ['replies', 'quotes'],
      langs: ['en', 'de'],
    });
    expect(MonitorSchema.parse(ruled)).toEqual(ruled);
    expect(ruled.keywords).toEqual(['launch', '-spam', '-"big sale"']);
    expect(ruled.filters).toEqual({
      exclude: ['replies', 'quotes'],
      lang: ['en', 'de'],
      excluded_keywords: ['spam', 'big sale'],
    });
    expect(HitSchema.parse(hitRecord(hit)).url).toBe(`https://x.com/alice/status/${tweet.id}`);
    const body = listBody([m], null);
    expect(listOf(MonitorSchema).parse(body)).toEqual(body);
  });

  it('the schemas refuse what the serialisers must never write', () => {
    expect(UserSchema.safeParse({ ...userRecord(user), followers_count: -1 }).success).toBe(false);
    expect(HitSchema.safeParse({ ...hitRecord(hit), detected_at: '2024-05-01T12:00:02Z' }).success).toBe(false);
    expect(MonitorSchema.safeParse({ ...monitorRecord(monitor), status: 'gone' }).success).toBe(false);
  });
});
