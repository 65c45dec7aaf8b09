/**
 * `npx tsx bench/cpuprofile.ts <file.cpuprofile> [--top N] [--from <s>] [--to <s>]`: a text summary
 * of a V8 CPU profile (what `node --cpu-prof` writes, e.g. the dispatcher's under bench:pipeline with
 * `BENCH_DISPATCHER_NODE_ARGS="--cpu-prof --cpu-prof-dir=…"`), for docs/benchmarks.md:
 *
 *   - by area: the share of samples whose leaf frame is in each area (node internals, the service's
 *     own code, a dependency by package name, GC, idle, …);
 *   - by stage of a delivery: each sample counted once, for the nearest frame (from the leaf up)
 *     that names a stage (STAGES below: socket writes, the HTTP client (node's or undici), signing, Prisma,
 *     node-postgres, AMQP, message decoding, metrics, the repository's own code, GC);
 *   - self time: the functions the samples were in (leaf frames), top N;
 *   - nearest own code: each sample counted once, for the innermost frame of the repository's own code
 *     on its stack (services/, packages/), whatever node or a dependency did below it; samples
 *     with no own frame go to the area of their leaf: what each of our functions costs with
 *     everything it calls that is not another of our functions;
 *   - total time: the functions on the stack of the samples (each counted once per sample), top N —
 *     a flame graph read as a table: a frame's share is the width of its bar.
 *
 * `--from` / `--to` keep only the samples in that window (seconds since the profile's start), e.g. to
 * leave out the start-up.
 *
 * Frames in a bundle (what the image runs, and the benches by default) are mapped back to their
 * sources through the bundle's source map beside it (`<bundle>.js.map`), so the tables name
 * services/, packages/ and node_modules/ files as they do for the TypeScript sources.
 */
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** the source map beside a bundle frame's file, parsed once per file (null: none) */
function sourceMapOf(url: string, cache: Map<string, SourceMap | null>): SourceMap | null {
  let map = cache.get(url);
  if (map === undefined) {
    const file = url.startsWith('file://') ? fileURLToPath(url) : url;
    map =
      path.isAbsolute(file) && existsSync(`${file}.map`)
        ? new SourceMap(JSON.parse(readFileSync(`${file}.map`, 'utf8')) as ConstructorParameters<typeof SourceMap>[0])
        : null;
    cache.set(url, map);
  }
  return map;
}

/** rewrites bundle frames to their original file, line, column and, where the map has one, name */
function mapBundleFrames(profile: Profile): void {
  const maps = new Map<string, SourceMap | null>();
  for (const node of profile.nodes) {
    const f = node.callFrame;
    if (!f.url || f.url.startsWith('node:') || f.url.startsWith('wasm:') || f.lineNumber < 0) continue;
    const map = sourceMapOf(f.url, maps);
    if (!map) continue;
    const e = map.findEntry(f.lineNumber, f.columnNumber) as Partial<{
      originalSource: string;
      originalLine: number;
      originalColumn: number;
      name: string;
    }>;
    if (!e.originalSource) continue;
    const bundleDir = path.dirname(f.url.startsWith('file://') ? fileURLToPath(f.url) : f.url);
    const source = e.originalSource.startsWith('file://')
      ? fileURLToPath(e.originalSource)
      : path.resolve(bundleDir, e.originalSource);
    node.callFrame = {
      functionName: e.name ?? f.functionName,
      url: `file://${source}`,
      lineNumber: e.originalLine ?? f.lineNumber,
      columnNumber: e.originalColumn ?? f.columnNumber,
    };
  }
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
}

