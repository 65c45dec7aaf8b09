/**
 * The overview (plan, trial, this month's usage and its per-day counts) and the plans: their
 * facts from configuration and the self-service Starter trial, once per account.
 *
 * Usage figures come from PostgreSQL (usage_monthly / usage_daily), which the gateways write in
 * batches: they trail the live Redis counters by at most a flush interval.
 */
import { DEFAULT_PLAN_RETENTION, periodResetEpoch, usagePeriod, type PlanName } from '@sts/core';
import { emailKey, loadAccount, planOf, requireVerified, toAccountView, type Ctx } from './context';
import { ConflictError, NotFoundError } from './errors';
import type { AccountView, Overview, PlanFacts, TrialState } from './types';

export function trialState(a: { trialStartedAt: Date | null; trialEndsAt: Date | null }, now: Date): TrialState {
  if (a.trialEndsAt && a.trialEndsAt.getTime() > now.getTime()) return 'active';
  if (a.trialStartedAt || a.trialEndsAt) return 'ended';
  return 'available';
}

const isoDay = (d: Date) => d.toISOString().slice(0, 10);

export interface PlanUseCases {
  /** Free against Starter, from configuration */
  facts(): Record<PlanName, PlanFacts>;
  /**
   * Starts the 30-day Starter trial. Once per account: ConflictError('trial_used') on a second
   * attempt (also when an admin gave a trial), ConflictError('already_starter') on Starter.
   * No card is processed in this version.
   */
  startTrial(accountId: string): Promise<AccountView>;
}

export function overviewUseCases(ctx: Ctx): {
  overview: (accountId: string) => Promise<Overview>;
  plans: PlanUseCases;
} {
  const { accounts, usage, monitors } = ctx.repos;
  const { plans, monitorLimits } = ctx.opts;

  async function overview(accountId: string): Promise<Overview> {
    const account = await loadAccount(ctx, accountId);
    const now = ctx.now();
    const plan = planOf(ctx, account);
    const period = usagePeriod(now);
    const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
    const today = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
    const [used, dailyRows, monitorCount] = await Promise.all([
      usage.monthly(account.id, period),
      usage.daily(account.id, monthStart, today),
      monitors.count(account.id),
    ]);
    const byDay = new Map(dailyRows.map((r) => [isoDay(r.day), r.used]));
    const daily: Overview['daily'] = [];
    for (let d = new Date(monthStart); d.getTime() <= today.getTime(); d = new Date(d.getTime() + 86_400_000)) {
      daily.push({ day: isoDay(d), used: byDay.get(isoDay(d)) ?? 0 });
    }
    const limits = plans[plan];
    const state = trialState(account, now);
    return {
      account: toAccountView(account, now),
      trial: {
        state,
        startedAt: account.trialStartedAt,
        endsAt: account.trialEndsAt,
        days: ctx.trialDays,
        offered: state === 'available' && account.plan === 'free',
      },
      usage: {
        period,
        used,
        quota: limits.monthlyQuota,
        remaining: Math.max(0, limits.monthlyQuota - used),
        perMinute: limits.perMinute,
        resetsAt: new Date(periodResetEpoch(now) * 1000),
      },
      daily,
      monitors: { count: monitorCount, limit: monitorLimits[plan] },
      plan: facts(plan),
    };
  }

  const retention = ctx.opts.retention ?? DEFAULT_PLAN_RETENTION;
  const facts = (name: PlanName): PlanFacts => ({
    name,
    ...plans[name],
    maxMonitors: monitorLimits[name],
    ...retention[name],
  });

  const planUseCases: PlanUseCases = {
    facts: () => ({ free: facts('free'), starter: facts('starter') }),

    async startTrial(accountId) {
      const account = await loadAccount(ctx, accountId);
      if (account.plan === 'starter') {
        throw new ConflictError('already_starter', 'this account is on the Starter plan already; no trial needed');
      }
      requireVerified(ctx, account, 'start the trial');
      const now = ctx.now();
      const endsAt = new Date(now.getTime() + ctx.trialDays * 86_400_000);
      // once per verified address, not per account row: the grant is keyed by the normalised
      // address and outlives the account
      const started = await accounts.startTrial(account.id, {
        startedAt: now,
        endsAt,
        grantKey: ctx.opts.requireVerifiedEmail ? emailKey(account.email) : null,
      });
      if (started === 'address_used') {
        throw new ConflictError(
          'trial_used',
          'the Starter trial can be used once per email address, and this address has had it',
        );
      }
      if (started === 'account_used') {
        const fresh = await accounts.findById(account.id);
        if (!fresh) throw new NotFoundError('account', `no account with id ${account.id}`);
        const when = fresh.trialStartedAt ? ` (started ${isoDay(fresh.trialStartedAt)})` : '';
        throw new ConflictError('trial_used', `the Starter trial can be used once per account and was used${when}`);
      }
      return toAccountView(await loadAccount(ctx, account.id), now);
    },
  };

  return { overview, plans: planUseCases };
}
