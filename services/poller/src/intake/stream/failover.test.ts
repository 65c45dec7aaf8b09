/**
 * The stream holder fails over (lease in PostgreSQL, stream/election.ts), on the real PostgreSQL
 * against the fake X: several replicas, the holder process killed (SIGKILL) or cut off from
 * PostgreSQL (its connections black-holed, no socket closed) while posts keep coming: another
 * replica holds the stream, every post is one hit, and exactly one stream is connected after
 * (a revived old holder opens no second one).
 */
import { createAccount, spawnService, TcpProxy, waitFor } from '@sts/testing';
import { createDbClient, type Db } from '@sts/db';
import { parseRule } from '@sts/x-stream/src/domain/streamRules';
import { useStreamHarness } from '../../../test/streamMode';

const h = useStreamHarness('stream-failover-test');
let db: Db;
beforeEach(() => {
  ({ db } = h);
});

const NAMES = ['fo_a', 'fo_b', 'fo_c'];

async function watch(): Promise<void> {
  for (const u of NAMES) h.fake.state.addUser({ username: u });
  const account = await createAccount(db, 'starter');
  await db.monitor.createMany({
    data: NAMES.map((u) => ({ accountId: account.id, targetUsername: u, targetKey: u, keywords: [] })),
  });
}

const ruled = (): string[] => h.stream.rules().flatMap((r) => parseRule({ value: r.value, tag: r.tag }) ?? []);

/** posts every `everyMs` to the watched accounts until stopped; the ids posted */
function keepPosting(everyMs = 150): { ids: string[]; stop: () => void } {
  const ids: string[] = [];
  let i = 0;
  const timer = setInterval(() => {
    ids.push(h.fake.state.post({ author: NAMES[i % NAMES.length]!, text: `post ${i}` }).id);
    i++;
  }, everyMs);
  return { ids, stop: () => clearInterval(timer) };
}

/** every post one hit (one monitor per account), one event per hit */
async function expectEveryPostOneHit(ids: string[]): Promise<void> {
  await waitFor(async () => (await db.hit.count()) >= ids.length, 30_000);
  const hits = await db.hit.findMany({ select: { tweetId: true } });
  expect(hits.map((x) => x.tweetId).sort()).toEqual([...ids].sort());
  expect(await db.outboxEvent.count()).toBe(hits.length);
}

describe('X stream failover', () => {
  it('three replicas: the holder process is SIGKILLed while posts keep coming; one survivor holds the only stream', async () => {
    await watch();
    const proc = spawnService('services/poller/src/main.ts', h.processEnv());
    const posting = keepPosting();
    try {
      await proc.waitForLine(/X stream connected/);
      await waitFor(() => ruled().length === NAMES.length);
      const replicas = [h.startMode(), h.startMode()];
      await new Promise((r) => setTimeout(r, 1000));
      expect(replicas.filter((m) => m.isHolder())).toHaveLength(0);
      const connectsBefore = h.stream.connects();
      proc.child.kill('SIGKILL');
      await proc.exited;
      await waitFor(() => replicas.some((m) => m.isHolder()) && h.stream.connections() === 1, 20_000);
      // posts keep coming a while under the new holder
      await new Promise((r) => setTimeout(r, 1500));
      posting.stop();
      await expectEveryPostOneHit(posting.ids);
      expect(replicas.filter((m) => m.isHolder())).toHaveLength(1);
      expect(h.stream.connections()).toBe(1);
      expect(h.stream.connects()).toBe(connectsBefore + 1);
      expect(h.fake.requests.count({ status: 429 })).toBe(0);
    } finally {
      posting.stop();
      proc.child.kill('SIGKILL');
      await proc.exited;
    }
  });

  it('a holder cut off from PostgreSQL (no socket closed) gives the stream up; another takes it; back, it opens no second', async () => {
    await watch();
    const proxy = new TcpProxy('127.0.0.1', Number(new URL(h.dbHandle.url).port || 5432));
    await proxy.listen();
    const cutDb = createDbClient({ url: proxy.urlFor(h.dbHandle.url), poolSize: 4 });
    const posting = keepPosting();
    try {
      const first = h.startMode({}, undefined, { db: cutDb });
      await waitFor(() => first.isHolder() && h.stream.connections() === 1 && ruled().length === NAMES.length);
      const other = h.startMode();
      await new Promise((r) => setTimeout(r, 1000));
      expect(other.isHolder()).toBe(false);
      proxy.blackhole();
      await waitFor(() => other.isHolder() && !first.isHolder() && h.stream.connections() === 1, 20_000);
      // PostgreSQL comes back for the old holder: its connections reset, the lease is taken
      proxy.cut();
      proxy.restore();
      await new Promise((r) => setTimeout(r, 2000));
      posting.stop();
      expect(first.isHolder()).toBe(false);
      expect(h.stream.connections()).toBe(1);
      await expectEveryPostOneHit(posting.ids);
    } finally {
      posting.stop();
      await Promise.all(h.running.splice(0).map((m) => m.stop()));
      await cutDb.$disconnect().catch(() => undefined);
      await proxy.close();
    }
  });
});
