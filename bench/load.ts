/**
 * Bench helpers: a fixed-rate HTTP load with sub-millisecond latency figures (autocannon's
 * histogram has 1 ms resolution, too coarse to see what a proxy hop adds at moderate load), and
 * the CPU time a process has used (Linux /proc), to report CPU per request.
 */
import fs from 'node:fs';
import http from 'node:http';

export interface FixedRateResult {
  sent: number;
  ok: number;
  failed: number;
  p50: number;
  p99: number;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/**
 * Sends GET `url` at `rate` requests a second for `seconds` (open loop: a slow answer does not
 * hold back the next requests), over up to `connections` keep-alive sockets; latency is measured
 * from sending a request to the end of its answer.
 */
export async function fixedRate(
  url: string,
  headers: Record<string, string>,
  rate: number,
  seconds: number,
  connections = 32,
): Promise<FixedRateResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const target = new URL(url);
  const latencies: number[] = [];
  let failed = 0;
  let sent = 0;
  const total = Math.round(rate * seconds);
  const start = performance.now();
  const inflight = new Set<Promise<void>>();
  const one = () =>
    new Promise<void>((resolve) => {
      const sentAt = performance.now();
      const req = http.get(
        { agent, hostname: target.hostname, port: target.port, path: target.pathname + target.search, headers },
        (res) => {
          res.resume();
          res.on('end', () => {
            if (res.statusCode === 200) latencies.push(performance.now() - sentAt);
            else failed++;
            resolve();
          });
        },
      );
      req.on('error', () => {
        failed++;
        resolve();
      });
    });
  while (sent < total) {
    const elapsed = performance.now() - start;
    const due = Math.min(total, Math.floor((elapsed / 1000) * rate) + 1);
    for (; sent < due; sent++) {
      const p = one().finally(() => inflight.delete(p));
      inflight.add(p);
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  await Promise.all(inflight);
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return { sent, ok: latencies.length, failed, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

/**
 * A process's command and the clock ticks (user + system; USER_HZ is 100 on Linux) it has used so
 * far, from its /proc/<pid>/stat line (the command may hold spaces and parentheses: it ends at the
 * last ')')
 */
function processTicks(stat: string): { command: string; ticks: number } {
  const close = stat.lastIndexOf(')');
  const fields = stat.slice(close + 2).split(' ');
  return { command: stat.slice(stat.indexOf('(') + 1, close), ticks: Number(fields[11]) + Number(fields[12]) };
}

/** CPU milliseconds (user + system) a process has used so far; NaN where /proc is missing. */
export function cpuMs(pid: number): number {
  try {
    return processTicks(fs.readFileSync(`/proc/${pid}/stat`, 'utf8')).ticks * 10;
  } catch {
    return NaN;
  }
}

/** times a process's main thread went to sleep waiting (Linux voluntary context switches); NaN where missing */
export function sleeps(pid: number): number {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(/^voluntary_ctxt_switches:\s+(\d+)$/m.exec(status)?.[1] ?? NaN);
  } catch {
    return NaN;
  }
}

/** CPU time (µs) the whole machine spent busy so far: every process and the kernel (Linux /proc/stat) */
export function machineBusyMicros(): number {
  const cpu = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal: everything but idle and iowait
  const busy = cpu.slice(0, 8).reduce((n, v, i) => (i === 3 || i === 4 ? n : n + v), 0);
  return (busy * 1e6) / 100;
}

/**
 * CPU time (µs) every process whose command is `command` (Linux /proc/<pid>/stat: `postgres` for
 * the database server and its backends) has used so far; processes that ended meanwhile are lost
 */
export function commandCpuMicros(command: string): number {
  let ticks = 0;
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const p = processTicks(fs.readFileSync(`/proc/${entry}/stat`, 'utf8'));
      if (p.command === command) ticks += p.ticks;
    } catch {
      // the process ended meanwhile
    }
  }
  return (ticks * 1e6) / 100;
}

/** read and write system calls a process has made so far (Linux /proc/<pid>/io); NaN where it is missing */
export function syscalls(pid: number): { reads: number; writes: number } {
  try {
    const io = fs.readFileSync(`/proc/${pid}/io`, 'utf8');
    const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, 'm').exec(io)?.[1] ?? NaN);
    return { reads: field('syscr'), writes: field('syscw') };
  } catch {
    return { reads: NaN, writes: NaN };
  }
}
