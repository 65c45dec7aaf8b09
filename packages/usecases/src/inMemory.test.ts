/**
 * The use-case rules over an in-memory implementation of their repositories, with a clock the
 * test moves: plan intervals and limits as a trial starts and ends, secret rotation overlaps,
 * the trial's states, live key limits, and keyset paging with ties. The PostgreSQL implementations
 * are tested against the real database in accounts.test.ts, monitors.test.ts and rules.test.ts.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createSecretBox, monitorLimitsFromEnv, planEnv, planMonitorEnv, plansFromEnv } from '@sts/core';
import type { HitRow, MonitorCoverage } from '@sts/db';
import { z } from 'zod';
import { composeUseCases } from './compose';
import { NotFoundError, PlanLimitError, ValidationError, type UseCases } from './index';
import type { Repositories } from './repositories';
import type {
  AccountRecord,
  AccountsRepository,
  EmailTokensRepository,
  UsageRepository,
} from './repositories/accounts';
import type { CoverageRepository } from './repositories/coverage';
import type { KeysRepository } from './repositories/keys';
import type { AttemptRecord, LogsRepository } from './repositories/logs';
import {
  FRESH_WEBHOOK,
  type MonitorRecord,
  type MonitorsRepository,
  type WebhookRecord,
} from './repositories/monitors';
import type { ApiKeyView } from './types';

type StoredWebhook = WebhookRecord & { secretCiphertext: string; previousSecretCiphertext: string | null };
type StoredMonitor = Omit<MonitorRecord, 'hitCount' | 'webhook'> & { webhook: StoredWebhook | null };
type StoredKey = ApiKeyView & { accountId: string; keyHash: string };
type Keyset = { at: Date; id: string } | undefined;

const copy = <T>(value: T): T => structuredClone(value);

/** newest first in (time desc, id desc), strictly older than `after`, at most `take` */
function newestFirst<T extends { id: string }>(rows: T[], at: (row: T) => Date, after: Keyset, take: number): T[] {
  const key = (r: T) => [at(r).getTime(), r.id] as const;
  const older = (r: T) => {
    if (!after) return true;
    const [t, id] = key(r);
    return t < after.at.getTime() || (t === after.at.getTime() && id < after.id);
  };
  const order = (a: T, b: T) => {
    const [ta, ia] = key(a);
    const [tb, ib] = key(b);
    return tb - ta || (ia < ib ? 1 : ia > ib ? -1 : 0);
  };
  return rows.filter(older).sort(order).slice(0, take).map(copy);
}

/** Everything in maps: a real implementation of the repositories, for rules that need no database. */
class InMemoryStore {
  readonly accounts = new Map<string, AccountRecord>();
  readonly grants = new Set<string>();
  readonly keys = new Map<string, StoredKey>();
  readonly monitors = new Map<string, StoredMonitor>();
  readonly hits: HitRow[] = [];
  readonly attempts: (AttemptRecord & { monitorId: string })[] = [];
  /** delivery id -> when its redelivery was marked pending (ms) */
  readonly pending = new Map<string, number>();
  /** target key -> its coverage record as the poller would have written it */
  readonly coverage = new Map<string, MonitorCoverage>();

  constructor(private readonly now: () => Date) {}

  repositories(): Repositories {
    return {
      accounts: this.accountsRepository(),
      emailTokens: this.emailTokensRepository(),
      usage: this.usageRepository(),
      keys: this.keysRepository(),
      monitors: this.monitorsRepository(),
      logs: this.logsRepository(),
      coverage: this.coverageRepository(),
    };
  }

