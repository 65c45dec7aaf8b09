/**
 * Every replica's share of recording streamed posts (`x.stream.post`, published by the holder:
 * stream/handoff.ts). There are `partitions` queues `<prefix>.<k>`; a target's posts all go to
 * partition hash(target) mod `partitions` (domain/streamPost.ts). Each queue is a quorum queue
 * with `x-single-active-consumer`: every replica consumes every queue, the broker delivers a
 * queue to one of them at a time, in order, and hands it to the next when that one stops or
 * dies (its unacknowledged posts go back to the queue). Each queue is bounded (`x-max-length`,
 * `x-overflow: reject-publish`: the holder's back-pressure).
 *
 * - Batched across queues, in order per target: what waits on every queue this replica is
 *   delivered (up to `prefetch` each) is recorded a batch at a time, at most `batchSize` posts,
 *   one batch after the other (the next one takes what came while this one was written, so a
 *   batch grows with the load and the statements per post shrink): one read of the targets'
 *   monitors, then their hits, events and cursors in statements of at most HIT_CHUNK hits
 *   (stream/recorder.ts). A target's posts are all on one queue and taken in delivery order; as
 *   batches do not overlap, they are recorded in order. A post is acknowledged only once its
 *   batch is written (a replica that dies before leaves it to the broker to deliver again; hits
 *   are unique per monitor and tweet). A target whose recording failed is owed to the backfill
 *   from its oldest post's time (`x_stream_owed`, reason `lost`) and its posts acknowledged; if
 *   even that fails they are returned to the queue.
 * - Shared: the broker makes the first subscriber active on every queue. Every `rebalanceMs`
 *   a replica counts the replicas (the consumers of `<prefix>.members`, a queue every replica
 *   consumes and nothing is published to: a single-active-consumer queue counts only its active
 *   consumer) and, while it is delivered more than
 *   its share of the partitions, gives the surplus up (cancel, subscribe again at the back of
 *   the line), so the next replica takes them. During such a hand-over (and after a consumer's
 *   death) the old consumer's posts in flight may be recorded beside the new one's first; hits are
 *   unique per monitor and tweet and cursors only move forward, so nothing is lost or doubled.
 */
import type { Logger } from '@sts/common';
import type { AmqpClient, ConsumeOutcome, Envelope } from '@sts/messaging';
import type { SocialTweet } from '@sts/social';
import type { PollerRepository } from '../../adapters/repository';
import { fromStreamPost } from '../../domain/streamPost';
import { byTarget, Limiter, recordTweets, type RecordedBatch } from './recorder';

export interface StreamRecordingOptions {
  amqp: Pick<AmqpClient, 'consume' | 'cancel' | 'queueStats'>;
  repository: PollerRepository;
  /** owes a target's window from `since` to the backfill (x_stream_owed) */
  owe(target: string, since: Date): Promise<void>;
  logger: Logger;
  partitions: number;
  /** queue name prefix: queues `<prefix>.<k>` */
  queuePrefix: string;
  /** posts waiting per queue at most (`x-max-length`) */
  maxLength: number;
  /** unacknowledged deliveries per queue; default 200 */
  prefetch?: number;
  /** posts recorded together at most (taken from every queue); default 1,000 */
  batchSize?: number;
  /** how often the share of partitions is checked; default 2 s */
  rebalanceMs?: number;
  /** recording transactions this replica runs at a time (all queues together); default 4 */
  concurrency?: number;
  /** how far before a failed post its target is owed (POLL_OVERLAP_SECONDS) */
  overlapMs: number;
  recorded?(batch: RecordedBatch): void;
}

interface Waiting {
  tweet: SocialTweet;
  done: (outcome: ConsumeOutcome) => void;
}

interface Partition {
  queue: string;
  /** delivered, not yet taken into a batch (in delivery order) */
  waiting: Waiting[];
  /** the last delivery (ms), 0: none */
  lastDelivery: number;
}

/** the queue arguments every replica declares (part of the queues' identity) */
function recordQueueArguments(maxLength: number): Record<string, string | number | boolean> {
  return { 'x-single-active-consumer': true, 'x-max-length': maxLength };
}

export class StreamRecording {
  private readonly parts: Partition[];
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private rebalancing: Promise<void> = Promise.resolve();
  private readonly limiter: Limiter;
  /** the batch being recorded (one at a time), null: none */
  private running: Promise<void> | null = null;
  /** the partition the next batch starts taking from (each gets its turn to lead) */
  private next = 0;

  constructor(private readonly options: StreamRecordingOptions) {
    this.limiter = new Limiter(options.concurrency ?? 4);
    this.parts = Array.from({ length: options.partitions }, (_, k) => ({
      queue: `${options.queuePrefix}.${k}`,
      waiting: [],
      lastDelivery: 0,
    }));
  }

  private get membersQueue(): string {
    return `${this.options.queuePrefix}.members`;
  }

