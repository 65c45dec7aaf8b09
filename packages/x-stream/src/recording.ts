/**
 * Every replica's share of recording streamed posts (`x.stream.post`, published by the holder:
 * handoff.ts). There are `partitions` queues `<prefix>.<k>`; a target's posts all go to
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
 *   (the poller's StreamPort `recordPosts`). A target's posts are all on one queue and taken in delivery order; as
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
 * - Out while its database is unreachable: a replica whose posts go back to the queue because
 *   the database is unavailable (isDatabaseUnavailable; not a refused write) steps out of the
 *   recording: it cancels its consumers, the members' included (the others' share grows, and the
 *   broker makes the next waiting consumer active), and only once the broker delivers nothing more
 *   to it returns what it holds (nack, requeue): those posts go to the next consumer, never back to
 *   it (as in a hand-over, beside that consumer's first ones). A batch whose database work has
 *   not ended after `writeTimeoutMs` (a black-holed connection never fails) counts as unavailable
 *   alike: its posts are returned, and should the write end later, hits are unique per monitor and
 *   tweet. Every `rejoinMs` it asks its database; once it answers, it subscribes again.
 */
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import { isDatabaseUnavailable } from '@sts/db';
import type { AmqpClient, ConsumeOutcome, Envelope } from '@sts/messaging';
import type { SocialTweet } from '@sts/social';
import { byTarget, fromStreamPost } from './domain/streamPost';
import { Limiter } from './limiter';
import type { RecordedBatch, StreamPort } from './port';

export interface StreamRecordingOptions {
  amqp: Pick<AmqpClient, 'consume' | 'cancel' | 'queueStats'>;
  /** the poller's recording */
  port: Pick<StreamPort, 'recordPosts'>;
  /** a database read: whether this replica can record again */
  ping(): Promise<unknown>;
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
  /** how often a replica out of the recording asks its database whether it answers; default 2 s */
  rejoinMs?: number;
  /**
   * how long a batch's database work may go without an end before the database counts as
   * unreachable; default 20 s (beyond the database's statement timeout, STATEMENT_TIMEOUT)
   */
  writeTimeoutMs?: number;
  /** recording transactions this replica runs at a time (all queues together); default 4 */
  concurrency?: number;
  /** how far before a failed post its target is owed (POLL_OVERLAP_SECONDS) */
  overlapMs: number;
  recorded?(batch: RecordedBatch): void;
}

interface Waiting {
  tweet: SocialTweet;
  part: Partition;
  done: (outcome: ConsumeOutcome) => void;
}

interface Partition {
  queue: string;
  /** delivered, not yet taken into a batch (in delivery order) */
  waiting: Waiting[];
  /** the last delivery (ms), 0: none */
  lastDelivery: number;
  /** subscribed and not yet known cancelled: a post requeued now could come back here */
  delivering: boolean;
  /** to requeue once the broker delivers nothing more to this replica (stepping out) */
  held: Waiting[];
}

/** `work`, or an unavailable-database error (ETIMEDOUT) after `ms`; `work` itself runs on */
function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(Object.assign(new Error(`the database did not answer in ${ms} ms`), { code: 'ETIMEDOUT' })),
      ms,
    );
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