  private accountsRepository(): AccountsRepository {
    const { accounts, grants } = this;
    const byEmail = (email: string) => [...accounts.values()].find((a) => a.email === email) ?? null;
    return {
      findById: (id) => Promise.resolve(copy(accounts.get(id) ?? null)),
      findByEmail: (email) => Promise.resolve(copy(byEmail(email))),
      create: (input) => {
        if (byEmail(input.email)) return Promise.resolve(null);
        const a: AccountRecord = {
          ...input,
          id: randomUUID(),
          planSince: this.now(),
          trialStartedAt: null,
          trialEndsAt: null,
          createdAt: this.now(),
          notifyQuota: true,
          notifyWebhook: true,
          notifyTrial: true,
          sessionGeneration: 0,
        };
        accounts.set(a.id, a);
        return Promise.resolve(copy(a));
      },
      update: (id, { endSessions, ...change }) => {
        const a = accounts.get(id);
        if (a && change.plan !== undefined && change.plan !== a.plan) a.planSince = this.now();
        if (a) Object.assign(a, change, endSessions ? { sessionGeneration: a.sessionGeneration + 1 } : {});
        return Promise.resolve(a !== undefined);
      },
      markVerified: (id, at) => {
        const a = accounts.get(id);
        if (a && !a.emailVerifiedAt) a.emailVerifiedAt = at;
        return Promise.resolve();
      },
      startTrial: (id, { startedAt, endsAt, grantKey }) => {
        if (grantKey !== null && grants.has(grantKey)) return Promise.resolve('address_used' as const);
        const a = accounts.get(id);
        if (!a || a.trialStartedAt || a.trialEndsAt) return Promise.resolve('account_used' as const);
        if (grantKey !== null) grants.add(grantKey);
        Object.assign(a, { trialStartedAt: startedAt, trialEndsAt: endsAt });
        return Promise.resolve('started' as const);
      },
    };
  }

  private emailTokensRepository(): EmailTokensRepository {
    const tokens = new Map<string, { id: string; accountId: string; purpose: string; tokenHash: string }>();
    const state = new Map<string, { expiresAt: Date; usedAt: Date | null }>();
    return {
      create: ({ accountId, purpose, tokenHash, expiresAt }) => {
        const id = randomUUID();
        tokens.set(id, { id, accountId, purpose, tokenHash });
        state.set(id, { expiresAt, usedAt: null });
        return Promise.resolve();
      },
      findByHash: (tokenHash) => {
        const t = [...tokens.values()].find((x) => x.tokenHash === tokenHash);
        const email = t && this.accounts.get(t.accountId)?.email;
        if (!t || email === undefined) return Promise.resolve(null);
        return Promise.resolve({ id: t.id, accountId: t.accountId, purpose: t.purpose, email, ...state.get(t.id)! });
      },
      use: (id, at) => {
        const s = state.get(id);
        if (!s || s.usedAt) return Promise.resolve(false);
        s.usedAt = at;
        return Promise.resolve(true);
      },
      useAll: (accountId, purpose, at) => {
        for (const t of tokens.values()) {
          const s = state.get(t.id)!;
          if (t.accountId === accountId && t.purpose === purpose && !s.usedAt) s.usedAt = at;
        }
        return Promise.resolve();
      },
    };
  }

  /** the gateways write usage; here nobody does */
  private usageRepository(): UsageRepository {
    return { monthly: () => Promise.resolve(0), daily: () => Promise.resolve([]) };
  }

  private keysRepository(): KeysRepository {
    const { keys } = this;
    const revocation = (k: StoredKey | undefined) =>
      k ? { id: k.id, keyHash: k.keyHash, revokedAt: k.revokedAt } : null;
    const view = ({ accountId: _a, keyHash: _h, ...k }: StoredKey): ApiKeyView => copy(k);
    return {
      countActive: (accountId) =>
        Promise.resolve([...keys.values()].filter((k) => k.accountId === accountId && !k.revokedAt).length),
      create: (input) => {
        const k: StoredKey = { ...input, id: randomUUID(), createdAt: this.now(), lastUsedAt: null, revokedAt: null };
        keys.set(k.id, k);
        return Promise.resolve(view(k));
      },
      list: (accountId) =>
        Promise.resolve(
          newestFirst(
            [...keys.values()].filter((k) => k.accountId === accountId),
            (k) => k.createdAt,
            undefined,
            Infinity,
          ).map(view),
        ),
      get: (id) => {
        const k = keys.get(id);
        return Promise.resolve(k ? { ...view(k), accountId: k.accountId } : null);
      },
      findOwned: (accountId, id) =>
        Promise.resolve(revocation([...keys.values()].find((k) => k.id === id && k.accountId === accountId))),
      findByPrefix: (prefix) => Promise.resolve(revocation([...keys.values()].find((k) => k.prefix === prefix))),
      revoke: (id, at) => {
        const k = keys.get(id);
        if (k && !k.revokedAt) k.revokedAt = at;
        return Promise.resolve();
      },
    };
  }

