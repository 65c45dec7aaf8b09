/**
 * What the use-cases' tests on the real store (monitors.test.ts, rules.test.ts,
 * queryMonitors.test.ts) share: @sts/testing's test store (a database and a Redis prefix with a
 * client on it), opened once per file; the preview's cache on that client; and `rejection()`, the
 * error a call is refused with.
 */
import { openTestStore, type TestStore } from '@sts/testing';
import type { PreviewOptions } from '../src/index';

export interface StoreBed extends TestStore {
  /** the preview's cache, on `redis` */
  cache: NonNullable<PreviewOptions['cache']>;
}

export async function openStoreBed(opts: { poolSize: number }): Promise<StoreBed> {
  const store = await openTestStore(opts);
  const { redis } = store;
  return {
    ...store,
    cache: {
      get: (k) => redis.get(k),
      set: async (k, v, ttl) => void (await redis.set(k, v, 'EX', ttl)),
    },
  };
}

/** the error `p` rejects with (it must reject) */
export async function rejection(p: Promise<unknown>): Promise<Error & Record<string, unknown>> {
  try {
    await p;
  } catch (err) {
    return err as Error & Record<string, unknown>;
  }
  throw new Error('expected a rejection');
}
