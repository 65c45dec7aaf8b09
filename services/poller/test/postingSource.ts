/**
 * A social source in memory for the tests and benches that count polls: every poll of a target
 * finds one new post (a new id each time) by a minimal author, and nothing else is found.
 */
import { snowflakeId } from '@sts/core';
import { bareUser, type SocialSource, type SocialTweet } from '@sts/social';

/** a post by `username` as a source returns it */
export function postBy(username: string, text: string): SocialTweet {
  return {
    id: snowflakeId(),
    text,
    authorId: '1',
    author: bareUser('1', username, username),
    createdAt: new Date(),
    lang: 'en',
    metrics: { likeCount: 0, retweetCount: 0, replyCount: 0, quoteCount: 0 },
  };
}

/** `onPoll` sees each poll first: what it throws, the poll rejects with (a busy source) */
export function postingSource(onPoll: (username: string) => void, text = 'news'): SocialSource {
  return {
    name: 'local',
    getUser: () => Promise.resolve(null),
    getUserTimeline: () => Promise.resolve(null),
    getTweet: () => Promise.resolve(null),
    search: () => Promise.resolve({ items: [], nextCursor: null }),
    pollTweets: (username) => {
      try {
        onPoll(username);
      } catch (err) {
        return Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
      const post = postBy(username, text);
      return Promise.resolve({ tweets: [post], position: `x.${post.id}`, more: false });
    },
  };
}
