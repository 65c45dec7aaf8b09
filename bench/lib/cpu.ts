/**
 * CPU used by process groups over an interval (Linux /proc, read by ../load.ts; elsewhere every
 * figure is NaN): the whole machine, given pids, and every process of a given command name (all of
 * PostgreSQL's backends, say, whoever they serve). For a bench on a shared machine: which process
 * the cores went to.
 */
import { commandCpuMicros, cpuMs, machineBusyMicros } from '../load';

/** one reading: group → CPU seconds so far, and the wall clock (s) */
export type CpuReading = { at: number; groups: Map<string, number> };

const orNaN = (read: () => number): number => {
  try {
    return read();
  } catch {
    return NaN;
  }
};

/** CPU seconds so far of `machine` (every core, busy time), each of `pids` and each command in `comms` */
export function readCpu(pids: Record<string, number | undefined>, comms: readonly string[]): CpuReading {
  const groups = new Map<string, number>([['machine', orNaN(machineBusyMicros) / 1e6]]);
  for (const [name, pid] of Object.entries(pids)) groups.set(name, pid ? cpuMs(pid) / 1000 : NaN);
  for (const c of comms) groups.set(c, orNaN(() => commandCpuMicros(c)) / 1e6);
  return { at: Date.now() / 1000, groups };
}

/** cores busy on average between two readings, per group: `name cores` pairs for a report line */
export function coresBetween(start: CpuReading, end: CpuReading): string {
  const wall = end.at - start.at;
  return [...end.groups]
    .map(([name, s]) => `${name}_cores ${((s - (start.groups.get(name) ?? NaN)) / wall).toFixed(2)}`)
    .join(' ');
}
