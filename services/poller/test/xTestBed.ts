/**
 * What the poller's X-mode tests (search.test.ts, timeline.test.ts) run on: the store bed (a test
 * database and a Redis prefix: the fleet's governor, leases and user cache) and the fake X, opened
 * once per file and closed, each cleaned up, after it.
 */
import { startFakeX, type FakeX, type FakeXOptions, openTestStore, type TestStore } from '@sts/testing';

export interface XTestBed extends TestStore {
  fake: FakeX;
}

export async function openXTestBed(opts: { poolSize: number; fakeX?: FakeXOptions }): Promise<XTestBed> {
  const store = await openTestStore({ poolSize: opts.poolSize });
  const fake = await startFakeX(opts.fakeX);
  return {
    ...store,
    fake,
    async close() {
      await fake.stop();
      await store.close();
    },
  };
}
