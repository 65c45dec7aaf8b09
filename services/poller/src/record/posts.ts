/**
 * Records tweets the stream (or a backfill) delivered through the same rules as polled ones: the
 * targets' active monitors (ScheduleStore.monitorsForMany), the hits of src/record `pageHits`,
 * and writes bounded like `record()`'s chunks (HIT_CHUNK hits): hits with their monitor.hit
 * events and the targets' cursors, unique on monitor + tweet, so a tweet the stream and a
 * backfill both bring is one hit and one event. A transaction per target (record() for each)
 * was far slower under a busy stream's load (docs/benchmarks.md), hence the
 * packing (`recordMany`: one statement for many targets); a popular target's hits still go
 * through `record()` in chunks.
 */
import type { SocialTweet } from '@sts/social';
import { byTarget, type RecordedBatch, type WriteLane } from '@sts/x-stream';
import { compileMonitors } from '../domain/hits';
import { HIT_CHUNK, type CursorState, type NewHit } from '../domain/pipeline';
import type { HitWriter } from '../adapters/hitWriter';
import type { ScheduleStore } from '../adapters/scheduleStore';
import { pageHits, record, type Batch } from './record';

interface TargetHits {
  targetKey: string;
  hits: NewHit[];
  cursor: CursorState;
}

/**
 * Records tweets of any authors: one read of their monitors, then writes of at most HIT_CHUNK
 * hits each (through `lane`): targets with few hits packed together
 * (HitWriter.recordMany: their hits, events and cursors in one statement), a target
 * with more hits than that alone through the shared, chunked `record()`.
 */
export async function recordPosts(
  deps: { schedule: Pick<ScheduleStore, 'monitorsForMany'>; writer: Pick<HitWriter, 'recordBatch' | 'recordMany'> },
  tweets: readonly SocialTweet[],
  lane: WriteLane,
  now: () => Date = () => new Date(),
): Promise<RecordedBatch> {
  const targets = byTarget(tweets);
  const out: RecordedBatch = { hits: 0, newHits: [], failed: new Map() };
  if (targets.size === 0) return out;
  const monitorsOf = await deps.schedule.monitorsForMany([...targets.keys()]);
  const at = now();
  const packs: TargetHits[][] = [];
  let pack: TargetHits[] = [];
  let packed = 0;
  const alone: Batch[] = [];
  // in key order: concurrent transactions lock cursor rows alike (no deadlock)
  for (const [targetKey, list] of [...targets].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))) {
    const monitors = compileMonitors(monitorsOf.get(targetKey) ?? []);
    if (monitors.length === 0) continue;
    let newest = list[0]!;
    for (const t of list) if (BigInt(t.id) > BigInt(newest.id)) newest = t;
    // position null: the stream leaves the target's poll position (search/timeline modes) alone
    const cursor = { lastTweetId: newest.id, lastTweetAt: newest.createdAt, position: null };
    const hits = pageHits(list, monitors, at);
    if (hits.length > HIT_CHUNK) {
      alone.push({ targetKey, tweets: list, monitors, cursor, polledAt: at });
      continue;
    }
    if (packed + hits.length > HIT_CHUNK) {
      packs.push(pack);
      pack = [];
      packed = 0;
    }
    pack.push({ targetKey, hits, cursor });
    packed += hits.length;
  }
  if (pack.length > 0) packs.push(pack);
  const done = (fresh: NewHit[]) => {
    out.hits += fresh.length;
    out.newHits.push(...fresh);
  };
  const failed = (keys: string[], err: unknown) => {
    for (const k of keys) out.failed.set(k, err instanceof Error ? err.message : String(err));
  };
  await Promise.all([
    ...packs.map((p) =>
      lane
        .run(() => deps.writer.recordMany(p, at))
        .then(done, (err: unknown) =>
          failed(
            p.map((b) => b.targetKey),
            err,
          ),
        ),
    ),
    ...alone.map((b) =>
      lane.run(() => record(deps.writer, b)).then(done, (err: unknown) => failed([b.targetKey], err)),
    ),
  ]);
  return out;
}