/** what a frame is called in the tables: function (file:line), the file relative to the repository */
function label(f: CallFrame): string {
  const name = f.functionName || '(anonymous)';
  if (!f.url) return name;
  const file = f.url
    .replace(/^file:\/\//, '')
    .replace(/^.*\/node_modules\/\.pnpm\/[^/]+\/node_modules\//, '')
    .replace(/^.*\/(services|packages)\//, '$1/');
  // tsx-compiled sources have no useful line numbers (one line per module)
  return f.lineNumber > 2 ? `${name} (${file}:${f.lineNumber + 1})` : `${name} (${file})`;
}

/** the area of a frame: a dependency's package name, the repository's package or service, node, or V8 */
function area(f: CallFrame): string {
  const url = f.url;
  if (!url) {
    if (f.functionName === '(garbage collector)') return 'GC';
    if (f.functionName === '(idle)') return 'idle';
    if (f.functionName === '(program)') return 'V8/native (program)';
    return 'native';
  }
  if (url.startsWith('node:'))
    return (
      'node:' +
      url
        .slice(5)
        .split('/')[0]!
        .replace(/^internal$/, 'internal')
    );
  const dep = /\/node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (dep) return dep[1]!;
  const own = /\/(services|packages)\/([^/]+)\//.exec(url);
  if (own) return `${own[1]}/${own[2]}`;
  return url;
}

/** a sample's stage: the first rule matching a frame, walking from the leaf to the root */
const STAGES: [string, (f: CallFrame) => boolean][] = [
  ['GC', (f) => f.functionName === '(garbage collector)'],
  [
    'socket writes (TLS encryption, system call)',
    (f) => !f.url && /^(writev|writeBuffer|writeUtf8String)$/.test(f.functionName),
  ],
  ['signing (HMAC-SHA256)', (f) => /\/signing\//.test(f.url) || /Hmac|createHmac/.test(f.functionName)],
  ['Prisma runtime', (f) => f.url.includes('@prisma')],
  ['node-postgres', (f) => /\/node_modules\/(pg|pg-pool|pg-protocol|pg-types)\//.test(f.url)],
  ['AMQP client (amqplib)', (f) => f.url.includes('/amqplib/')],
  [
    'message decoding (JSON, zod)',
    (f) => f.url.includes('/zod/') || /messaging\/src\/(consumer|contracts)\.ts/.test(f.url),
  ],
  ['metrics (prom-client)', (f) => f.url.includes('/prom-client/')],
  [
    'HTTP client (node:http or undici, its wasm parser; request, pool, response)',
    (f) =>
      /^node:(_http_|https|_tls_|net$|tls$)/.test(f.url) || f.url.includes('/undici/') || f.url.startsWith('wasm://'),
  ],
  [
    'own code (services/, packages/)',
    (f) => /\/(services|packages)\//.test(f.url) && !f.url.includes('/node_modules/'),
  ],
];

function stageOf(leafId: number, byId: Map<number, ProfileNode>, parent: Map<number, number>): string {
  for (let id: number | undefined = leafId; id !== undefined; id = parent.get(id)) {
    const f = byId.get(id)!.callFrame;
    for (const [name, test] of STAGES) if (test(f)) return name;
  }
  return 'other (event loop, promises, timers, streams)';
}

function pct(n: number, total: number): string {
  return `${((100 * n) / total).toFixed(1).padStart(5)} %`;
}

function table(title: string, counts: Map<string, number>, total: number, top: number): void {
  console.log(`\n${title}`);
  const rows = [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, top);
  for (const [name, n] of rows) console.log(`${pct(n, total)}  ${name}`);
}

function main(): void {
  const file = process.argv[2];
  if (!file) throw new Error('usage: bench/cpuprofile.ts <file.cpuprofile> [--top N] [--from s] [--to s]');
  const top = Number(arg('--top') ?? 30);
  const from = Number(arg('--from') ?? 0) * 1e6;
  const to = Number(arg('--to') ?? Infinity) * 1e6;
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  mapBundleFrames(profile);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

  const self = new Map<string, number>();
  const totals = new Map<string, number>();
  const areas = new Map<string, number>();
  const owners = new Map<string, number>();
  const stages = new Map<string, number>();
  let t = 0;
  let samples = 0;
  let idle = 0;
  /** busy samples per 5 s of the profile (to choose --from / --to) */
  const timeline: number[] = [];
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0;
    if (t < from || t > to) continue;
    const leaf = byId.get(profile.samples[i]!)!;
    if (leaf.callFrame.functionName === '(idle)') {
      idle++;
      continue;
    }
    samples++;
    const slot = Math.floor(t / 5e6);
    timeline[slot] = (timeline[slot] ?? 0) + 1;
    const leafLabel = label(leaf.callFrame);
    self.set(leafLabel, (self.get(leafLabel) ?? 0) + 1);
    const a = area(leaf.callFrame);
    areas.set(a, (areas.get(a) ?? 0) + 1);
    let owner = `(no own frame) ${a}`;
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const f = byId.get(id)!.callFrame;
      if (/\/(services|packages)\//.test(f.url) && !f.url.includes('/node_modules/')) {
        owner = label(f);
        break;
      }
    }
    owners.set(owner, (owners.get(owner) ?? 0) + 1);
    const stage = stageOf(leaf.id, byId, parent);
    stages.set(stage, (stages.get(stage) ?? 0) + 1);
    const seen = new Set<string>();
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const l = label(byId.get(id)!.callFrame);
      if (l === '(root)' || seen.has(l)) continue;
      seen.add(l);
      totals.set(l, (totals.get(l) ?? 0) + 1);
    }
  }
  const seconds = (profile.endTime - profile.startTime) / 1e6;
  console.log(
    `${file}: ${seconds.toFixed(1)} s, ${samples} busy samples (${idle} idle left out); shares of busy samples`,
  );
  console.log(`busy samples per 5 s: ${Array.from(timeline, (n, i) => `${i * 5}s ${n ?? 0}`).join(', ')}`);
  table('by stage of a delivery (nearest frame naming one)', stages, samples, top);
  table('by area (leaf frame)', areas, samples, top);
  table('self time (leaf frames)', self, samples, top);
  table('nearest own code (with what it calls in node and dependencies)', owners, samples, top);
  table('total time (on the stack)', totals, samples, top);
}

main();
