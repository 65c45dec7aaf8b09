/**
 * Accounts, passwords, plans, the trial and the overview, on a real PostgreSQL database.
 */
import { monitorLimitsFromEnv, plansFromEnv, planEnv, planMonitorEnv } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase } from '@sts/testing';
import { z } from 'zod';
import {
  ConflictError,
  createUseCases,
  hashPassword,
  httpStatusOf,
  InvalidCredentialsError,
  NotFoundError,
  planConfigFromEnv,
  ValidationError,
  verifyPassword,
  needsRehash,
  type UseCases,
} from './index';

const FAST = { logN: 10, r: 8, p: 1 };

describe('accounts, plans and overview', () => {
  let handle: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let uc: UseCases;
  let now = new Date('2026-11-20T12:00:00.000Z');

  beforeAll(async () => {
    handle = await createTestDatabase();
    db = createDbClient({ url: handle.url, poolSize: 4 });
    const env = z.object({ ...planEnv, ...planMonitorEnv }).parse({});
    uc = createUseCases({
      db,
      plans: plansFromEnv(env),
      monitorLimits: monitorLimitsFromEnv(env),
      scrypt: FAST,
      now: () => now,
    });
  });
  afterAll(async () => {
    await db.$disconnect();
    await handle.drop();
  });

  describe('passwords', () => {
    it('hashes with scrypt, salted, parameters in the string; verifies in constant time', async () => {
      const a = await hashPassword('correct horse battery');
      const b = await hashPassword('correct horse battery');
      expect(a).toMatch(/^scrypt\$15\$8\$1\$[\w-]{22}\$[\w-]{43}$/);
      expect(a).not.toBe(b); // salted
      expect(await verifyPassword('correct horse battery', a)).toBe(true);
      expect(await verifyPassword('correct horse batterY', a)).toBe(false);
      expect(await verifyPassword('x', 'garbage')).toBe(false);
      expect(await verifyPassword('x', 'scrypt$99$8$1$AA$AA')).toBe(false);
      // a hash made with other parameters still verifies and asks to be upgraded
      const cheap = await hashPassword('correct horse battery', FAST);
      expect(await verifyPassword('correct horse battery', cheap)).toBe(true);
      expect(needsRehash(cheap)).toBe(true);
      expect(needsRehash(a)).toBe(false);
    });
  });

  describe('sign-up and sign-in', () => {
    it('signs up a Free account with a normalised email and a hashed password', async () => {
      const a = await uc.accounts.signUp({ email: '  Alice@Example.COM ', password: 'a long enough pw' });
      expect(a).toMatchObject({ email: 'alice@example.com', plan: 'free', effectivePlan: 'free', hasPassword: true });
      const row = await db.account.findUniqueOrThrow({ where: { id: a.id } });
      expect(row.passwordHash).toMatch(/^scrypt\$/);
      expect(row.passwordHash).not.toContain('a long enough pw');
      expect((await uc.accounts.authenticate({ email: 'ALICE@example.com', password: 'a long enough pw' })).id).toBe(
        a.id,
      );
    });

    it('refuses a duplicate email with a named conflict, and bad input with the field named; nothing saved', async () => {
      await uc.accounts.signUp({ email: 'dup@example.com', password: 'a long enough pw' });
      const before = await db.account.count();
      await expect(uc.accounts.signUp({ email: 'DUP@example.com', password: 'another long pw' })).rejects.toMatchObject(
        { constructor: ConflictError, code: 'conflict', reason: 'email_taken', field: 'email' },
      );
      const cases: [{ email: string; password: string }, string, RegExp][] = [
        [{ email: 'not-an-email', password: 'a long enough pw' }, 'email', /not an email address/],
        [{ email: '', password: 'a long enough pw' }, 'email', /required/],
        [{ email: 'b@example.com', password: 'short' }, 'password', /at least 10 characters/],
        [{ email: 'b@example.com', password: ' '.repeat(12) }, 'password', /only spaces/],
        [{ email: 'b@example.com', password: 'x'.repeat(201) }, 'password', /at most 200/],
        [{ email: 'longname@example.com', password: 'LongName@example.com' }, 'password', /email/],
      ];
      for (const [input, field, message] of cases) {
        const err = (await uc.accounts.signUp(input).catch((e: unknown) => e)) as ValidationError;
        expect(err).toBeInstanceOf(ValidationError);
        expect([field, err.field, err.code]).toEqual([field, field, 'invalid_input']);
        expect(err.message).toMatch(message);
      }
      expect(await db.account.count()).toBe(before);
    });

    it('authenticate: wrong password, unknown email and an account without password all say the same', async () => {
      await uc.accounts.signUp({ email: 'carol@example.com', password: 'carols password' });
      await uc.admin.createAccount({ email: 'nopw@example.com' });
      for (const input of [
        { email: 'carol@example.com', password: 'wrong password' },
        { email: 'nobody@example.com', password: 'carols password' },
        { email: 'nopw@example.com', password: 'carols password' },
        { email: 'not an email', password: 'carols password' },
        // longer than any password may be, even when it starts with the right one
        { email: 'carol@example.com', password: `carols password${'x'.repeat(200)}` },
      ]) {
        const err = await uc.accounts.authenticate(input).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(InvalidCredentialsError);
        expect(err).toMatchObject({ code: 'invalid_credentials', message: 'wrong email or password' });
      }
      expect(httpStatusOf(new InvalidCredentialsError())).toBe(401);
    });

    it('changes a password only with the current one; the old one stops working', async () => {
      const a = await uc.accounts.signUp({ email: 'dave@example.com', password: 'daves old password' });
      await expect(
        uc.accounts.changePassword(a.id, { currentPassword: 'wrong wrong', newPassword: 'daves new password' }),
      ).rejects.toMatchObject({ field: 'currentPassword' });
      await expect(
        uc.accounts.changePassword(a.id, { currentPassword: 'daves old password', newPassword: 'short' }),
      ).rejects.toMatchObject({ field: 'newPassword' });
      await uc.accounts.changePassword(a.id, {
        currentPassword: 'daves old password',
        newPassword: 'daves new password',
      });
      await expect(
        uc.accounts.authenticate({ email: 'dave@example.com', password: 'daves old password' }),
      ).rejects.toBeInstanceOf(InvalidCredentialsError);
      expect((await uc.accounts.authenticate({ email: 'dave@example.com', password: 'daves new password' })).id).toBe(
        a.id,
      );
    });

    it('a hash with old parameters is upgraded at the next sign-in', async () => {
      const a = await uc.accounts.signUp({ email: 'erin@example.com', password: 'erins password' });
      const weak = await hashPassword('erins password', { logN: 9, r: 8, p: 1 });
      await db.account.update({ where: { id: a.id }, data: { passwordHash: weak } });
      await uc.accounts.authenticate({ email: 'erin@example.com', password: 'erins password' });
      const stored = (await db.account.findUniqueOrThrow({ where: { id: a.id } })).passwordHash!;
      expect(stored).toMatch(/^scrypt\$10\$/);
      expect(await verifyPassword('erins password', stored)).toBe(true);
    });

    it('get: an unknown or malformed account id is NotFound', async () => {
      await expect(uc.accounts.get('00000000-0000-4000-8000-000000000000')).rejects.toBeInstanceOf(NotFoundError);
      await expect(uc.accounts.get('nope')).rejects.toMatchObject({ code: 'not_found', kind: 'account' });
    });
  });

  describe('plans and the trial', () => {
    it('facts come from configuration, monitor limits included', () => {
      const cfg = planConfigFromEnv({ PLAN_FREE_MONITORS: '2', PLAN_STARTER_PER_MINUTE: '45' });
      expect(cfg.monitorLimits).toEqual({ free: 2, starter: 3 });
      expect(cfg.plans.starter.perMinute).toBe(45);
      expect(uc.plans.facts()).toEqual({
        free: {
          name: 'free',
          monthlyQuota: 1000,
          perMinute: 10,
          pollIntervalSec: 300,
          liveWebhooks: false,
          maxMonitors: 1,
          hitsDays: 30,
          deliveryLogDays: 7,
        },
        starter: {
          name: 'starter',
          monthlyQuota: 150_000,
          perMinute: 30,
          pollIntervalSec: 60,
          liveWebhooks: true,
          maxMonitors: 3,
          hitsDays: 90,
          deliveryLogDays: 30,
        },
      });
      expect(() => planConfigFromEnv({ PLAN_FREE_MONITORS: '0' })).toThrow(/PLAN_FREE_MONITORS/);
      expect(planConfigFromEnv({ PLAN_STARTER_HIT_RETENTION_DAYS: '120' }).retention.starter.hitsDays).toBe(120);
      expect(() => planConfigFromEnv({ PLAN_FREE_HIT_RETENTION_DAYS: '0' })).toThrow(/PLAN_FREE_HIT_RETENTION_DAYS/);
    });

    it('starts the 30-day Starter trial once; a second attempt, even concurrent, is a clear error', async () => {
      const a = await uc.accounts.signUp({ email: 'trial@example.com', password: 'trial password' });
      expect((await uc.overview(a.id)).trial.state).toBe('available');
      const results = await Promise.allSettled([uc.plans.startTrial(a.id), uc.plans.startTrial(a.id)]);
      const ok = results.filter((r) => r.status === 'fulfilled');
      const failed = results.filter((r) => r.status === 'rejected');
      expect([ok.length, failed.length]).toEqual([1, 1]);
      expect((failed[0] as PromiseRejectedResult).reason).toMatchObject({ code: 'conflict', reason: 'trial_used' });
      const started = (ok[0] as PromiseFulfilledResult<Awaited<ReturnType<UseCases['plans']['startTrial']>>>).value;
      expect(started).toMatchObject({ plan: 'free', effectivePlan: 'starter', trialStartedAt: now });
      expect(started.trialEndsAt!.getTime() - now.getTime()).toBe(30 * 86_400_000);
      const o = await uc.overview(a.id);
      expect(o.trial).toEqual({
        state: 'active',
        startedAt: now,
        endsAt: started.trialEndsAt,
        days: 30,
        offered: false,
      });
      expect(o.usage).toMatchObject({ quota: 150_000, perMinute: 30 });
      // after the trial: Free again, and still no second trial
      const later = now;
      now = new Date(started.trialEndsAt!.getTime() + 1000);
      try {
        expect((await uc.overview(a.id)).trial.state).toBe('ended');
        expect((await uc.accounts.get(a.id)).effectivePlan).toBe('free');
        await expect(uc.plans.startTrial(a.id)).rejects.toMatchObject({ reason: 'trial_used' });
      } finally {
        now = later;
      }
    });

    it('offers the trial only where it changes something, and says since when the account has its plan', async () => {
      const before = new Date(Date.now() - 1000);
      const free = await uc.accounts.signUp({ email: 'offer@example.com', password: 'offer password' });
      const o = await uc.overview(free.id);
      expect(o.trial).toMatchObject({ state: 'available', offered: true });
      expect(o.account.planSince.getTime()).toBe(o.account.createdAt.getTime());
      // Starter already (the seeded demo account, a paid one): nothing to offer
      const paid = await uc.admin.createAccount({ email: 'starter-since@example.com', plan: 'starter' });
      expect((await uc.overview(paid.id)).trial).toMatchObject({ state: 'available', offered: false });
      // an operator's trial: running, so not offered again
      await uc.admin.setPlan(free.id, { plan: 'free', trialDays: 7 });
      expect((await uc.overview(free.id)).trial).toMatchObject({ state: 'active', offered: false });
      // the plan's "since" moves when the stored plan changes, by any writer (a trigger), and only then
      const since = (id: string) => db.account.findUniqueOrThrow({ where: { id } }).then((r) => r.planSince);
      const old = new Date('2020-01-01T00:00:00.000Z');
      await db.account.update({ where: { id: free.id }, data: { planSince: old } });
      await db.account.update({ where: { id: free.id }, data: { plan: 'free', notifyQuota: false } });
      expect(await since(free.id)).toEqual(old);
      await db.$executeRaw`UPDATE accounts SET plan = 'starter' WHERE id = ${free.id}::uuid`;
      const moved = await since(free.id);
      expect(moved.getTime()).toBeGreaterThan(before.getTime());
      expect((await uc.overview(free.id)).account).toMatchObject({ plan: 'starter', planSince: moved });
    });

    it('a trial an operator gave counts as used; a Starter account needs none', async () => {
      const a = await uc.accounts.signUp({ email: 'optrial@example.com', password: 'trial password' });
      await uc.admin.setPlan(a.id, { plan: 'free', trialDays: 7 });
      expect((await db.account.findUniqueOrThrow({ where: { id: a.id } })).trialStartedAt).toEqual(now);
      await expect(uc.plans.startTrial(a.id)).rejects.toMatchObject({ reason: 'trial_used' });
      const s = await uc.admin.createAccount({ email: 'paid@example.com', plan: 'starter' });
      await expect(uc.plans.startTrial(s.id)).rejects.toMatchObject({ reason: 'already_starter' });
      await expect(uc.plans.startTrial('00000000-0000-4000-8000-000000000000')).rejects.toBeInstanceOf(NotFoundError);
    });
  });

  describe('overview', () => {
    it("shows this month's usage against the plan, and every day of the month so far", async () => {
      const a = await uc.accounts.signUp({ email: 'usage@example.com', password: 'usage password' });
      await db.usageMonthly.create({ data: { accountId: a.id, period: '2026-11', used: 42 } });
      await db.usageMonthly.create({ data: { accountId: a.id, period: '2026-10', used: 900 } });
      await db.usageDaily.createMany({
        data: [
          { accountId: a.id, day: new Date('2026-11-01'), used: 10 },
          { accountId: a.id, day: new Date('2026-11-19'), used: 30 },
          { accountId: a.id, day: new Date('2026-11-20'), used: 2 },
          { accountId: a.id, day: new Date('2026-10-31'), used: 500 },
        ],
      });
      const o = await uc.overview(a.id);
      expect(o.usage).toEqual({
        period: '2026-11',
        used: 42,
        quota: 1000,
        remaining: 958,
        perMinute: 10,
        resetsAt: new Date('2026-12-01T00:00:00.000Z'),
      });
      expect(o.daily).toHaveLength(20);
      expect(o.daily[0]).toEqual({ day: '2026-11-01', used: 10 });
      expect(o.daily[1]).toEqual({ day: '2026-11-02', used: 0 });
      expect(o.daily.slice(-2)).toEqual([
        { day: '2026-11-19', used: 30 },
        { day: '2026-11-20', used: 2 },
      ]);
      expect(o.daily.reduce((n, d) => n + d.used, 0)).toBe(42);
      expect(o.monitors).toEqual({ count: 0, limit: 1 });
      expect(o.plan).toMatchObject({ name: 'free', liveWebhooks: false, maxMonitors: 1 });
      expect(o.account.email).toBe('usage@example.com');
    });
  });
});