  private record(m: StoredMonitor): MonitorRecord {
    const hitCount = this.hits.filter((h) => h.monitorId === m.id).length;
    const { secretCiphertext: _s, previousSecretCiphertext: _p, ...webhook } = m.webhook ?? {};
    return copy({ ...m, hitCount, webhook: m.webhook ? (webhook as WebhookRecord) : null });
  }

  private webhookOf(monitorId: string): StoredWebhook {
    const w = this.monitors.get(monitorId)?.webhook;
    if (!w) throw new Error(`monitor ${monitorId} has no webhook`);
    return w;
  }

  private monitorsRepository(): MonitorsRepository {
    const { monitors } = this;
    const owned = (accountId: string, id: string) => {
      const m = monitors.get(id);
      return m && m.accountId === accountId ? m : undefined;
    };
    const ofAccount = (accountId: string) => [...monitors.values()].filter((m) => m.accountId === accountId);
    return {
      list: (accountId) =>
        Promise.resolve(
          newestFirst(ofAccount(accountId), (m) => m.createdAt, undefined, Infinity).map((m) => this.record(m)),
        ),
      find: (accountId, id) => {
        const m = owned(accountId, id);
        return Promise.resolve(m ? this.record(m) : null);
      },
      owns: (accountId, id) => Promise.resolve(owned(accountId, id) !== undefined),
      ownerOf: (id) => Promise.resolve(monitors.get(id)?.accountId ?? null),
      count: (accountId) => Promise.resolve(ofAccount(accountId).length),
      createWithinLimit: ({ webhook, ...m }, limit) => {
        if (ofAccount(m.accountId).length >= limit) return Promise.resolve(false);
        const at = this.now();
        monitors.set(m.id, {
          excludeTypes: [],
          langs: [],
          events: ['posts'],
          targetStatus: 'ok',
          targetStatusAt: null,
          ...m,
          isActive: true,
          lastCheckAt: null,
          lastError: null,
          createdAt: at,
          updatedAt: at,
          webhook: webhook && {
            retryPolicy: 'none',
            ordering: 'unordered',
            ...webhook,
            ...FRESH_WEBHOOK,
            heldCount: 0,
            heldDropped: 0,
            secretRotatedAt: null,
            createdAt: at,
          },
        });
        return Promise.resolve(true);
      },
      update: (id, change) => {
        Object.assign(monitors.get(id) ?? {}, change, { updatedAt: this.now() });
        return Promise.resolve();
      },
      remove: (accountId, id) => {
        if (!owned(accountId, id)) return Promise.resolve(false);
        monitors.delete(id);
        // with its hits and delivery log
        const keep = <T extends { monitorId: string }>(rows: T[]) =>
          rows.splice(0, rows.length, ...rows.filter((r) => r.monitorId !== id));
        keep(this.hits);
        keep(this.attempts);
        return Promise.resolve(true);
      },
      setWebhook: (monitorId, hook, at) => {
        const m = monitors.get(monitorId)!;
        const created = m.webhook
          ? { secretRotatedAt: at, createdAt: m.webhook.createdAt }
          : { secretRotatedAt: null, createdAt: at };
        const settings = {
          retryPolicy: m.webhook?.retryPolicy ?? 'none',
          ordering: m.webhook?.ordering ?? 'unordered',
        };
        const held = { heldCount: m.webhook?.heldCount ?? 0, heldDropped: m.webhook?.heldDropped ?? 0 };
        m.webhook = { ...settings, ...hook, ...FRESH_WEBHOOK, ...held, ...created };
        return Promise.resolve();
      },
      configureWebhook: (monitorId, settings) => {
        Object.assign(this.webhookOf(monitorId), settings);
        return Promise.resolve();
      },
      webhookSecret: (monitorId) => Promise.resolve(this.webhookOf(monitorId).secretCiphertext),
      rotateSecret: (monitorId, r) => {
        const { rotatedAt: secretRotatedAt, ...rest } = r;
        Object.assign(this.webhookOf(monitorId), rest, { secretRotatedAt });
        return Promise.resolve();
      },
      dropPreviousSecret: (monitorId) => {
        Object.assign(this.webhookOf(monitorId), { previousSecretCiphertext: null, previousSecretUntil: null });
        return Promise.resolve();
      },
      removeWebhook: (monitorId) => {
        const m = monitors.get(monitorId);
        if (m) m.webhook = null;
        return Promise.resolve();
      },
      enableWebhook: (monitorId) => {
        Object.assign(this.webhookOf(monitorId), { consecutiveFailures: 0, firstFailureAt: null, disabledAt: null });
        return Promise.resolve();
      },
    };
  }

