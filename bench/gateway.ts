/**
 * Gateway benchmark: GET /api/v1/users/:username through the gateway and straight to read-api
 * (with the internal headers), in one run.
 *
 * 1. Saturation: autocannon, BENCH_CONNECTIONS (50) connections for BENCH_DURATION_SECONDS (5 s)
 *    per run, after a warm-up, in BENCH_ROUNDS (5) rounds that alternate the order (direct then
 *    gateway, gateway then direct, …) so a machine whose speed drifts during the bench (shared
 *    cores, other jobs) weighs on both sides alike: requests/s and p50/p99 of both, the ratio, and
 *    the CPU each service spent per request. The summary takes the median round. BENCH_PIPELINING
 *    (1) > 1 makes each connection keep that many requests in flight (an extra mode, labelled).
 * 2. Moderate load: BENCH_FIXED_RATE (1000) requests/s for the same duration, latency measured to
 *    0.01 ms (autocannon's histogram is in whole ms), to show what the hop adds when nothing queues;
 *    three alternating rounds, the added p50 and p99 are the medians of the rounds' differences.
 *
 * The last line reads `ratio <r> p50_added_ms <a> p99_added_ms <b>`, from the saturation runs.
 * Target: ratio ≥ 0.8, ≤ 1 ms p50 and ≤ 2 ms p99 added.
 * Uses its own database (dropped at the end) and Redis key prefix; both services run as child
 * processes as in production: the image's bundles (BENCH_RUNTIME=tsx: the sources through tsx; bench/lib/services.ts).
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import { loadDevEnv } from '../packages/common/src';
import { generateApiKey } from '../packages/core/src';
import { createDbClient, type Db } from '../packages/db/src';
import { createSocialUser } from '../packages/social/src';
import { createDatabase, deleteKeys, dropDatabase, postgresAdminUrl, redisUrl, startService } from './lib/services';
import { cpuMs, fixedRate, syscalls } from './load';

const DURATION = Number(process.env.BENCH_DURATION_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const FIXED_RATE = Number(process.env.BENCH_FIXED_RATE ?? 1000);
/** fixed-rate rounds (3); 0 skips the phase (a profiling run) */
const STEADY_ROUNDS = Number(process.env.BENCH_STEADY_ROUNDS ?? 3);
/**
 * calls per round of the serial phase (0, the default, skips it): one connection, one call at a
 * time, so nothing is batched and the gateway's CPU per call hardly depends on how busy the
 * machine is (at saturation it does: the busier the machine, the fewer calls share a wake-up)
 */
const SERIAL_CALLS = Number(process.env.BENCH_SERIAL_CALLS ?? 0);
/** extra node flags for the gateway process only, space-separated (e.g. `--cpu-prof --cpu-prof-dir=.tmp/prof`) */
const GATEWAY_NODE_ARGS = (process.env.BENCH_GATEWAY_NODE_ARGS ?? '').split(' ').filter(Boolean);
/**
 * requests each saturation connection keeps in flight (autocannon's `pipelining`; default 1, the
 * bench as the targets are set). Above 1 the saturation lines are labelled `pipelined`.
 */
const PIPELINING = Number(process.env.BENCH_PIPELINING ?? 1);

/** a service of the system, ready once it logs `ready` with the port it listens on */
async function startListening(
  name: string,
  env: NodeJS.ProcessEnv,
  ready: RegExp,
  nodeArgs: string[] = [],
): Promise<{ child: ChildProcess; port: number }> {
  const { child, line } = await startService(name, { ...process.env, ...env }, { ready, nodeArgs, timeoutMs: 120_000 });
  if (line.port === undefined) throw new Error(`${name} logged no port`);
  return { child, port: line.port };
}

/** one saturation run; `pids` are the processes whose CPU per request is reported */
async function run(url: string, headers: Record<string, string>, pids: Record<string, number>) {
  const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuMs(pid)]));
  const gatewayIo = pids.gateway === undefined ? undefined : syscalls(pids.gateway);
  const load = process.cpuUsage();
  const r = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, headers, pipelining: PIPELINING });
  const loadCpu = process.cpuUsage(load);
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${url}: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
  const cpu = Object.entries(pids)
    .map(([k, pid]) => `${k} ${(((cpuMs(pid) - before[k]!) * 1000) / r.requests.total).toFixed(0)} µs`)
    .concat(`autocannon ${((loadCpu.user + loadCpu.system) / r.requests.total).toFixed(0)} µs`)
    .join(', ');
  // the gateway's read and write system calls per call (load-independent, unlike its CPU time)
  let io = '';
  if (gatewayIo !== undefined) {
    const after = syscalls(pids.gateway!);
    const per = (n: number) => (n / r.requests.total).toFixed(2);
    io = `; gateway syscalls per call: ${per(after.reads - gatewayIo.reads)} reads, ${per(after.writes - gatewayIo.writes)} writes`;
  }
  return {
    rps: r.requests.average,
    p50: r.latency.p50,
    p90: r.latency.p90,
    p97: r.latency.p97_5,
    p99: r.latency.p99,
    cpu: cpu + io,
  };
}

