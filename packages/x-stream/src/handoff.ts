/**
 * The stream holder's hand-off of streamed posts: each post is published to RabbitMQ
 * (`x.stream.post` on its target's partition, with publisher confirms), and any poller replica
 * records it (recording.ts), so the holder only reads the stream.
 *
 * - A post counts as handed off once the broker confirmed it; until then it waits here, and the
 *   holder's saved stream position stays behind the oldest post waiting (`oldestWaiting`).
 * - Back-pressure: each partition's queue is bounded (`x-max-length`, `x-overflow:
 *   reject-publish`), so a full queue nacks the publish. A nacked post is published again after a
 *   pause (200 ms doubling to 2 s) for up to `retryMs`; then, or when more than `maxWaiting` posts
 *   wait, it goes to `lost` (the stream mode owes its author's window from the post's time: the
 *   backfill reads it again). Nothing is dropped.
 * - Without RabbitMQ (none configured, not connected, no queue bound yet, a publish lost with the
 *   connection) the holder records the post itself, one batch at a time, as before.
 * A post published again may reach the queue twice; hits are unique per monitor and tweet.
 */
import type { Logger } from '@sts/common';
import { PublishError, type AmqpClient } from '@sts/messaging';
import type { SocialTweet } from '@sts/social';
import { partitionOf, toStreamPost } from './domain/streamPost';

export interface StreamHandoffOptions {
  /** null: no RabbitMQ; every post is recorded here */
  amqp: Pick<AmqpClient, 'publish' | 'isConnected'> | null;
  partitions: number;
  /** posts waiting (unconfirmed, refused and retried, recorded here) at most; default 20,000 */
  maxWaiting?: number;
  /** how long a post the full queue refuses is offered again before it is owed; default 30 s */
  retryMs?: number;
  /**
   * records posts in this process; resolves with those it could not record (rejects when none
   * may be counted as recorded)
   */
  recordHere(tweets: SocialTweet[]): Promise<SocialTweet[]>;
  /** a post the broker confirmed (`recorded` false) or this process recorded (true) */
  handedOff(tweet: SocialTweet, recorded: boolean): void;
  /** posts neither handed off nor recorded: the caller owes their authors' windows */
  lost(tweets: readonly SocialTweet[], why: string): void;
  logger: Logger;
}

const HERE_BATCH = 100;

export class StreamHandoff {
  private readonly waiting = new Map<string, SocialTweet>();
  private readonly work = new Set<Promise<void>>();
  private here: SocialTweet[] = [];
  private recordingHere: Promise<void> | null = null;
  private readonly maxWaiting: number;
  private readonly retryMs: number;
  private closing = false;

  constructor(private readonly options: StreamHandoffOptions) {
    this.maxWaiting = options.maxWaiting ?? 20_000;
    this.retryMs = options.retryMs ?? 30_000;
  }

  /** posts not handed off yet */
  size(): number {
    return this.waiting.size;
  }

  /** the creation of the oldest post not handed off yet, or null (the saved position stays behind it) */
  oldestWaiting(): Date | null {
    let oldest: Date | null = null;
    for (const t of this.waiting.values()) if (oldest === null || t.createdAt < oldest) oldest = t.createdAt;
    return oldest;
  }

  push(tweet: SocialTweet): void {
    if (this.waiting.has(tweet.id)) return;
    if (this.waiting.size >= this.maxWaiting) return this.options.lost([tweet], 'too many posts wait for RabbitMQ');
    this.waiting.set(tweet.id, tweet);
    const { amqp } = this.options;
    if (!amqp?.isConnected()) return this.recordLater(tweet);
    this.track(this.publish(amqp, tweet));
  }

  private track(p: Promise<void>): void {
    this.work.add(p);
    void p.finally(() => this.work.delete(p));
  }

  private async publish(amqp: NonNullable<StreamHandoffOptions['amqp']>, tweet: SocialTweet): Promise<void> {
    const post = toStreamPost(tweet);
    const partition = partitionOf(post.target, this.options.partitions);
    const started = Date.now();
    for (let pause = 200; ; pause = Math.min(2 * pause, 2000)) {
      try {
        await amqp.publish('x.stream.post', post, { messageId: tweet.id, headers: {}, partition, requireRoute: true });
        this.waiting.delete(tweet.id);
        this.options.handedOff(tweet, false);
        return;
      } catch (err) {
        if (!(err instanceof PublishError) || err.code !== 'NACKED') {
          // RabbitMQ unavailable or no queue bound: record it here
          return this.recordLater(tweet);
        }
        if (this.closing || Date.now() - started + pause > this.retryMs) {
          this.waiting.delete(tweet.id);
          return this.options.lost([tweet], `the recording queue stayed full for ${Date.now() - started} ms`);
        }
        await new Promise((r) => setTimeout(r, pause));
      }
    }
  }

  private recordLater(tweet: SocialTweet): void {
    this.here.push(tweet);
    if (this.recordingHere) return;
    const run = this.runHere().finally(() => (this.recordingHere = null));
    this.recordingHere = run;
    this.track(run);
  }

  /** the posts to record here, a batch at a time (one target's posts stay in order) */
  private async runHere(): Promise<void> {
    while (this.here.length > 0) {
      const batch = this.here.splice(0, HERE_BATCH);
      try {
        const failed = new Set(await this.options.recordHere(batch));
        for (const t of batch) if (!failed.has(t)) this.options.handedOff(t, true);
        if (failed.size > 0) this.options.lost([...failed], 'recording failed');
      } catch (err) {
        this.options.lost(batch, err instanceof Error ? err.message : String(err));
      } finally {
        for (const t of batch) this.waiting.delete(t.id);
      }
    }
  }

  /**
   * Stops offering refused posts again (they go to `lost`; the holder is stopping, and its saved
   * position is behind them, so the next holder's gap covers them), then drains.
   */
  async close(): Promise<void> {
    this.closing = true;
    await this.drain();
  }

  /** resolves when every post pushed so far is handed off, recorded or handed to `lost` */
  async drain(): Promise<void> {
    while (this.work.size > 0) await Promise.all([...this.work]);
  }
}
