/**
 * Composition of the X Activity API intake (SOCIAL_SOURCE=x, X_INTAKE_ACTIVITY not `off`): its
 * lease (the filtered stream's election code, its own `x-activity` row: one activity stream
 * connection per app, taken over by another replica within the lease when the holder dies), the
 * XAA client over the fleet's X governor, the reconciler within X_ACTIVITY_MAX_SUBS, and the
 * events recorded through the profile repository. main.ts starts it beside the tick.
 */
import type { Registry } from 'prom-client';
import type { Logger } from '@sts/common';
import type { Db } from '@sts/db';
import type { XBilling, XGovernor } from '@sts/social';
import { createXActivityApi, SubscriptionReconciler } from '@sts/x-activity';
import { createProfileRepository } from '../../adapters/profiles';
import type { HitWriter } from '../../adapters/hitWriter';
import type { ScheduleStore } from '../../adapters/scheduleStore';
import { recordPosts } from '../../record/posts';
import { createPostDeletes } from '../../adapters/postDeletes';
import type { ActivityIntakeMode } from '../../domain/activity';
import { createStreamElection, type WriteLane } from '@sts/x-stream';
import { createActivityEvents } from './events';
import { ActivityIntake } from './intake';
import { createActivityMetrics } from './metrics';
import { createActivityRepository } from './repository';

export interface ActivityIntakeEnv {
  X_API_BASE_URL: string;
  X_BEARER_TOKEN?: string | undefined;
  X_TIMEOUT_MS: number;
  X_INTAKE_ACTIVITY: ActivityIntakeMode;
  X_ACTIVITY_MAX_SUBS: number;
  X_STREAM_LEASE_SECONDS: number;
}

/** post.create events come one at a time, in order: their writes need no lane of their own */
const DIRECT: WriteLane = { run: (task) => task() };

/** the tag on this service's subscriptions (others' are left alone) */
const TAG = 'sts';

export function buildActivityIntake(
  env: ActivityIntakeEnv,
  deps: {
    db: Db;
    /** post.create (X_INTAKE_ACTIVITY=all) is recorded like a streamed post */
    schedule: ScheduleStore;
    writer: HitWriter;
    governor: XGovernor;
    /** the billed events are counted here (the X client's) */
    billing?: XBilling;
    logger: Logger;
    registry: Registry;
    /** tests: shorter than the defaults */
    syncMs?: number;
    stallMs?: number;
  },
): ActivityIntake {
  const repository = createActivityRepository(deps.db);
  const api = createXActivityApi({
    baseUrl: env.X_API_BASE_URL,
    bearerToken: env.X_BEARER_TOKEN ?? '',
    governor: deps.governor,
    timeoutMs: env.X_TIMEOUT_MS,
  });
  return new ActivityIntake({
    mode: env.X_INTAKE_ACTIVITY,
    election: createStreamElection({
      db: deps.db,
      logger: deps.logger,
      name: 'x-activity',
      ttlMs: env.X_STREAM_LEASE_SECONDS * 1000,
    }),
    api,
    reconciler: new SubscriptionReconciler({ api, tag: TAG, max: env.X_ACTIVITY_MAX_SUBS }),
    repository,
    onEvent: createActivityEvents({
      repository,
      profiles: createProfileRepository(deps.db),
      posts: (posts) => recordPosts({ schedule: deps.schedule, writer: deps.writer }, posts, DIRECT),
      deletes: createPostDeletes(deps.db),
      now: () => new Date(),
    }),
    logger: deps.logger,
    metrics: createActivityMetrics(deps.registry),
    ...(deps.billing && { billing: deps.billing }),
    ...(deps.syncMs !== undefined && { syncMs: deps.syncMs }),
    ...(deps.stallMs !== undefined && { stallMs: deps.stallMs }),
  });
}
