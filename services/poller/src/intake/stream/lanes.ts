/**
 * The holder's recording of streamed posts, off the read loop: posts are spread over `lanes`
 * lanes by author (one target's posts always take the same lane, so they are recorded in order),
 * each lane recording what waits in it as one batch while the others run in parallel. What waits
 * is bounded (`maxWaiting` posts in all): a post beyond the bound, or in a batch whose recording
 * failed, is handed to `lost` (the stream mode owes its author's window from the post's time,
 * and the backfill reads it again), so a burst costs memory up to the bound and loses nothing.
 */
import type { SocialTweet } from '@sts/social';

export interface StreamLanesOptions {
  /** parallel lanes; default 8 */
  lanes?: number;
  /** posts waiting in all lanes at most; default 20,000 */
  maxWaiting?: number;
  /** posts recorded in one batch at most; default 100 */
  maxBatch?: number;
  /** records one lane's batch; rejects when nothing of it may be counted as recorded */
  record(tweets: SocialTweet[]): Promise<void>;
  /** posts not recorded (the bound, a failure): the caller owes their authors' windows */
  lost(tweets: readonly SocialTweet[], why: string): void;
}

interface Lane {
  waiting: SocialTweet[];
  recording: SocialTweet[];
  running: Promise<void> | null;
}

function laneOf(author: string, lanes: number): number {
  let h = 0;
  for (let i = 0; i < author.length; i++) h = (Math.imul(h, 31) + author.charCodeAt(i)) | 0;
  return Math.abs(h) % lanes;
}

export class StreamLanes {
  private readonly lanes: Lane[];
  private waiting = 0;
  private readonly maxWaiting: number;
  private readonly maxBatch: number;

  constructor(private readonly options: StreamLanesOptions) {
    this.lanes = Array.from({ length: options.lanes ?? 8 }, () => ({ waiting: [], recording: [], running: null }));
    this.maxWaiting = options.maxWaiting ?? 20_000;
    this.maxBatch = options.maxBatch ?? 100;
  }

  /** posts waiting to be recorded */
  size(): number {
    return this.waiting;
  }

  /** the creation of the oldest post not yet recorded, or null (the saved position stays behind it) */
  oldestWaiting(): Date | null {
    let oldest: Date | null = null;
    for (const l of this.lanes)
      for (const t of [...l.recording, ...l.waiting]) if (oldest === null || t.createdAt < oldest) oldest = t.createdAt;
    return oldest;
  }

  push(tweet: SocialTweet): void {
    if (this.waiting >= this.maxWaiting) return this.options.lost([tweet], 'the recording queue is full');
    const lane = this.lanes[laneOf(tweet.author.username.toLowerCase(), this.lanes.length)]!;
    lane.waiting.push(tweet);
    this.waiting++;
    lane.running ??= this.run(lane);
  }

  private async run(lane: Lane): Promise<void> {
    while (lane.waiting.length > 0) {
      // at most `maxBatch` posts a transaction: a burst's backlog is recorded in bounded steps
      const batch = lane.waiting.splice(0, this.maxBatch);
      lane.recording = batch;
      try {
        await this.options.record(batch);
      } catch (err) {
        this.options.lost(batch, err instanceof Error ? err.message : String(err));
      } finally {
        this.waiting -= batch.length;
        lane.recording = [];
      }
    }
    lane.running = null;
  }

  /** resolves when every post pushed so far is recorded (or handed to `lost`) */
  async drain(): Promise<void> {
    for (;;) {
      const running = this.lanes.flatMap((l) => (l.running ? [l.running] : []));
      if (running.length === 0) return;
      await Promise.all(running);
    }
  }
}