  private coverageRepository(): CoverageRepository {
    const none = { count: 0, p50Ms: null, p95Ms: null };
    const empty: MonitorCoverage = {
      coveredUntil: null,
      gaps: [],
      intake: null,
      latency: { last24h: { detected: none, delivered: none }, last7d: { detected: none, delivered: none } },
    };
    return {
      monitor: (accountId, id) => {
        const m = this.monitors.get(id);
        const found = m?.accountId === accountId ? m : undefined;
        return Promise.resolve(
          found ? { id, targetKey: found.targetUsername?.toLowerCase() ?? null, createdAt: found.createdAt } : null,
        );
      },
      read: (m) => Promise.resolve(copy((m.targetKey === null ? undefined : this.coverage.get(m.targetKey)) ?? empty)),
    };
  }

  private logsRepository(): LogsRepository {
    const owner = (monitorId: string) => this.monitors.get(monitorId)?.accountId ?? null;
    const attemptsOf = (monitorId: string) => this.attempts.filter((a) => a.monitorId === monitorId);
    const hitsOf = (monitorId: string) => this.hits.filter((h) => h.monitorId === monitorId);
    const sent = (a: AttemptRecord) => a.createdAt;
    const found = (h: HitRow) => h.detectedAt;
    return {
      attempts: (monitorId, after, take, since) =>
        Promise.resolve(
          newestFirst(
            attemptsOf(monitorId).filter((a) => a.createdAt >= since),
            sent,
            after,
            take,
          ).map(({ monitorId: _m, ...a }) => a),
        ),
      findAttempt: (accountId, id) => {
        const a = this.attempts.find((x) => x.id === id);
        return Promise.resolve(a && owner(a.monitorId) === accountId ? { ...copy(a), accountId } : null);
      },
      attemptDetail: () =>
        Promise.resolve({ requestHeaders: null, requestBody: null, responseHeaders: null, responseBody: null }),
      attemptDetails: () => Promise.resolve(new Map()),
      ownerOfAttempt: (id) => {
        const a = this.attempts.find((x) => x.id === id);
        return Promise.resolve(a ? owner(a.monitorId) : null);
      },
      recoverableDeliveries: (monitorId, { since, until, outcomes }, max, pendingAfter) => {
        const hitAttempts = attemptsOf(monitorId).filter((a) => a.event !== 'monitor.test');
        const inWindow = (a: { createdAt: Date }) => a.createdAt >= since && (until === null || a.createdAt <= until);
        const failedSince = new Set(
          hitAttempts.filter((a) => outcomes.includes(a.outcome) && inWindow(a)).map((a) => a.deliveryId),
        );
        const latest = [...failedSince].map(
          (d) =>
            newestFirst(
              hitAttempts.filter((a) => a.deliveryId === d),
              sent,
              undefined,
              1,
            )[0]!,
        );
        const pending = (d: string) => (this.pending.get(d) ?? 0) > pendingAfter.getTime();
        const failed = latest.filter((a) => outcomes.includes(a.outcome) && a.hitId !== null && !pending(a.deliveryId));
        const due = newestFirst(failed, sent, undefined, Infinity).reverse();
        const attempts = due.slice(0, max).map((a) => ({ id: a.id, deliveryId: a.deliveryId }));
        return Promise.resolve({ attempts, total: due.length });
      },
      claimRedeliveries: (_accountId, _monitorId, deliveryIds, now, pendingAfter) => {
        const claimed = deliveryIds.filter((d) => (this.pending.get(d) ?? 0) <= pendingAfter.getTime());
        for (const d of claimed) this.pending.set(d, now.getTime());
        return Promise.resolve(claimed);
      },
      releaseRedeliveries: (deliveryIds) => {
        for (const d of deliveryIds) this.pending.delete(d);
        return Promise.resolve();
      },
      hits: (monitorId, after, take, since) =>
        Promise.resolve(
          newestFirst(
            hitsOf(monitorId).filter((h) => h.tweetCreatedAt >= since),
            found,
            after,
            take,
          ),
        ),
      hitExists: (hitId) => Promise.resolve(this.hits.some((h) => h.id === hitId)),
      latestHit: (monitorId) => Promise.resolve(newestFirst(hitsOf(monitorId), found, undefined, 1)[0] ?? null),
    };
  }
}

