/**
 * Leased quota against real Redis and PostgreSQL: exactness with one and with two processes
 * (stores), credit given back (failed calls, idle, minute change, close), a Redis flush, and Redis
 * going away.
 */
import { createAccount } from '@sts/testing';
import { minuteKey, monthKey, type Admission, type QuotaStore } from './leasedQuota';
import { useQuotaBed } from '../../test/quotaBed';

const PERIOD = '2026-11';
const MINUTE = 29_000_000;

describe('leased quota', () => {
  const bed = useQuotaBed({ poolSize: 4 });

  const account = async () => (await createAccount(bed.db, 'free')).id;

  const used = async (id: string) => Number(await bed.redis.hget(monthKey(id, PERIOD), 'u'));
  const minuteCount = async (id: string, minute = MINUTE) => Number((await bed.redis.get(minuteKey(id, minute))) ?? 0);
  const dbUsed = async (id: string) =>
    (await bed.db.usageMonthly.findUnique({ where: { accountId_period: { accountId: id, period: PERIOD } } }))?.used ??
    0;
  const admit = (s: QuotaStore, id: string, quota: number, perMinute = 1_000_000, minute = MINUTE) =>
    Promise.resolve(s.admit(id, PERIOD, minute, quota, perMinute));
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('200 concurrent calls against a quota of 50 admit exactly 50, and every unit ends up used', async () => {
    const id = await account();
    const { s } = bed.store();
    const results = await Promise.all(Array.from({ length: 200 }, () => admit(s, id, 50)));
    const ok = results.filter((r) => r.outcome === 'ok');
    expect(ok).toHaveLength(50);
    expect(results.filter((r) => r.outcome === 'quota_exceeded')).toHaveLength(150);
    for (let i = 0; i < 50; i++) s.succeeded(id, PERIOD);
    expect(await used(id)).toBe(50);
    await s.flush();
    expect(await dbUsed(id)).toBe(50);
    // the usage figures handed out are each call's own, in order, within the quota
    expect(Math.max(...ok.map((r) => r.monthUsed))).toBe(50);
  });

  it("month-only charges (stream events) share the quota exactly with two processes' calls and take no minute unit", async () => {
    const id = await account();
    const a = bed.store().s;
    const b = bed.store().s;
    const calls = Array.from({ length: 60 }, (_, i) => admit(i % 2 ? a : b, id, 100, 1000));
    const charges = Array.from({ length: 90 }, (_, i) => (i % 2 ? a : b).chargeMonth(id, PERIOD, MINUTE, 100));
    const [admitted, charged] = await Promise.all([Promise.all(calls), Promise.all(charges)]);
    const okCalls = admitted.filter((r) => r.outcome === 'ok').length;
    const okCharges = charged.filter(Boolean).length;
    // never over; a unit still leased by the other process when a charge came is given back at close
    expect(okCalls + okCharges).toBeLessThanOrEqual(100);
    for (let i = 0; i < okCalls; i++) (i % 2 ? a : b).succeeded(id, PERIOD);
    await a.close();
    await b.close();
    // the minute counts the calls only (credit given back at close leaves the admitted ones)
    expect(await minuteCount(id)).toBe(okCalls);
    // what was given back is charged by a third process until the month is spent: exactly 100 in all
    const c = bed.store().s;
    let late = 0;
    while (late <= 100 && (await c.chargeMonth(id, PERIOD, MINUTE, 100))) late++;
    expect(okCalls + okCharges + late).toBe(100);
    await c.close();
    expect(await dbUsed(id)).toBe(100);
    // a spent month refuses a charge, on either process
    expect(await bed.store().s.chargeMonth(id, PERIOD, MINUTE, 100)).toBe(false);
  });

  it('a month-only charge rebuilds a flushed counter from PostgreSQL and its own unwritten charges', async () => {
    const id = await account();
    const { s } = bed.store();
    for (let i = 0; i < 5; i++) expect(await s.chargeMonth(id, PERIOD, MINUTE, 10)).toBe(true);
    await s.flush();
    for (let i = 0; i < 2; i++) expect(await s.chargeMonth(id, PERIOD, MINUTE, 10)).toBe(true);
    await bed.redis.del(monthKey(id, PERIOD));
    const more = [];
    for (let i = 0; i < 5; i++) more.push(await s.chargeMonth(id, PERIOD, MINUTE, 10));
    expect(more).toEqual([true, true, true, false, false]);
    await s.flush();
    expect(await dbUsed(id)).toBe(10);
    expect(await minuteCount(id)).toBe(0);
  });

  it('successes are written to usage_daily under the UTC day of the write, together with usage_monthly', async () => {
    const id = await account();
    const other = await account();
    let t = Date.parse('2026-11-05T23:59:59.000Z');
    const { s } = bed.store({ now: () => t });
    const day = async (d: string) =>
      (await bed.db.usageDaily.findUnique({ where: { accountId_day: { accountId: id, day: new Date(d) } } }))?.used ??
      0;
    for (let i = 0; i < 5; i++) expect((await admit(s, id, 1000)).outcome).toBe('ok');
    for (let i = 0; i < 3; i++) s.succeeded(id, PERIOD);
    await s.flush();
    expect([await day('2026-11-05'), await dbUsed(id)]).toEqual([3, 3]);
    t += 2000; // past midnight UTC: the next write counts for the 6th
    s.succeeded(id, PERIOD);
    s.succeeded(id, PERIOD);
    expect((await admit(s, other, 1000)).outcome).toBe('ok');
    s.succeeded(other, PERIOD);
    await s.flush();
    expect([await day('2026-11-05'), await day('2026-11-06'), await dbUsed(id)]).toEqual([3, 2, 5]);
    // a later write the same day adds to the same row
    expect((await admit(s, id, 1000)).outcome).toBe('ok');
    s.succeeded(id, PERIOD);
    await s.flush();
    expect([await day('2026-11-06'), await dbUsed(id)]).toEqual([3, 6]);
    expect(
      await bed.db.usageDaily.findMany({ where: { accountId: other }, select: { day: true, used: true } }),
    ).toEqual([{ day: new Date('2026-11-06'), used: 1 }]);
    // the month's count and the sum of its days agree: one statement writes both
    const daily = await bed.db.usageDaily.aggregate({ where: { accountId: id }, _sum: { used: true } });
    expect(daily._sum.used).toBe(await dbUsed(id));
  });

  it('a write that fails changes neither table and keeps both counts for the next flush', async () => {
    const id = await account();
    const { s } = bed.store({ now: () => Date.parse('2026-11-07T08:00:00.000Z') });
    for (let i = 0; i < 4; i++) expect((await admit(s, id, 1000)).outcome).toBe('ok');
    for (let i = 0; i < 4; i++) s.succeeded(id, PERIOD);
    // usage_daily missing for a moment: the one statement fails as a whole
    await bed.db.$executeRawUnsafe('ALTER TABLE usage_daily RENAME TO usage_daily_away');
    try {
      await expect(s.flush()).rejects.toThrow();
      expect(await dbUsed(id)).toBe(0);
    } finally {
      await bed.db.$executeRawUnsafe('ALTER TABLE usage_daily_away RENAME TO usage_daily');
    }
    await s.flush();
    const day = await bed.db.usageDaily.findUnique({
      where: { accountId_day: { accountId: id, day: new Date('2026-11-07') } },
    });
    expect([await dbUsed(id), day?.used]).toEqual([4, 4]);
  });

  it('two processes sharing Redis admit exactly the quota between them', async () => {
    const id = await account();
    const a = bed.store().s;
    const b = bed.store().s;
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => admit(i % 2 === 0 ? a : b, id, 50)));
    expect(results.filter((r) => r.outcome === 'ok')).toHaveLength(50);
    expect(await used(id)).toBe(50);
  });

  it('the per-minute limit counts leased units too: exactly the limit per minute, then 429 until the next one', async () => {
    const id = await account();
    const { s } = bed.store();
    const results = await Promise.all(Array.from({ length: 25 }, () => admit(s, id, 1000, 10)));
    expect(results.filter((r) => r.outcome === 'ok')).toHaveLength(10);
    expect(results.filter((r) => r.outcome === 'rate_limited')).toHaveLength(15);
    expect(await minuteCount(id)).toBe(10);
    expect((await admit(s, id, 1000, 10, MINUTE + 1)).outcome).toBe('ok');
  });

  it('a failed call gives its unit back: the next call uses it, and close() returns what is left', async () => {
    const id = await account();
    const { s } = bed.store();
    const first = await admit(s, id, 1);
    expect(first.outcome).toBe('ok');
    expect((await admit(s, id, 1)).outcome).toBe('quota_exceeded');
    s.release(id, PERIOD, MINUTE);
    const again = await admit(s, id, 1);
    expect(again.outcome).toBe('ok');
    s.release(id, PERIOD, MINUTE);
    expect(await used(id)).toBe(1); // held as credit
    await s.close();
    expect(await used(id)).toBe(0);
    expect(await minuteCount(id)).toBe(2); // both admitted calls count in their minute, failed or not
  });

  it('failed calls use no quota but count against the per-minute limit', async () => {
    const id = await account();
    const { s } = bed.store();
    for (let i = 0; i < 3; i++) {
      expect((await admit(s, id, 100, 3)).outcome).toBe('ok');
      s.release(id, PERIOD, MINUTE);
    }
    const fourth = await admit(s, id, 100, 3);
    expect(fourth.outcome).toBe('rate_limited');
    expect(fourth.minuteUsed).toBe(3);
    await s.close();
    expect(await used(id)).toBe(0);
    expect(await minuteCount(id)).toBe(3);
    // the next minute starts afresh
    const { s: s2 } = bed.store();
    expect((await admit(s2, id, 100, 3, MINUTE + 1)).outcome).toBe('ok');
  });

  it('blocks grow with demand, and credit left idle goes back so another process can use it', async () => {
    const id = await account();
    const a = bed.store({ idleReturnMs: 100 }).s;
    // a busy burst: blocks double while each lasts less than leaseMs
    let ok = 0;
    for (let i = 0; i < 300; i++) if ((await admit(a, id, 1000)).outcome === 'ok') ok++;
    for (let i = 0; i < ok; i++) a.succeeded(id, PERIOD);
    expect(ok).toBe(300);
    const held = (await used(id)) - 300;
    expect(held).toBeGreaterThan(0); // a block larger than one call was leased
    await sleep(400);
    expect(await used(id)).toBe(300);
    // the other process gets everything that is left
    const b = bed.store().s;
    const rest = await Promise.all(Array.from({ length: 800 }, () => admit(b, id, 1000)));
    expect(rest.filter((r) => r.outcome === 'ok')).toHaveLength(700);
  });

  it('near the end of the quota a lease is at most a quarter of what remains, so two processes share it', async () => {
    const id = await account();
    const a = bed.store().s;
    const b = bed.store().s;
    // 200 calls at once on a: blocks of at most a quarter of what remains (60, 45, 33, …)
    const burst = await Promise.all(Array.from({ length: 200 }, () => admit(a, id, 240)));
    expect(burst.every((r) => r.outcome === 'ok')).toBe(true);
    const heldByA = (await used(id)) - 200;
    expect(heldByA).toBeGreaterThanOrEqual(0);
    expect(heldByA).toBeLessThanOrEqual(10); // the last block was leased with ≤ 44 left
    const bResults = await Promise.all(Array.from({ length: 40 }, () => admit(b, id, 240)));
    expect(bResults.filter((r) => r.outcome === 'ok')).toHaveLength(40 - heldByA);
    expect(await used(id)).toBe(240);
  });

  it('at a minute change the old credit goes back to the month; the new minute leases afresh', async () => {
    const id = await account();
    const { s } = bed.store();
    for (let i = 0; i < 50; i++) await admit(s, id, 10_000);
    const held = await used(id);
    expect(held).toBeGreaterThan(50);
    const r = await admit(s, id, 10_000, 1_000_000, MINUTE + 1);
    expect(r.outcome).toBe('ok');
    await sleep(50); // the give-back is sent without waiting
    // 50 calls of the old minute + the new minute's lease (its credit is held, the old one is back)
    expect((await used(id)) - (await minuteCount(id, MINUTE + 1))).toBe(50);
  });

  it('a Redis flush keeps the count: rebuilt from PostgreSQL, unwritten successes, calls in flight and credit', async () => {
    const id = await account();
    const { s } = bed.store();
    const results: Admission[] = [];
    for (let i = 0; i < 30; i++) results.push(await admit(s, id, 1000));
    for (let i = 0; i < 10; i++) s.succeeded(id, PERIOD);
    await s.flush(); // 10 in PostgreSQL
    for (let i = 0; i < 10; i++) s.succeeded(id, PERIOD); // 10 not yet written; 10 still in flight
    const heldBefore = await used(id);
    await bed.redis.del(monthKey(id, PERIOD));
    // the credit runs out at some point and the next lease rebuilds the counter
    for (let i = 0; i < heldBefore - 30 + 1; i++) expect((await admit(s, id, 1000)).outcome).toBe('ok');
    // 30 earlier + those admitted since, all of them counted again
    expect(await used(id)).toBeGreaterThanOrEqual(30 + heldBefore - 30 + 1);
    const epoch = await bed.redis.hget(monthKey(id, PERIOD), 'e');
    expect(epoch).toMatch(/^[0-9a-f]{16}$/);
  });

  it('credit goes back only into the counter it was leased from, never into one another process rebuilt', async () => {
    const id = await account();
    const a = bed.store().s;
    for (let i = 0; i < 40; i++) await admit(a, id, 1000);
    const heldByA = (await used(id)) - 40;
    expect(heldByA).toBeGreaterThan(0);
    await bed.redis.del(monthKey(id, PERIOD));
    // b rebuilds from what it knows: nothing in PostgreSQL, nothing of its own
    const b = bed.store().s;
    expect((await admit(b, id, 1000)).outcome).toBe('ok');
    const afterRebuild = await used(id);
    await a.close(); // a's credit belongs to the old counter: not subtracted from the new one
    expect(await used(id)).toBe(afterRebuild);
  });

  it('with Redis gone, calls are served from credit already held, then refused with an error', async () => {
    const id = await account();
    const { s, client } = bed.store();
    for (let i = 0; i < 40; i++) await admit(s, id, 1000);
    const credit = (await used(id)) - 40;
    expect(credit).toBeGreaterThan(0);
    client.disconnect();
    for (let i = 0; i < credit; i++) expect((await admit(s, id, 1000)).outcome).toBe('ok');
    await expect(admit(s, id, 1000)).rejects.toThrow();
  });
});
