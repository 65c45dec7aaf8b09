/**
 * Monitor contexts (adapters/monitorReader.ts MonitorContext) kept between deliveries, so a monitor
 * that fires again is not read again. PostgreSQL announces every change to what a context holds
 * (channel sts_monitor_context, migration 20261126180000_monitor_context_notify); the announcement
 * drops the entry (adapters/contextChanges.ts feeds them in).
 *
 * Invariants:
 * - An entry is served only while the announcements are known to arrive: `confirm(until)` says
 *   the listening session proved itself (a heartbeat another session sent came back) and stays
 *   trusted until `until`. Past it, or after `distrust()`, nothing is served and the entries are gone: what was
 *   announced meanwhile may have been missed.
 * - A read is kept only if nothing was announced (or dropped) while it ran: `epoch()` before the
 *   read, `keep(…, epoch)` after. So an announcement that overtakes the read's answer wins.
 * - An entry lives at most `maxAgeMs`; at most `maxEntries` are held (the oldest go first).
 */

/** what the cache needs of a context: its monitor, account and endpoint ids */
interface Context {
  id: string;
  accountId: string;
  webhook: { id: string } | null;
}

interface Entry<C> {
  value: C;
  at: number;
}

export interface ContextCacheOptions {
  maxAgeMs: number;
  maxEntries?: number;
  now?: () => number;
}

/** look-ups by result: served, read (not held or too old), read because the cache was not trusted */
type CacheResult = 'hit' | 'miss' | 'untrusted';

export class MonitorContextCache<C extends Context = Context> {
  private readonly entries = new Map<string, Entry<C>>();
  /** webhook endpoint id → monitor id, for the dispatcher's own endpoint writes */
  private readonly endpoints = new Map<string, string>();
  private epochNo = 0;
  private trustedUntil = 0;
  private readonly maxEntries: number;
  private readonly now: () => number;
  readonly counts: Record<CacheResult, number> = { hit: 0, miss: 0, untrusted: 0 };
  /** announcements heard (`changed`), whether or not they dropped an entry */
  announcements = 0;

  constructor(private readonly options: ContextCacheOptions) {
    this.maxEntries = options.maxEntries ?? 20_000;
    this.now = options.now ?? Date.now;
  }

  /** the monitor's context, when held, fresh and trusted */
  get(id: string): C | undefined {
    const now = this.now();
    if (!this.trusted(now)) {
      this.counts.untrusted++;
      return undefined;
    }
    const entry = this.entries.get(id);
    if (entry && now - entry.at >= this.options.maxAgeMs) this.forget(id, entry);
    else if (entry) {
      this.counts.hit++;
      return entry.value;
    }
    this.counts.miss++;
    return undefined;
  }

  /** the count to hand to `keep` for a read starting now */
  epoch(): number {
    return this.epochNo;
  }

  /** keeps a read's answer, unless something was announced since `epoch` or trust is gone */
  keep(value: C, epoch: number): void {
    const now = this.now();
    if (epoch !== this.epochNo || !this.trusted(now)) return;
    const old = this.entries.get(value.id);
    if (old) this.forget(value.id, old);
    else if (this.entries.size >= this.maxEntries) {
      const [oldestId, oldest] = this.entries.entries().next().value!;
      this.forget(oldestId, oldest);
    }
    this.entries.set(value.id, { value, at: now });
    if (value.webhook) this.endpoints.set(value.webhook.id, value.id);
  }

  /** an announcement: "<monitor id>" or "a:<account id>" */
  changed(payload: string): void {
    this.epochNo++;
    this.announcements++;
    if (!payload.startsWith('a:')) return this.drop(payload);
    const accountId = payload.slice(2);
    for (const [id, entry] of this.entries) if (entry.value.accountId === accountId) this.forget(id, entry);
  }

  /** the dispatcher wrote the endpoint itself (health, broken flag): its monitor is read again */
  endpointWritten(endpointId: string): void {
    this.epochNo++;
    const monitorId = this.endpoints.get(endpointId);
    if (monitorId !== undefined) this.drop(monitorId);
  }

  /** the listening session proved itself: entries may be served until `until` */
  confirm(until: number): void {
    if (!this.trusted(this.now())) this.clear();
    this.trustedUntil = until;
  }

  /** the listening session is gone or late: nothing is served until it proves itself again */
  distrust(): void {
    this.trustedUntil = 0;
    this.clear();
  }

  get size(): number {
    return this.entries.size;
  }

  private trusted(now: number): boolean {
    if (now < this.trustedUntil) return true;
    if (this.entries.size) this.clear();
    return false;
  }

  private drop(id: string): void {
    const entry = this.entries.get(id);
    if (entry) this.forget(id, entry);
  }

  private forget(id: string, entry: Entry<C>): void {
    this.entries.delete(id);
    if (entry.value.webhook) this.endpoints.delete(entry.value.webhook.id);
  }

  private clear(): void {
    this.epochNo++;
    this.entries.clear();
    this.endpoints.clear();
  }
}
