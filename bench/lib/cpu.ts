/**
 * CPU used by process groups over an interval, read from /proc (Linux; elsewhere every figure is
 * NaN): the whole machine, given pids, and every process of a given command name (all of
 * PostgreSQL's backends, say, whoever they serve). For a bench on a shared machine: which process
 * the cores went to.
 */
import { readdirSync, readFileSync } from 'node:fs';

const TICKS_PER_S = 100;

/** one reading: group → CPU seconds so far, and the wall clock (s) */
export type CpuReading = { at: number; groups: Map<string, number> };

function ticksOf(pid: number | string): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the fields after the command name (which may hold spaces) in parentheses
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(f[11]) + Number(f[12]); // utime, stime
  } catch {
    return NaN;
  }
}

function commOf(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

/** CPU seconds so far of `machine` (every core, busy time), each of `pids` and each command in `comms` */
export function readCpu(pids: Record<string, number | undefined>, comms: readonly string[]): CpuReading {
  const groups = new Map<string, number>();
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const idle = (cpu[3] ?? 0) + (cpu[4] ?? 0);
    groups.set('machine', (cpu.reduce((a, b) => a + b, 0) - idle) / TICKS_PER_S);
  } catch {
    groups.set('machine', NaN);
  }
  for (const [name, pid] of Object.entries(pids)) groups.set(name, pid ? ticksOf(pid) / TICKS_PER_S : NaN);
  const byComm = new Map(comms.map((c) => [c, 0]));
  let entries: string[] = [];
  try {
    entries = readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    for (const c of comms) byComm.set(c, NaN);
  }
  for (const pid of entries) {
    const c = commOf(pid);
    if (byComm.has(c)) byComm.set(c, byComm.get(c)! + (ticksOf(pid) || 0) / TICKS_PER_S);
  }
  for (const [c, s] of byComm) groups.set(c, s);
  return { at: Date.now() / 1000, groups };
}

/** cores busy on average between two readings, per group: `name cores` pairs for a report line */
export function coresBetween(start: CpuReading, end: CpuReading): string {
  const wall = end.at - start.at;
  return [...end.groups]
    .map(([name, s]) => `${name}_cores ${((s - (start.groups.get(name) ?? NaN)) / wall).toFixed(2)}`)
    .join(' ');
}