interface BatchResult {
  /** the outcome of each post not simply acknowledged */
  outcomes: Map<SocialTweet, ConsumeOutcome>;
  /** posts went back to the queue because the database is unavailable */
  unreachable: boolean;
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
  /** out of the recording (its database unreachable) until it rejoins */
  private out = false;
  private rejoinTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: StreamRecordingOptions) {
    this.limiter = new Limiter(options.concurrency ?? 4);
    this.parts = Array.from({ length: options.partitions }, (_, k) => ({
      queue: `${options.queuePrefix}.${k}`,
      waiting: [],
      lastDelivery: 0,
      delivering: false,
      held: [],
    }));
  }

  private get writeTimeoutMs(): number {
    return this.options.writeTimeoutMs ?? 20_000;
  }

  private get membersQueue(): string {
    return `${this.options.queuePrefix}.members`;
  }

  async start(): Promise<void> {
    await this.join();
    const every = this.options.rebalanceMs ?? 2000;
    this.timer = setInterval(() => {
      this.rebalancing = this.rebalancing.then(() => this.rebalance(every));
    }, every);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    clearTimeout(this.rejoinTimer);
    await this.rebalancing;
    await this.leave();
  }

  /** consumes the members' queue and every partition */
  private async join(): Promise<void> {
    // presence: bound to the partition after the last, which nothing is published to
    await this.options.amqp.consume({
      queue: this.membersQueue,
      bindings: ['x.stream.post'],
      partition: this.parts.length,
      prefetch: 1,
      handler: () => Promise.resolve('dead-letter'),
    });
    for (let k = 0; k < this.parts.length; k++) await this.subscribe(k);
  }

  /** cancels every consumer; what it holds is requeued once its queue delivers nothing more here */
  private async leave(): Promise<void> {
    await Promise.all(this.parts.map((p) => this.unsubscribe(p)));
    await this.options.amqp.cancel(this.membersQueue);
  }

  private unsubscribe(part: Partition): Promise<void> {
    return this.options.amqp.cancel(part.queue, {
      cancelled: () => {
        part.delivering = false;
        for (const w of part.held.splice(0)) w.done('requeue');
      },
    });
  }

  /** returns a post to the queue, once it can only go to another consumer */
  private hold(w: Waiting): void {
    if (w.part.delivering) w.part.held.push(w);
    else w.done('requeue');
  }

  /**
   * The database is unreachable: out of the recording (the others take its partitions and what
   * it held), back once the database answers.
   */
  private stepOut(): void {
    if (this.out || this.stopped) return;
    this.out = true;
    this.options.logger.warn('X stream recording: the database is unavailable, this replica steps out');
    for (const part of this.parts) for (const w of part.waiting.splice(0)) this.hold(w);
    this.rebalancing = this.rebalancing.then(async () => {
      if (this.stopped) return;
      await this.leave().catch((err: unknown) =>
        this.options.logger.warn('X stream recording: stepping out failed', { err: errorMessage(err) }),
      );
      this.rejoinLater();
    });
  }

  private rejoinLater(): void {
    if (this.stopped) return;
    this.rejoinTimer = setTimeout(() => {
      this.rebalancing = this.rebalancing.then(() => this.rejoin());
    }, this.options.rejoinMs ?? 2000);
  }

  /** back in the recording once the database answers (else asks again later) */
  private async rejoin(): Promise<void> {
    if (this.stopped) return;
    try {
      await within(this.options.ping(), this.writeTimeoutMs);
    } catch {
      return this.rejoinLater();
    }
    try {
      this.out = false;
      await this.join();
      this.options.logger.info('X stream recording: the database answers, this replica records again');
    } catch (err) {
      this.options.logger.warn('X stream recording: rejoining failed', { err: errorMessage(err) });
      this.out = true;
      await this.leave().catch(() => undefined);
      this.rejoinLater();
    }
  }

  private subscribe(k: number): Promise<void> {
    const part = this.parts[k]!;
    part.delivering = true;
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
      const w = { tweet: fromStreamPost(env.payload), part, done };
      if (this.out) return this.hold(w);
      part.waiting.push(w);
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
      const { outcomes, unreachable } = await this.recordBatch(batch.map((w) => w.tweet));
      if (unreachable) this.stepOut();
      for (const w of batch) {
        const outcome = outcomes.get(w.tweet) ?? 'ack';
        if (outcome === 'requeue' && this.out) this.hold(w);
        else w.done(outcome);
      }
    }
  }

  /** up to `batchSize` waiting posts, oldest first per partition, the partitions in turn leading */
  private take(): Waiting[] {
    if (this.out) return [];
    const room = this.options.batchSize ?? 1000;
    const batch: Waiting[] = [];
    for (let i = 0; i < this.parts.length && batch.length < room; i++) {
      const part = this.parts[(this.next + i) % this.parts.length]!;
      batch.push(...part.waiting.splice(0, room - batch.length));
    }
    this.next = (this.next + 1) % this.parts.length;
    return batch;
  }

  /** records a batch: the outcome of each post not simply acknowledged */
  private async recordBatch(tweets: SocialTweet[]): Promise<BatchResult> {
    const outcomes = new Map<SocialTweet, ConsumeOutcome>();
    const targets = byTarget(tweets);
    let failed: Map<string, string>;
    let unreachable = false;
    try {
      const r = await within(this.options.port.recordPosts(tweets, this.limiter), this.writeTimeoutMs);
      this.options.recorded?.(r);
      failed = r.failed;
    } catch (err) {
      failed = new Map([...targets.keys()].map((t) => [t, errorMessage(err)]));
      unreachable = isDatabaseUnavailable(err);
    }
    for (const [target, why] of failed) {
      const list = targets.get(target)!;
      // the database is unavailable: owing would fail alike (each after its connection timeout)
      const err = unreachable ? null : await this.oweFailed(target, list, why);
      if (err === undefined) continue;
      if (err !== null) unreachable = isDatabaseUnavailable(err);
      this.options.logger.warn('X stream posts not recorded: returned to the queue', {
        target,
        posts: list.length,
        why,
        ...(err !== null && { err: errorMessage(err) }),
      });
      for (const t of list) outcomes.set(t, 'requeue');
    }
    return { outcomes, unreachable };
  }

  /** owes a target's posts not recorded to the backfill: undefined when done, else why not */
  private async oweFailed(target: string, list: SocialTweet[], why: string): Promise<unknown> {
    let oldest = list[0]!.createdAt;
    for (const t of list) if (t.createdAt < oldest) oldest = t.createdAt;
    try {
      await within(this.options.owe(target, new Date(oldest.getTime() - this.options.overlapMs)), this.writeTimeoutMs);
      this.options.logger.warn('X stream posts not recorded: owed to the backfill', {
        target,
        posts: list.length,
        why,
      });
      return undefined;
    } catch (err) {
      return err ?? new Error('owing failed');
    }
  }

  /** gives up the partitions this replica is delivered beyond its share of them */
  private async rebalance(everyMs: number): Promise<void> {
    if (this.stopped || this.out) return;
    try {
      const { consumers } = await this.options.amqp.queueStats(this.membersQueue);
      if (consumers <= 1) return;
      const share = Math.ceil(this.parts.length / consumers);
      const busy = this.parts.filter((p) => Date.now() - p.lastDelivery < everyMs);
      for (const part of busy.slice(share)) {
        if (this.stopped || this.out) return;
        await this.unsubscribe(part);
        part.lastDelivery = 0;
        await this.subscribe(this.parts.indexOf(part));
      }
    } catch (err) {
      this.options.logger.warn('X stream recording rebalance failed', {
        err: errorMessage(err),
      });
    }
  }
}
