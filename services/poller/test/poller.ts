/**
 * The poller as the scenario tests build it: `testPoller({ db, redis }, options)` is createPoller
 * on the test's database and Redis with the environment's defaults (the zod schema's, read here,
 * never repeated), and `plans` the plan intervals the tests use.
 */
import { createLogger, type RedisClient } from '@sts/common';
import type { Db } from '@sts/db';
import { createHitWriter } from '../src/adapters/hitWriter';
import { createRedisLeases } from '../src/adapters/lease';
import { createScheduleStore } from '../src/adapters/scheduleStore';
import { loadPollerEnv } from '../src/env';
import { createPoller, type Poller, type PollerOptions } from '../src/poller';

/** the tests' plan intervals: Free every five minutes, Starter every minute */
export const plans = { free: { pollIntervalSec: 300 }, starter: { pollIntervalSec: 60 } };

/** the scenario tests' small poller: every target due each second, 4 polls at once, pages of 5 tweets */
export const smallPoller = { intervals: { plans, overrideSec: 1 }, concurrency: 4, batchSize: 5 };

const env = loadPollerEnv({});

type Defaulted =
  'schedule' | 'writer' | 'logger' | 'intervals' | 'concurrency' | 'batchSize' | 'pollTimeoutMs' | 'claimLimit';

export type TestPollerOptions = Omit<PollerOptions, 'leases' | Defaulted> & Partial<Pick<PollerOptions, Defaulted>>;

const quiet = createLogger({ service: 'poller-test', level: 'error' });

/** a poller on `db` and `redis`; intervals default to `plans`, the rest to the environment's defaults (POLL_*) */
export function testPoller(deps: { db: Db; redis: RedisClient }, options: TestPollerOptions): Poller {
  return createPoller({
    schedule: createScheduleStore(deps.db),
    writer: createHitWriter(deps.db),
    leases: createRedisLeases(deps.redis),
    logger: quiet,
    intervals: { plans },
    concurrency: env.POLL_CONCURRENCY,
    batchSize: env.POLL_BATCH_SIZE,
    pollTimeoutMs: env.POLL_TIMEOUT_MS,
    claimLimit: env.POLL_CLAIM_LIMIT,
    ...options,
  });
}