async function steady(url: string, headers: Record<string, string>) {
  const r = await fixedRate(url, headers, FIXED_RATE, DURATION);
  if (r.failed > 0) throw new Error(`${url}: ${r.failed} failed calls at ${FIXED_RATE}/s`);
  return r;
}

type Run = Awaited<ReturnType<typeof run>>;
type Steady = Awaited<ReturnType<typeof steady>>;
const median = (xs: number[]) => (xs.length === 0 ? NaN : [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!);

/** the two services under test, their URLs and the headers each side needs */
interface System {
  direct: string;
  viaGateway: string;
  internal: Record<string, string>;
  auth: Record<string, string>;
  pids: Record<'read-api' | 'gateway', number>;
}

/** an account with a key and a user to read, in the bench's own database; read-api and the gateway started on it */
async function startSystem(db: Db, dbUrl: string, name: string, children: ChildProcess[]): Promise<System> {
  const account = await db.account.create({ data: { email: 'bench@example.com', plan: 'starter' } });
  const key = generateApiKey();
  await db.apiKey.create({ data: { accountId: account.id, keyHash: key.hash, prefix: key.prefix } });
  await createSocialUser(db, { username: 'bench_user', name: 'Bench User', followersCount: 42, verified: true });
  const token = randomBytes(24).toString('base64url');
  const common = { DATABASE_URL: dbUrl, INTERNAL_TOKEN: token, LOG_LEVEL: 'error' };
  const readApi = await startListening(
    'read-api',
    { ...common, READ_API_PORT: '0', READ_API_HOST: '127.0.0.1', OPS_PORT: '0' },
    /read-api listening/,
  );
  children.push(readApi.child);
  const gateway = await startListening(
    'gateway',
    {
      ...common,
      GATEWAY_PORT: '0',
      GATEWAY_HOST: '127.0.0.1',
      OPS_PORT: '0',
      READ_API_URL: `http://127.0.0.1:${readApi.port}`,
      REDIS_KEY_PREFIX: `bench:${name}:`,
      PLAN_STARTER_MONTHLY_QUOTA: '1000000000',
      PLAN_STARTER_PER_MINUTE: '1000000000',
    },
    /gateway listening/,
    GATEWAY_NODE_ARGS,
  );
  children.push(gateway.child);
  return {
    direct: `http://127.0.0.1:${readApi.port}/api/v1/users/bench_user`,
    viaGateway: `http://127.0.0.1:${gateway.port}/api/v1/users/bench_user`,
    internal: { 'x-internal-token': token, 'x-account-id': account.id, 'x-account-plan': 'starter' },
    auth: { authorization: `Bearer ${key.key}` },
    pids: { 'read-api': readApi.child.pid!, gateway: gateway.child.pid! },
  };
}

/** saturation rounds, alternating which side goes first */
async function saturationRounds(sys: System): Promise<Array<{ ra: Run; gw: Run }>> {
  const { direct, viaGateway, internal, auth, pids } = sys;
  const rounds: Array<{ ra: Run; gw: Run }> = [];
  for (let i = 0; i < ROUNDS; i++) {
    let ra: Run;
    let gw: Run;
    if (i % 2 === 0) {
      ra = await run(direct, internal, { 'read-api': pids['read-api'] });
      gw = await run(viaGateway, auth, pids);
    } else {
      gw = await run(viaGateway, auth, pids);
      ra = await run(direct, internal, { 'read-api': pids['read-api'] });
    }
    rounds.push({ ra, gw });
    console.log(
      `round ${i + 1}${PIPELINING > 1 ? ` (pipelined ${PIPELINING} deep)` : ''}: read-api ${ra.rps.toFixed(0)} req/s p50 ${ra.p50} p90 ${ra.p90} p97.5 ${ra.p97} p99 ${ra.p99} (${ra.cpu}); ` +
        `gateway ${gw.rps.toFixed(0)} req/s p50 ${gw.p50} p90 ${gw.p90} p97.5 ${gw.p97} p99 ${gw.p99} (${gw.cpu}); ratio ${(gw.rps / ra.rps).toFixed(2)}`,
    );
  }
  return rounds;
}

/** BENCH_ROUNDS rounds of SERIAL_CALLS calls through the gateway on one connection: its CPU and system calls per call */
async function serialRounds(sys: System): Promise<void> {
  const cpus: number[] = [];
  for (let i = 0; i < Math.max(1, ROUNDS); i++) {
    const pid = sys.pids.gateway;
    const [cpu0, io0] = [cpuMs(pid), syscalls(pid)];
    const r = await autocannon({ url: sys.viaGateway, connections: 1, amount: SERIAL_CALLS, headers: sys.auth });
    if (r.non2xx > 0 || r.errors > 0) throw new Error(`serial: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
    const [cpu1, io1] = [cpuMs(pid), syscalls(pid)];
    const n = r.requests.total;
    cpus.push(((cpu1 - cpu0) * 1000) / n);
    console.log(
      `serial ${i + 1}: ${n} calls, ${r.requests.average.toFixed(0)} req/s, gateway ${cpus.at(-1)!.toFixed(1)} µs per call, ` +
        `syscalls per call ${((io1.reads - io0.reads) / n).toFixed(2)} reads, ${((io1.writes - io0.writes) / n).toFixed(2)} writes`,
    );
  }
  console.log(`serial_gateway_cpu_us ${median(cpus).toFixed(1)} (median of ${cpus.length} rounds, one connection)`);
}

/** three fixed-rate rounds, alternating which side goes first */
async function steadyRounds(sys: System): Promise<Array<{ ra: Steady; gw: Steady }>> {
  const { direct, viaGateway, internal, auth } = sys;
  const rounds: Array<{ ra: Steady; gw: Steady }> = [];
  for (let i = 0; i < STEADY_ROUNDS; i++) {
    if (i % 2 === 0) {
      const ra = await steady(direct, internal);
      rounds.push({ ra, gw: await steady(viaGateway, auth) });
    } else {
      const gw = await steady(viaGateway, auth);
      rounds.push({ ra: await steady(direct, internal), gw });
    }
  }
  return rounds;
}

function report(rounds: Array<{ ra: Run; gw: Run }>, steadies: Array<{ ra: Steady; gw: Steady }>): void {
  const mid = [...rounds].sort((a, b) => a.gw.rps / a.ra.rps - b.gw.rps / b.ra.rps)[Math.floor(rounds.length / 2)]!;
  const { ra, gw } = mid;
  const raSteady = { p50: median(steadies.map((r) => r.ra.p50)), p99: median(steadies.map((r) => r.ra.p99)) };
  const gwSteady = { p50: median(steadies.map((r) => r.gw.p50)), p99: median(steadies.map((r) => r.gw.p99)) };
  const addedP50 = median(steadies.map((r) => r.gw.p50 - r.ra.p50));
  const addedP99 = median(steadies.map((r) => r.gw.p99 - r.ra.p99));
  const ms = (n: number) => n.toFixed(2);
  console.log(
    `saturation: ${CONNECTIONS} connections${PIPELINING > 1 ? `, pipelined ${PIPELINING} deep` : ''}, ${ROUNDS} rounds of ${DURATION} s each way; services, Redis, PostgreSQL and the load on this machine`,
  );
  console.log(
    `read-api direct (median round): ${ra.rps.toFixed(0)} req/s, p50 ${ra.p50} ms, p99 ${ra.p99} ms (CPU per call: ${ra.cpu})`,
  );
  console.log(
    `through gateway (median round): ${gw.rps.toFixed(0)} req/s, p50 ${gw.p50} ms, p99 ${gw.p99} ms (CPU per call: ${gw.cpu})`,
  );
  console.log(
    `at ${FIXED_RATE} req/s: read-api p50 ${ms(raSteady.p50)} ms, p99 ${ms(raSteady.p99)} ms; ` +
      `through gateway p50 ${ms(gwSteady.p50)} ms, p99 ${ms(gwSteady.p99)} ms; ` +
      `added p50 ${ms(addedP50)} ms, p99 ${ms(addedP99)} ms (medians of 3 rounds)`,
  );
  const ratios = rounds.map((r) => r.gw.rps / r.ra.rps);
  console.log(
    `ratio ${median(ratios).toFixed(2)} p50_added_ms ${median(rounds.map((r) => r.gw.p50 - r.ra.p50)).toFixed(2)} ` +
      `p99_added_ms ${median(rounds.map((r) => r.gw.p99 - r.ra.p99)).toFixed(2)}`,
  );
}

/** stops the services, drops the bench's Redis keys and database */
async function cleanup(db: Db, children: ChildProcess[], admin: string, name: string): Promise<void> {
  for (const c of children) c.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 500));
  await db.$disconnect();
  await deleteKeys(redisUrl(), `bench:${name}:`);
  await dropDatabase(admin, name);
}

async function main(): Promise<void> {
  loadDevEnv(); // next to `npm start`: its settings (.tmp/dev.env) where the environment sets none
  const admin = postgresAdminUrl();
  const name = `sts_bench_${randomBytes(4).toString('hex')}`;
  const dbUrl = await createDatabase(admin, name);
  const db = createDbClient({ url: dbUrl });
  const children: ChildProcess[] = [];
  try {
    const sys = await startSystem(db, dbUrl, name, children);
    // warm-up: caches, JIT, keep-alive pools
    await autocannon({ url: sys.direct, connections: 10, duration: 2, headers: sys.internal });
    await autocannon({ url: sys.viaGateway, connections: 10, duration: 2, headers: sys.auth });
    if (SERIAL_CALLS > 0) await serialRounds(sys);
    if (ROUNDS > 0) {
      const rounds = await saturationRounds(sys);
      report(rounds, await steadyRounds(sys));
    }
  } finally {
    await cleanup(db, children, admin, name);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
