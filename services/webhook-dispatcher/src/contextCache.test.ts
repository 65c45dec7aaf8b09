/**
 * The monitor cache's rules on a hand-driven clock: served only while trusted, a read kept only
 * when nothing was announced during it, announcements by monitor and by account, the dispatcher's
 * own endpoint writes, age and size bounds.
 */
import type { MonitorContext } from './adapters/monitorReader';
import { MonitorContextCache } from './contextCache';

function context(id: string, accountId = 'acct-1', endpointId: string | null = `ep-${id}`): MonitorContext {
  return {
    id,
    accountId,
    targetUsername: 'NASA',
    keywords: [],
    isActive: true,
    plan: 'starter',
    trialEndsAt: null,
    webhook: endpointId
      ? {
          id: endpointId,
          url: 'https://hooks.example.com/in',
          kind: 'native',
          secretCiphertext: 'c',
          previousSecretCiphertext: null,
          previousSecretUntil: null,
          isBroken: false,
          brokenReason: null,
          consecutiveFailures: 0,
          firstFailureAt: null,
          disabledAt: null,
          retryPolicy: 'none',
          ordering: 'unordered',
          heldCount: 0,
        }
      : null,
  };
}

describe('MonitorContextCache', () => {
  let clock: number;
  let cache: MonitorContextCache;

  beforeEach(() => {
    clock = 1_000_000;
    cache = new MonitorContextCache({ maxAgeMs: 60_000, maxEntries: 3, now: () => clock });
    cache.confirm(clock + 2_500);
  });

  /** a read of `m` that nothing overtook */
  const read = (m: MonitorContext) => cache.keep(m, cache.epoch());

  it('serves what was read while trusted, and counts hits and misses', () => {
    expect(cache.get('m1')).toBeUndefined();
    read(context('m1'));
    expect(cache.get('m1')?.id).toBe('m1');
    expect(cache.counts).toEqual({ hit: 1, miss: 1, untrusted: 0 });
  });

  it('serves nothing once the heartbeat is late, and forgets what it held', () => {
    read(context('m1'));
    clock += 2_500;
    expect(cache.get('m1')).toBeUndefined();
    expect(cache.counts.untrusted).toBe(1);
    // trust comes back with a heartbeat, but not the entries: announcements may have been missed
    cache.confirm(clock + 2_500);
    expect(cache.get('m1')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('keeps nothing while untrusted, and drops everything on distrust()', () => {
    read(context('m1'));
    cache.distrust();
    expect(cache.size).toBe(0);
    read(context('m2'));
    expect(cache.size).toBe(0);
  });

  it('does not keep a read that an announcement overtook, nor one that began before trust came back', () => {
    const epoch = cache.epoch();
    cache.changed('m1');
    cache.keep(context('m1'), epoch);
    expect(cache.get('m1')).toBeUndefined();

    cache.distrust();
    const before = cache.epoch();
    cache.confirm(clock + 2_500);
    cache.keep(context('m2'), before);
    expect(cache.get('m2')).toBeUndefined();
  });

  it('an announcement drops its monitor; an account announcement drops every monitor of that account', () => {
    read(context('m1', 'acct-1'));
    read(context('m2', 'acct-1'));
    read(context('m3', 'acct-2'));
    cache.changed('m1');
    expect(cache.get('m1')).toBeUndefined();
    expect(cache.get('m2')).toBeDefined();
    cache.changed('a:acct-1');
    expect(cache.get('m2')).toBeUndefined();
    expect(cache.get('m3')?.id).toBe('m3');
  });

  it("the dispatcher's own endpoint write drops the endpoint's monitor", () => {
    read(context('m1', 'acct-1', 'ep-a'));
    read(context('m2', 'acct-1', 'ep-b'));
    cache.endpointWritten('ep-a');
    expect(cache.get('m1')).toBeUndefined();
    expect(cache.get('m2')?.id).toBe('m2');
    // an entry read again with another endpoint no longer answers to the old one
    read(context('m2', 'acct-1', 'ep-c'));
    cache.endpointWritten('ep-b');
    expect(cache.get('m2')?.id).toBe('m2');
  });

  it('an entry lives at most maxAgeMs, and at most maxEntries are held (oldest first)', () => {
    read(context('m1'));
    clock += 1_000;
    cache.confirm(clock + 100_000);
    read(context('m2'));
    read(context('m3'));
    read(context('m4'));
    expect(cache.size).toBe(3);
    expect(cache.get('m1')).toBeUndefined();
    expect(cache.get('m4')?.id).toBe('m4');
    clock += 59_000;
    expect(cache.get('m2')?.id).toBe('m2');
    clock += 1_000;
    expect(cache.get('m2')).toBeUndefined();
    expect(cache.size).toBe(2);
  });
});