  async start(): Promise<void> {
    // presence: bound to the partition after the last, which nothing is published to
    await this.options.amqp.consume({
      queue: this.membersQueue,
      bindings: ['x.stream.post'],
      partition: this.parts.length,
      prefetch: 1,
      handler: () => Promise.resolve('dead-letter'),
    });
    for (let k = 0; k < this.parts.length; k++) await this.subscribe(k);
    const every = this.options.rebalanceMs ?? 2000;
    this.timer = setInterval(() => {
      this.rebalancing = this.rebalancing.then(() => this.rebalance(every));
    }, every);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.rebalancing;
    await Promise.all(this.parts.map((p) => this.options.amqp.cancel(p.queue)));
    await this.options.amqp.cancel(this.membersQueue);
  }

  private subscribe(k: number): Promise<void> {
    const part = this.parts[k]!;
    return this.options.amqp.consume({
      queue: part.queue,
      bindings: ['x.stream.post'],
      partition: k,
      queueArguments: recordQueueArguments(this.options.maxLength),
      prefetch: this.options.prefetch ?? 200,
      handler: (env) => this.handle(part, env),
    });
  }

  /** the routing key → handler table of this consumer (one key today) */
  private handle(part: Partition, env: Envelope<'x.stream.post'>): Promise<ConsumeOutcome> {
    part.lastDelivery = Date.now();
    return new Promise((done) => {
      part.waiting.push({ tweet: fromStreamPost(env.payload), done });
      this.kick();
    });
  }

  /** starts recording unless it runs; a post that came as it finished starts it again */
  private kick(): void {
    this.running ??= this.run().finally(() => {
      this.running = null;
      if (this.parts.some((p) => p.waiting.length > 0)) this.kick();
    });
  }

  /** records what waits, a batch at a time, until nothing does; settles each post after its batch */
  private async run(): Promise<void> {
    // the deliveries read with this one (the rest of the socket's data) join its batch
    await new Promise((r) => setImmediate(r));
    for (let batch = this.take(); batch.length > 0; batch = this.take()) {
      const outcomes = await this.recordBatch(batch.map((w) => w.tweet));
      for (const w of batch) w.done(outcomes.get(w.tweet) ?? 'ack');
    }
  }

  /** up to `batchSize` waiting posts, oldest first per partition, the partitions in turn leading */
  private take(): Waiting[] {
    const room = this.options.batchSize ?? 1000;
    const batch: Waiting[] = [];
    for (let i = 0; i < this.parts.length && batch.length < room; i++) {
      const part = this.parts[(this.next + i) % this.parts.length]!;
      batch.push(...part.waiting.splice(0, room - batch.length));
    }
    this.next = (this.next + 1) % this.parts.length;
    return batch;
  }

  /** records a batch; the outcome of each post not simply acknowledged */
  private async recordBatch(tweets: SocialTweet[]): Promise<Map<SocialTweet, ConsumeOutcome>> {
    const outcomes = new Map<SocialTweet, ConsumeOutcome>();
    const targets = byTarget(tweets);
    let failed: Map<string, string>;
    try {
      const r = await recordTweets(this.options.repository, tweets, this.limiter);
      this.options.recorded?.(r);
      failed = r.failed;
    } catch (err) {
      failed = new Map([...targets.keys()].map((t) => [t, err instanceof Error ? err.message : String(err)]));
    }
    for (const [target, why] of failed) {
      const list = targets.get(target)!;
      let oldest = list[0]!.createdAt;
      for (const t of list) if (t.createdAt < oldest) oldest = t.createdAt;
      try {
        await this.options.owe(target, new Date(oldest.getTime() - this.options.overlapMs));
        this.options.logger.warn('X stream posts not recorded: owed to the backfill', {
          target,
          posts: list.length,
          why,
        });
      } catch (err) {
        this.options.logger.warn('X stream posts not recorded: returned to the queue', {
          target,
          posts: list.length,
          why,
          err: err instanceof Error ? err.message : String(err),
        });
        for (const t of list) outcomes.set(t, 'requeue');
      }
    }
    return outcomes;
  }

  /** gives up the partitions this replica is delivered beyond its share of them */
  private async rebalance(everyMs: number): Promise<void> {
    if (this.stopped) return;
    try {
      const { consumers } = await this.options.amqp.queueStats(this.membersQueue);
      if (consumers <= 1) return;
      const share = Math.ceil(this.parts.length / consumers);
      const busy = this.parts.filter((p) => Date.now() - p.lastDelivery < everyMs);
      for (const part of busy.slice(share)) {
        if (this.stopped) return;
        await this.options.amqp.cancel(part.queue);
        part.lastDelivery = 0;
        await this.subscribe(this.parts.indexOf(part));
      }
    } catch (err) {
      this.options.logger.warn('X stream recording rebalance failed', {
        err: err instanceof Error ? err.message : String(err),
      });
    }
  }
}
