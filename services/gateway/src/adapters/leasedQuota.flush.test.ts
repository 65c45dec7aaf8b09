/**
 * Leased quota across a Redis flush with several gateway processes (stores), against real Redis and
 * PostgreSQL: the process that rebuilds the month counter only knows its own outstanding units, so
 * every other process adds its own (successes not yet written, calls in flight, credit held,
 * write-throughs the rebuild's read did not see) the first time it meets the new epoch. "Flush" here
 * deletes this test's keys (its own prefix), never the shared Redis.
 */
import { createAccount } from '@sts/testing';
import { monthKey, type QuotaStore } from './leasedQuota';
import { useQuotaBed } from '../../test/quotaBed';

const PERIOD = '2026-11';
const MINUTE = 29_000_000;
const BIG = 1_000_000; // per-minute limit out of the way: the minute counter restarts at 0 after a flush

describe('leased quota across a Redis flush', () => {
  const bed = useQuotaBed({ poolSize: 6 });
  const store = () => bed.store().s;

  const account = async () => (await createAccount(bed.db, 'free')).id;

  /** the Redis flush, limited to this test's keys */
  const flushRedis = () => bed.redisHandle.cleanup();
  const used = async (id: string) => Number(await bed.redis.hget(monthKey(id, PERIOD), 'u'));
  const dbUsed = async (id: string) =>
    (await bed.db.usageMonthly.findUnique({ where: { accountId_period: { accountId: id, period: PERIOD } } }))?.used ??
    0;
  const admit = (s: QuotaStore, id: string, quota: number) => Promise.resolve(s.admit(id, PERIOD, MINUTE, quota, BIG));

  /** `n` admitted calls on `s`, each settled as a success (not yet written through) */
  async function succeed(s: QuotaStore, id: string, quota: number, n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
      expect((await admit(s, id, quota)).outcome).toBe('ok');
      s.succeeded(id, PERIOD);
    }
  }

  /** `calls` concurrent calls spread round-robin over the stores, the admitted ones succeed */
  async function burst(gateways: QuotaStore[], id: string, quota: number, calls: number): Promise<number> {
    const results = await Promise.all(
      Array.from({ length: calls }, async (_, i) => {
        const g = gateways[i % gateways.length]!;
        const r = await admit(g, id, quota);
        if (r.outcome === 'ok') g.succeeded(id, PERIOD);
        return r.outcome;
      }),
    );
    expect(results.every((o) => o === 'ok' || o === 'quota_exceeded')).toBe(true);
    return results.filter((o) => o === 'ok').length;
  }

  it('two processes with 30 unwritten successes each, flush, both keep admitting: never more than the quota', async () => {
    const id = await account();
    const [a, b] = [store(), store()];
    await succeed(a, id, 100, 30);
    await succeed(b, id, 100, 30);
    await flushRedis();
    const after = await burst([a, b], id, 100, 200);
    expect(60 + after).toBeLessThanOrEqual(100);
    expect(60 + after).toBeGreaterThanOrEqual(95); // errs towards refusing, by little
    await Promise.all([a.flush(), b.flush()]);
    expect(await dbUsed(id)).toBe(60 + after);
  });

  it('three processes with written, unwritten, in-flight calls and credit each, flushed twice: the quota holds and usage_monthly is exact', async () => {
    const id = await account();
    const gateways = [store(), store(), store()];
    const QUOTA = 300;
    let admitted = 0;
    const inFlight: QuotaStore[] = [];
    for (const g of gateways) {
      await succeed(g, id, QUOTA, 20);
      await g.flush(); // 20 written through
      await succeed(g, id, QUOTA, 15); // 15 not yet written
      for (let i = 0; i < 10; i++) {
        expect((await admit(g, id, QUOTA)).outcome).toBe('ok'); // 10 in flight
        inFlight.push(g);
      }
      admitted += 45;
    }
    expect((await used(id)) - admitted).toBeGreaterThan(0); // credit held besides
    await flushRedis();
    // one process writes through right after the flush, another finishes its calls in flight
    await gateways[0]!.flush();
    for (const g of inFlight.splice(0, 10)) g.succeeded(id, PERIOD);
    admitted += await burst(gateways, id, QUOTA, 60);
    await flushRedis(); // and again, while the others still hold the first rebuild's epoch
    for (const g of inFlight.splice(0)) g.succeeded(id, PERIOD);
    admitted += await burst(gateways, id, QUOTA, 400);
    expect(admitted).toBeLessThanOrEqual(QUOTA);
    expect(admitted).toBeGreaterThanOrEqual(QUOTA - 10);
    await Promise.all(gateways.map((g) => g.flush()));
    expect(await dbUsed(id)).toBe(admitted);
  });

  it('a process idle after the flush still counts: its later write-through adds what the rebuild missed', async () => {
    const id = await account();
    const a = store();
    await succeed(a, id, 50, 30); // 30 not yet written, then a stays idle
    await flushRedis();
    const b = store();
    expect((await admit(b, id, 50)).outcome).toBe('ok'); // b rebuilds: PostgreSQL has 0 of a's 30
    b.succeeded(id, PERIOD);
    await a.flush(); // a writes its 30 and, the epoch being new, adds them to the counter
    await a.close(); // and gives back its credit (now into the new counter)
    const rest = await burst([b], id, 50, 60);
    expect(31 + rest).toBe(50);
    await b.flush();
    expect(await dbUsed(id)).toBe(50);
  });

  it('a process with only calls in flight, touching Redis for nothing else, is counted within the grace period', async () => {
    const id = await account();
    const a = store();
    await succeed(a, id, 40, 5);
    await a.flush(); // 5 in usage_monthly
    for (let i = 0; i < 20; i++) expect((await admit(a, id, 40)).outcome).toBe('ok'); // 20 long calls
    await flushRedis();
    const b = store();
    // b rebuilds from PostgreSQL (5) and waits out the grace period; a's periodic check adds its 20
    // calls in flight and its credit meanwhile
    const rest = await burst([b], id, 40, 40);
    for (let i = 0; i < 20; i++) a.succeeded(id, PERIOD);
    expect(25 + rest).toBeLessThanOrEqual(40);
    expect(25 + rest).toBeGreaterThanOrEqual(40 - 10); // a's credit stays counted while a holds it
    await Promise.all([a.flush(), b.flush()]);
    expect(await dbUsed(id)).toBe(25 + rest);
  });

  it('a process whose write-through lands before the rebuild is in Redis rebuilds the counter itself', async () => {
    const id = await account();
    const a = store();
    await succeed(a, id, 40, 25);
    await flushRedis();
    await a.flush(); // nobody has rebuilt yet: a's write-through finds no counter and rebuilds it
    expect(await used(id)).toBeGreaterThanOrEqual(25);
    const b = store();
    const rest = await burst([b], id, 40, 40);
    expect(25 + rest).toBeLessThanOrEqual(40);
    expect(25 + rest).toBeGreaterThanOrEqual(38);
  });
});
