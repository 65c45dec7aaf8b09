/**
 * The holder's view of the stream's targets, kept by reading what changed: the first read takes
 * every active target, later ones only the targets stamped in `x_stream_changes` since the last
 * look (an index on the change time; a look re-reads `marginMs` behind the previous one, so a
 * change committed late is not missed). Every `fullMs` (and after a failed read) it reads all
 * targets again: trials end by the clock, without a change row.
 */
import type { StreamRepository, StreamTarget } from './repository';

export class StreamTargets {
  private readonly byKey = new Map<string, StreamTarget>();
  private lastLook: Date | null = null;
  private lastFull = 0;

  constructor(
    private readonly repository: Pick<StreamRepository, 'targets' | 'changedSince' | 'clock'>,
    private readonly fullMs = 300_000,
    private readonly marginMs = 10_000,
  ) {}

  get(key: string): StreamTarget | undefined {
    return this.byKey.get(key);
  }

  all(): StreamTarget[] {
    return [...this.byKey.values()];
  }

  /** reads what changed; true when any target was (re)read */
  async refresh(): Promise<boolean> {
    try {
      if (this.lastLook === null || Date.now() - this.lastFull >= this.fullMs) return await this.full();
      const { keys, at } = await this.repository.changedSince(new Date(this.lastLook.getTime() - this.marginMs));
      const previous = this.lastLook;
      this.lastLook = at;
      if (keys.length === 0) return false;
      const fresh = await this.repository.targets(keys).catch((err: unknown) => {
        this.lastLook = previous;
        throw err;
      });
      const found = new Map(fresh.map((t) => [t.targetKey, t]));
      let changed = false;
      for (const key of keys) {
        const t = found.get(key);
        const before = this.byKey.get(key);
        if (t) this.byKey.set(key, t);
        else this.byKey.delete(key);
        if (!sameTarget(before, t)) changed = true;
      }
      return changed;
    } catch (err) {
      this.lastLook = null;
      throw err;
    }
  }

  private async full(): Promise<boolean> {
    const at = await this.repository.clock();
    const targets = await this.repository.targets();
    this.byKey.clear();
    for (const t of targets) this.byKey.set(t.targetKey, t);
    this.lastLook = at;
    this.lastFull = Date.now();
    return true;
  }

  /** the next refresh reads every target */
  reset(): void {
    this.lastLook = null;
  }
}

/** the same plans, monitors and filters (a change elsewhere, e.g. keywords, is no rule change) */
function sameTarget(a: StreamTarget | undefined, b: StreamTarget | undefined): boolean {
  if (!a || !b) return a === b;
  return JSON.stringify([a.accounts, a.monitors]) === JSON.stringify([b.accounts, b.monitors]);
}
