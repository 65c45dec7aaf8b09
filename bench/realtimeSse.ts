/**
 * The live hit stream's part of `npm run bench:realtime` (BENCH_SSE=1): the gateway runs as a
 * child process next to the poller and the dispatcher; one SSE client on GET /api/v1/stream
 * records when each post's event arrives (post → event latency, measured on the same posts as
 * the webhooks), then BENCH_SSE_STREAMS (default 1,000) idle streams are opened on the same
 * gateway and its resident memory (VmRSS) is read before and after.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { generateApiKey } from '../packages/core/src';
import type { Db } from '../packages/db/src';
import { root } from './lib/services';

export interface SseGateway {
  child: ChildProcess;
  port: number;
}

export async function startGateway(env: NodeJS.ProcessEnv): Promise<SseGateway> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'services/gateway/src/main.ts'], {
    cwd: root,
    env: {
      ...env,
      GATEWAY_PORT: '0',
      GATEWAY_HOST: '127.0.0.1',
      INTERNAL_TOKEN: 'bench-internal-token-0123456789abcdef',
      READ_API_URL: 'http://127.0.0.1:1',
      STREAM_MAX_PER_ACCOUNT: '1000',
      PLAN_STARTER_PER_MINUTE: '1000000',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${buf.slice(-2000)}`)), 60_000);
    child.stdout.on('data', (c: Buffer) => {
      buf += c.toString('utf8');
      const line = buf.split('\n').find((l) => l.includes('gateway listening'));
      if (line === undefined) return;
      clearTimeout(timer);
      child.stdout.removeAllListeners('data');
      child.stdout.resume();
      resolve((JSON.parse(line) as { port: number }).port);
    });
  });
  return { child, port };
}

export async function createKey(db: Db, accountId: string): Promise<string> {
  const k = generateApiKey();
  await db.apiKey.create({ data: { accountId, keyHash: k.hash, prefix: k.prefix } });
  return k.key;
}

/** opens one stream; `onHit(tweetId, at)` for each monitor.hit event; resolves once the 200 arrived */
export function openSse(
  port: number,
  key: string,
  onHit?: (tweetId: string, at: number) => void,
): Promise<{ close(): void }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: '/api/v1/stream',
        headers: { authorization: `Bearer ${key}` },
        agent: false,
      },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`stream answered ${res.statusCode}`));
        let buf = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (onHit === undefined) return;
          const at = Date.now();
          buf += chunk;
          let i;
          while ((i = buf.indexOf('\n\n')) !== -1) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            const data = block.split('\n').find((l) => l.startsWith('data: '));
            if (block.startsWith('event: monitor.hit') && data)
              onHit((JSON.parse(data.slice(6)) as { tweet: { id: string } }).tweet.id, at);
          }
        });
        res.on('error', () => undefined);
        resolve({ close: () => req.destroy() });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** the process's resident memory in MiB (Linux) */
export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** opens `n` idle streams on the gateway; returns the RSS added (MiB) once they are all open */
export async function idleStreamsMemory(
  gw: SseGateway,
  key: string,
  n: number,
  log: (m: string) => void,
): Promise<{ before: number; after: number; opened: number }> {
  await new Promise((r) => setTimeout(r, 2000));
  const before = rssMiB(gw.child.pid!);
  const open: { close(): void }[] = [];
  for (let i = 0; i < n; i += 50) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(50, n - i) }, () => openSse(gw.port, key).catch(() => null)),
    );
    for (const s of batch) if (s) open.push(s);
  }
  await new Promise((r) => setTimeout(r, 3000));
  const after = rssMiB(gw.child.pid!);
  log(`${open.length} idle streams open: gateway RSS ${before.toFixed(1)} → ${after.toFixed(1)} MiB`);
  for (const s of open) s.close();
  return { before, after, opened: open.length };
}
