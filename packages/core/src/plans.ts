/**
 * Plans and their numbers. The numbers are configuration (PLAN_* variables); the defaults are
 * Free 1,000 calls a month and 10 a minute, Starter 150,000 a month and 30 a minute. Live
 * monitor.hit webhooks need Starter or an active trial; test pings go out on every plan.
 * Monitor limits (PLAN_FREE_MONITORS 1, PLAN_STARTER_MONITORS 3) are separate from PlanLimits so
 * services that never create monitors need not know them; @sts/usecases enforces them.
 */
import { z } from 'zod';

export type PlanName = 'free' | 'starter';

export interface PlanLimits {
  monthlyQuota: number;
  perMinute: number;
  /** how often a monitor's target is polled */
  pollIntervalSec: number;
  liveWebhooks: boolean;
}

export type Plans = Record<PlanName, PlanLimits>;

const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback);

export const planEnv = {
  /** successful API calls a month on Free (docs/plans.md) */
  PLAN_FREE_MONTHLY_QUOTA: positiveInt(1000),
  /** API requests a minute on Free */
  PLAN_FREE_PER_MINUTE: positiveInt(10),
  /** how often a Free monitor's target is polled */
  PLAN_FREE_POLL_INTERVAL_SECONDS: positiveInt(300),
  /** successful API calls a month on Starter */
  PLAN_STARTER_MONTHLY_QUOTA: positiveInt(150_000),
  /** API requests a minute on Starter */
  PLAN_STARTER_PER_MINUTE: positiveInt(30),
  /** how often a Starter monitor's target is polled */
  PLAN_STARTER_POLL_INTERVAL_SECONDS: positiveInt(60),
};

export type PlanEnv = { [K in keyof typeof planEnv]: number };

/** How many monitors an account may have on each plan (paused ones count). */
export const planMonitorEnv = {
  /** monitors a Free account may have (paused ones count) */
  PLAN_FREE_MONITORS: positiveInt(1),
  /** monitors a Starter account may have (paused ones count) */
  PLAN_STARTER_MONITORS: positiveInt(3),
};

export type PlanMonitorEnv = { [K in keyof typeof planMonitorEnv]: number };
export type MonitorLimits = Record<PlanName, number>;

export function monitorLimitsFromEnv(env: PlanMonitorEnv): MonitorLimits {
  return { free: env.PLAN_FREE_MONITORS, starter: env.PLAN_STARTER_MONITORS };
}

export function plansFromEnv(env: PlanEnv): Plans {
  return {
    free: {
      monthlyQuota: env.PLAN_FREE_MONTHLY_QUOTA,
      perMinute: env.PLAN_FREE_PER_MINUTE,
      pollIntervalSec: env.PLAN_FREE_POLL_INTERVAL_SECONDS,
      liveWebhooks: false,
    },
    starter: {
      monthlyQuota: env.PLAN_STARTER_MONTHLY_QUOTA,
      perMinute: env.PLAN_STARTER_PER_MINUTE,
      pollIntervalSec: env.PLAN_STARTER_POLL_INTERVAL_SECONDS,
      liveWebhooks: true,
    },
  };
}

/** The plan in force: Starter while a trial runs, whatever the stored plan. */
export function effectivePlan(account: { plan: PlanName; trialEndsAt: Date | null }, now: Date = new Date()): PlanName {
  if (account.plan === 'starter') return 'starter';
  if (account.trialEndsAt && account.trialEndsAt.getTime() > now.getTime()) return 'starter';
  return 'free';
}

/** "YYYY-MM" of the UTC month containing `now`. */
export function usagePeriod(now: Date = new Date()): string {
  return `${now.getUTCFullYear()}-${String(now.getUTCMonth() + 1).padStart(2, '0')}`;
}

/** Epoch seconds at which the UTC month containing `now` ends (when quotas reset). */
export function periodResetEpoch(now: Date = new Date()): number {
  return Math.floor(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1) / 1000);
}

/**
 * How long each plan's account sees its hits (by the tweet's creation time) and its delivery log.
 * Storage keeps each table for the longest plan's days (whole weeks are dropped after that, see
 * @sts/db maintenance); reads show an account only its own plan's window, so what a listing shows
 * never depends on when the maintenance step last ran.
 */
export interface PlanRetention {
  hitsDays: number;
  deliveryLogDays: number;
}

const retentionDays = (fallback: number) => z.coerce.number().int().min(1).max(3650).default(fallback);

export const planRetentionEnv = {
  /** days a Free account's hits are kept, by the post's time (docs/retention.md) */
  PLAN_FREE_HIT_RETENTION_DAYS: retentionDays(30),
  /** days a Starter account's hits are kept, by the post's time */
  PLAN_STARTER_HIT_RETENTION_DAYS: retentionDays(90),
  /** days a Free account's delivery log is kept */
  PLAN_FREE_DELIVERY_LOG_RETENTION_DAYS: retentionDays(7),
  /** days a Starter account's delivery log is kept */
  PLAN_STARTER_DELIVERY_LOG_RETENTION_DAYS: retentionDays(30),
};

export type PlanRetentionEnv = { [K in keyof typeof planRetentionEnv]: number };
export type Retention = Record<PlanName, PlanRetention>;

export function retentionFromEnv(env: PlanRetentionEnv): Retention {
  return {
    free: { hitsDays: env.PLAN_FREE_HIT_RETENTION_DAYS, deliveryLogDays: env.PLAN_FREE_DELIVERY_LOG_RETENTION_DAYS },
    starter: {
      hitsDays: env.PLAN_STARTER_HIT_RETENTION_DAYS,
      deliveryLogDays: env.PLAN_STARTER_DELIVERY_LOG_RETENTION_DAYS,
    },
  };
}

/** The plan retention defaults (what retentionFromEnv gives for an empty environment). */
export const DEFAULT_PLAN_RETENTION: Retention = retentionFromEnv(z.object(planRetentionEnv).parse({}));

/** The days storage keeps: the longest of any plan, per table. */
export function storageRetention(r: Retention): PlanRetention {
  const all = Object.values(r);
  return {
    hitsDays: Math.max(...all.map((p) => p.hitsDays)),
    deliveryLogDays: Math.max(...all.map((p) => p.deliveryLogDays)),
  };
}

/** The oldest moment a plan's window shows: `days` before `now`. */
export function retentionSince(days: number, now: Date = new Date()): Date {
  return new Date(now.getTime() - days * 86_400_000);
}
