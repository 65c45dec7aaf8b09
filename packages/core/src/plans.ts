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
  PLAN_FREE_MONTHLY_QUOTA: positiveInt(1000),
  PLAN_FREE_PER_MINUTE: positiveInt(10),
  PLAN_FREE_POLL_INTERVAL_SECONDS: positiveInt(300),
  PLAN_STARTER_MONTHLY_QUOTA: positiveInt(150_000),
  PLAN_STARTER_PER_MINUTE: positiveInt(30),
  PLAN_STARTER_POLL_INTERVAL_SECONDS: positiveInt(60),
};

export type PlanEnv = { [K in keyof typeof planEnv]: number };

/** How many monitors an account may have on each plan (paused ones count). */
export const planMonitorEnv = {
  PLAN_FREE_MONITORS: positiveInt(1),
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
