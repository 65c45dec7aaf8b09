/**
 * Brings X's subscriptions (this service's `tag`) to what the watched accounts want: lists them,
 * plans within the limit (the configured one, less the subscriptions of other tags, and less again
 * once X said its own limit was reached), deletes what nobody wants first (room for the new ones),
 * then creates the missing ones one by one. A creation X refuses is remembered (`refusalTtlMs`,
 * an hour: X's open beta may offer it later) and reported once in `refusedNow`, and its account
 * stays polled; a transient failure (rate limit, X down) ends the round early, the rest waits for
 * the next one. An account is `pushed` once every subscription it wants is active.
 */
import { XActivityError, type XActivityApi, type XaaRefusal } from './client';
import { diffSubscriptions, planSubscriptions, type WatchedAccount } from './plan';
import { subscriptionKey, type XaaSubscription, type XaaSubscriptionKey } from './types';

export interface Refused extends XaaSubscriptionKey {
  refusal: XaaRefusal;
  detail: string;
}

export interface ReconcileOutcome {
  /** this service's subscriptions X holds now */
  active: XaaSubscription[];
  pushed: WatchedAccount[];
  polled: WatchedAccount[];
  /** refusals new in this round (log and count them once) */
  refusedNow: Refused[];
  /** false: a transient failure ended the round before everything was applied */
  complete: boolean;
  created: number;
  removed: number;
}

export interface ReconcilerOptions {
  api: Pick<XActivityApi, 'list' | 'create' | 'remove'>;
  /** the tag this service's subscriptions carry (others' are left alone) */
  tag: string;
  /** X_ACTIVITY_MAX_SUBS */
  max: number;
  refusalTtlMs?: number;
  now?: () => number;
}

export class SubscriptionReconciler {
  private readonly refused = new Map<string, number>();
  /** X's own limit, when it refused one for it: the count held then, until `until` */
  private xLimit: { count: number; until: number } | null = null;

  constructor(private readonly options: ReconcilerOptions) {}

  private now(): number {
    return this.options.now?.() ?? Date.now();
  }

  private refusedKeys(): Set<string> {
    const now = this.now();
    for (const [key, until] of this.refused) if (until <= now) this.refused.delete(key);
    return new Set(this.refused.keys());
  }

  private limit(foreign: number): number {
    const x = this.xLimit && this.xLimit.until > this.now() ? this.xLimit.count : Infinity;
    return Math.max(0, Math.min(this.options.max, x) - foreign);
  }

  async reconcile(accounts: readonly WatchedAccount[]): Promise<ReconcileOutcome> {
    const existing = await this.options.api.list();
    const foreign = existing.filter((s) => s.tag !== this.options.tag).length;
    const plan = planSubscriptions(accounts, this.limit(foreign), this.refusedKeys());
    const diff = diffSubscriptions(plan.wanted, existing, this.options.tag);
    const active = new Map(
      existing.filter((s) => s.tag === this.options.tag).map((s) => [subscriptionKey(s), s] as const),
    );
    const outcome = { refusedNow: [] as Refused[], complete: true, created: 0, removed: 0 };
    try {
      for (const s of diff.remove) {
        await this.options.api.remove(s.id);
        if (active.get(subscriptionKey(s))?.id === s.id) active.delete(subscriptionKey(s));
        outcome.removed++;
      }
      for (const want of diff.create) {
        const result = await this.options.api.create(want, this.options.tag);
        if (result.ok) {
          active.set(subscriptionKey(result.subscription), result.subscription);
          outcome.created++;
          continue;
        }
        outcome.refusedNow.push({ eventType: want.eventType, userId: want.userId, ...result });
        if (result.refusal === 'limit') {
          this.xLimit = { count: active.size + foreign, until: this.now() + this.ttl() };
          break;
        }
        this.refused.set(subscriptionKey(want), this.now() + this.ttl());
      }
    } catch (err) {
      if (!(err instanceof XActivityError) || !err.transient) throw err;
      outcome.complete = false;
    }
    const held = new Set(active.keys());
    const isPushed = (a: WatchedAccount) =>
      a.types.every((t) => held.has(subscriptionKey({ eventType: t, userId: a.userId })));
    const all = [...plan.pushed, ...plan.polled];
    return {
      ...outcome,
      active: [...active.values()],
      pushed: all.filter(isPushed),
      polled: all.filter((a) => !isPushed(a)),
    };
  }

  private ttl(): number {
    return this.options.refusalTtlMs ?? 3_600_000;
  }
}