const DAY = 86_400_000;

describe('use-case rules over in-memory repositories', () => {
  let clock: Date;
  let store: InMemoryStore;
  let uc: UseCases;
  const box = createSecretBox(randomBytes(32));
  let evict: (keyHash: string) => Promise<boolean>;

  beforeEach(() => {
    clock = new Date('2026-11-02T10:00:00Z');
    store = new InMemoryStore(() => clock);
    evict = () => Promise.resolve(true);
    const env = z.object({ ...planEnv, ...planMonitorEnv }).parse({});
    uc = composeUseCases(
      {
        plans: plansFromEnv(env),
        monitorLimits: monitorLimitsFromEnv(env),
        secretBox: box,
        now: () => clock,
        evictApiKey: (keyHash) => evict(keyHash),
      },
      store.repositories(),
    );
  });

  const later = (ms: number) => {
    clock = new Date(clock.getTime() + ms);
  };
  const account = async () => (await uc.admin.createAccount({ email: `${randomUUID()}@example.com` })).id;

  it("checks a monitor no more often than the plan in force allows: the trial gives Starter's interval, its end takes it back", async () => {
    const id = await account();
    const tooOften = uc.monitors.create(id, { target: 'nasa', intervalSec: 60 });
    await expect(tooOften).rejects.toBeInstanceOf(ValidationError);
    await expect(tooOften).rejects.toMatchObject({
      field: 'intervalSec',
      message: 'must be at least 300 seconds on the Free plan (Starter checks every 60 s)',
    });
    expect(store.monitors.size).toBe(0);

    await uc.plans.startTrial(id);
    const { monitor } = await uc.monitors.create(id, { target: 'nasa', intervalSec: 60 });
    expect(monitor.intervalSec).toBe(60);
    // without an interval, the plan's own
    expect((await uc.monitors.create(id, { target: 'esa' })).monitor.intervalSec).toBe(60);

    later(31 * DAY);
    await expect(uc.monitors.update(id, monitor.id, { intervalSec: 120 })).rejects.toMatchObject({
      field: 'intervalSec',
      message: 'must be at least 300 seconds on the Free plan (Starter checks every 60 s)',
    });
    // what was saved during the trial stays as it was
    expect((await uc.monitors.get(id, monitor.id)).intervalSec).toBe(60);
    await expect(uc.monitors.update(id, monitor.id, { intervalSec: 86_401 })).rejects.toMatchObject({
      field: 'intervalSec',
      message: 'must be a whole number of seconds up to 86400',
    });
    expect((await uc.monitors.update(id, monitor.id, { intervalSec: 86_400 })).intervalSec).toBe(86_400);
  });

  it('counts paused monitors against the plan limit; after the trial an account over the limit keeps its monitors but adds none', async () => {
    const id = await account();
    await uc.plans.startTrial(id);
    const made = [];
    for (const target of ['a1', 'a2', 'a3']) {
      made.push((await uc.monitors.create(id, { target })).monitor);
      later(1000);
    }
    await uc.monitors.pause(id, made[0]!.id);
    const starter = uc.monitors.create(id, { target: 'a4' });
    await expect(starter).rejects.toBeInstanceOf(PlanLimitError);
    await expect(starter).rejects.toMatchObject({
      limit: 3,
      plan: 'starter',
      message: 'the Starter plan allows 3 monitors; delete a monitor to add another',
    });

    later(31 * DAY);
    const free = uc.monitors.create(id, { target: 'a4' });
    await expect(free).rejects.toMatchObject({
      limit: 1,
      plan: 'free',
      message:
        'the Free plan allows 1 monitor; delete one, or upgrade to Starter (3 monitors) — the 30-day Starter trial is on the Plan page',
    });
    expect((await uc.monitors.list(id)).map((m) => [m.targetUsername, m.status])).toEqual([
      ['a3', 'active'],
      ['a2', 'active'],
      ['a1', 'paused'],
    ]);
    expect((await uc.overview(id)).monitors).toEqual({ count: 3, limit: 1 });
    // back under the limit only when the monitors left are fewer than it
    await uc.monitors.remove(id, made[2]!.id);
    await uc.monitors.remove(id, made[1]!.id);
    await expect(uc.monitors.create(id, { target: 'a4' })).rejects.toBeInstanceOf(PlanLimitError);
    await uc.monitors.remove(id, made[0]!.id);
    expect((await uc.monitors.create(id, { target: 'a4' })).monitor.intervalSec).toBe(300);
  });

  it('rotates a webhook secret with a 24 h overlap by default, keeps the secret in force as the old one, and drops it at once when asked', async () => {
    const id = await account();
    const { monitor, secret: first } = await uc.monitors.create(id, {
      target: 'nasa',
      webhookUrl: 'https://hooks.example.com/in',
    });
    const stored = () => store.monitors.get(monitor.id)!.webhook!;
    const plain = (ciphertext: string | null) => ciphertext && box.decrypt(ciphertext, monitor.id);
    expect(plain(stored().secretCiphertext)).toBe(first);

    const second = await uc.webhooks.rotate(id, monitor.id);
    expect(second.webhook.previousSecretUntil).toEqual(new Date(clock.getTime() + DAY));
    expect(second.webhook.secretRotatedAt).toEqual(clock);
    expect([plain(stored().secretCiphertext), plain(stored().previousSecretCiphertext)]).toEqual([
      second.secret,
      first,
    ]);

    // a rotation inside the overlap: the secret in force now (the newest) becomes the old one
    later(60_000);
    const third = await uc.webhooks.rotate(id, monitor.id, { overlapSec: 3600 });
    expect(third.webhook.previousSecretUntil).toEqual(new Date(clock.getTime() + 3600_000));
    expect(plain(stored().previousSecretCiphertext)).toBe(second.secret);

    expect((await uc.webhooks.useNewSecret(id, monitor.id)).previousSecretUntil).toBeNull();
    expect(stored().previousSecretCiphertext).toBeNull();

    const leaked = await uc.webhooks.rotate(id, monitor.id, { now: true });
    expect(leaked.webhook.previousSecretUntil).toBeNull();
    expect([plain(stored().secretCiphertext), stored().previousSecretCiphertext]).toEqual([leaked.secret, null]);

    for (const overlapSec of [59, 7 * 86_400 + 1, 1.5]) {
      await expect(uc.webhooks.rotate(id, monitor.id, { overlapSec })).rejects.toMatchObject({
        field: 'overlapSec',
        message: 'must be a whole number of seconds from 60 to 604800',
      });
    }
    expect(plain(stored().secretCiphertext)).toBe(leaked.secret);
  });

  it("shows the trial available, then active for 30 days, then ended; it starts once, not on Starter, and an operator's trial counts", async () => {
    const id = await account();
    expect((await uc.overview(id)).trial).toMatchObject({
      state: 'available',
      startedAt: null,
      days: 30,
      offered: true,
    });
    const started = clock;
    await uc.plans.startTrial(id);
    later(30 * DAY - 1);
    const active = await uc.overview(id);
    expect(active.trial).toMatchObject({
      state: 'active',
      startedAt: started,
      endsAt: new Date(started.getTime() + 30 * DAY),
    });
    expect(active.account.effectivePlan).toBe('starter');
    later(1);
    const ended = await uc.overview(id);
    expect([ended.trial.state, ended.account.effectivePlan, ended.plan.name]).toEqual(['ended', 'free', 'free']);
    await expect(uc.plans.startTrial(id)).rejects.toMatchObject({
      reason: 'trial_used',
      message: 'the Starter trial can be used once per account and was used (started 2026-11-02)',
    });

    const paying = await account();
    await uc.admin.setPlan(paying, { plan: 'starter' });
    await expect(uc.plans.startTrial(paying)).rejects.toMatchObject({ reason: 'already_starter' });

    const given = await account();
    await uc.admin.setPlan(given, { plan: 'free', trialDays: 7 });
    await uc.admin.setPlan(given, { plan: 'free', trialDays: 0 });
    expect((await uc.overview(given)).trial.state).toBe('ended');
    await expect(uc.plans.startTrial(given)).rejects.toMatchObject({ reason: 'trial_used' });
  });

  it('allows 20 live keys; a revocation frees a slot, keeps its first time, and says when the cache eviction failed', async () => {
    const id = await account();
    const keys = [];
    for (let i = 0; i < 20; i++) keys.push(await uc.keys.create(id, { name: `k${i}` }));
    await expect(uc.keys.create(id)).rejects.toMatchObject({
      field: 'name',
      message: 'an account can have 20 active keys; revoke one first',
    });
    const first = await uc.keys.revoke(id, keys[0]!.id);
    expect(first).toMatchObject({ revokedAt: clock, cacheEvicted: true });
    const revokedAt = clock;
    later(60_000);
    evict = () => Promise.reject(new Error('redis is down'));
    const again = await uc.keys.revoke(id, keys[0]!.id);
    expect(again).toMatchObject({ revokedAt, cacheEvicted: false });
    expect(again).not.toHaveProperty('accountId');
    expect((await uc.keys.create(id, { name: '  spare   key ' })).name).toBe('spare key');
    expect((await uc.keys.list(id)).filter((k) => !k.revokedAt)).toHaveLength(20);
  });

  it('pages hits newest first without losing or repeating rows that share a time, and refuses a cursor it did not hand out', async () => {
    const id = await account();
    const { monitor } = await uc.monitors.create(id, { target: 'nasa' });
    const same = new Date('2026-11-01T00:00:00Z');
    for (let i = 0; i < 7; i++) {
      store.hits.push({
        id: randomUUID(),
        monitorId: monitor.id,
        tweetId: String(1000 + i),
        tweetText: `post ${i}`,
        tweetAuthorUsername: 'nasa',
        tweetCreatedAt: same,
        detectedAt: i < 5 ? same : new Date(same.getTime() + i * 1000),
      });
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await uc.hits.list(id, monitor.id, { limit: 2, ...(cursor ? { cursor } : {}) });
      seen.push(...page.items.map((h) => h.id));
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    const expected = newestFirst(store.hits, (h) => h.detectedAt, undefined, Infinity).map((h) => h.id);
    expect(seen).toEqual(expected);
    expect((await uc.hits.list(id, monitor.id, { limit: 7 })).nextCursor).toBeNull();
    const hit = (await uc.hits.list(id, monitor.id, { limit: 1 })).items[0]!;
    expect(hit).toMatchObject({ text: 'post 6', authorUsername: 'nasa', postUrl: 'https://x.com/nasa/status/1006' });
    await expect(uc.hits.list(id, monitor.id, { cursor: 'bm90LWEtY3Vyc29y' })).rejects.toMatchObject({
      field: 'cursor',
    });
    await expect(uc.hits.list(id, monitor.id, { limit: 501 })).rejects.toMatchObject({ field: 'limit' });
  });

  it("reads a monitor's coverage by its target for its own account only", async () => {
    const id = await account();
    const other = await account();
    const { monitor } = await uc.monitors.create(id, { target: 'NASA' });
    const gap = { from: new Date(0), to: new Date(1000), reason: 'stream_down' as const, filledAt: null };
    const stats = { count: 3, p50Ms: 900, p95Ms: 2000 };
    store.coverage.set('nasa', {
      coveredUntil: new Date(5000),
      gaps: [gap],
      intake: { path: 'polled', eventTypes: [], confirmedAt: null },
      latency: { last24h: { detected: stats, delivered: stats }, last7d: { detected: stats, delivered: stats } },
    });
    const read = await uc.coverage.read(id, monitor.id);
    expect(read.coveredUntil).toEqual(new Date(5000));
    expect(read.gaps).toEqual([gap]);
    expect(read.latency.last7d.delivered).toEqual(stats);
    await expect(uc.coverage.read(other, monitor.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(uc.coverage.read(id, 'not-a-uuid')).rejects.toBeInstanceOf(NotFoundError);
  });
});
