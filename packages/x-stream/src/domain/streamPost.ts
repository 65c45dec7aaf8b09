/**
 * A streamed post on its way from the stream holder to the replica that records it
 * (`x.stream.post`): the payload of a post and back, and the partition of its target. Every post
 * of one target goes to the same partition, and each partition is recorded by one consumer at a
 * time, in order (recording.ts).
 */
import type { XStreamPostEvent } from '@sts/messaging';
import { bareUser, type SocialTweet } from '@sts/social';

/** the target a post is recorded for: its author's key ('' when the stream sent no author) */
function targetOf(tweet: SocialTweet): string {
  return tweet.author.username.toLowerCase();
}

/** the partition (0 … partitions − 1) of a target: a stable string hash */
export function partitionOf(target: string, partitions: number): number {
  let h = 0;
  for (let i = 0; i < target.length; i++) h = (Math.imul(h, 31) + target.charCodeAt(i)) | 0;
  return Math.abs(h) % partitions;
}

export function toStreamPost(tweet: SocialTweet): XStreamPostEvent {
  return {
    target: targetOf(tweet),
    tweet: {
      id: tweet.id,
      text: tweet.text,
      authorId: tweet.authorId,
      authorUsername: tweet.author.username,
      authorName: tweet.author.name,
      createdAt: tweet.createdAt.toISOString(),
      lang: tweet.lang,
      ...(tweet.referencedTweets && { referencedTweets: tweet.referencedTweets.map((r) => ({ ...r })) }),
    },
  };
}

/**
 * The post as the recording path reads it. Only what hits and rules read travels; the author's
 * profile counts are not part of a hit.
 */
export function fromStreamPost(post: XStreamPostEvent): SocialTweet {
  const t = post.tweet;
  return {
    id: t.id,
    text: t.text,
    authorId: t.authorId,
    author: bareUser(t.authorId, t.authorUsername, t.authorName),
    createdAt: new Date(t.createdAt),
    lang: t.lang,
    metrics: { likeCount: 0, retweetCount: 0, replyCount: 0, quoteCount: 0 },
    ...(t.referencedTweets && { referencedTweets: t.referencedTweets.map((r) => ({ ...r })) }),
  };
}

/** tweets by target (their order kept); tweets without an author cannot be attributed and are left out */
export function byTarget(tweets: readonly SocialTweet[]): Map<string, SocialTweet[]> {
  const out = new Map<string, SocialTweet[]>();
  for (const t of tweets) {
    const key = targetOf(t);
    if (key === '') continue;
    const list = out.get(key) ?? [];
    list.push(t);
    out.set(key, list);
  }
  return out;
}
