/**
 * `BENCH_POST_VIA=cli npm run bench:realtime`: posts made the way the README shows, one
 * `npm run cli -- social tweet` process per post, one at a time (BENCH_CLI_POSTS, default 30, with
 * BENCH_CLI_GAP_MS, default 1000, between the webhook's receipt and the next post), against the
 * same poller, dispatcher and receivers as the steady run.
 *
 * Latency is what a newcomer sees: receipt at the receiver − the post's `createdAt` (from the
 * signed body). It is split at two points the bench observes itself: the commit (the bench LISTENs
 * on the tweet trigger's channel, which PostgreSQL delivers at commit), the hit's `detectedAt`
 * (from the body) and the hit's commit (the poller's outbox notification). Last line `cli_post_to_webhook_p50_ms <a> p99_ms <b> lost <n>`.
 */
import { spawn } from 'node:child_process';
import { Client } from 'pg';
import { percentile, positiveEnv } from './lib/numbers';
import { root } from './lib/services';

/** what the receiver read from a verified delivery of one tweet */
export interface Receipt {
  at: number;
  createdAt: number;
  detectedAt: number;
}

export interface CliPostOptions {
  env: NodeJS.ProcessEnv;
  dbUrl: string;
  usernames: readonly string[];
  /** tweet id → its first verified receipt */
  receipts: ReadonlyMap<string, Receipt>;
  log: (msg: string) => void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `npm run cli -- social tweet --author … --text … --json`; resolves with the tweet id. */
function cliTweet(env: NodeJS.ProcessEnv, author: string, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      'npm',
      ['run', '--silent', 'cli', '--', 'social', 'tweet', '--author', author, '--text', text, '--json'],
      { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.on('exit', (code) => {
      const last = out.trim().split('\n').pop() ?? '';
      if (code === 0) resolve((JSON.parse(last) as { id: string }).id);
      else reject(new Error(`social tweet exited ${code}: ${out.slice(-500)}`));
    });
  });
}

const pcts = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return { p50: Math.round(percentile(s, 50)), p99: Math.round(percentile(s, 99)) };
};
const stats = (xs: number[]) => `p50 ${pcts(xs).p50} p99 ${pcts(xs).p99}`;

export async function runCliPosts(o: CliPostOptions): Promise<void> {
  const posts = positiveEnv('BENCH_CLI_POSTS', 30, { whole: true });
  const gapMs = positiveEnv('BENCH_CLI_GAP_MS', 1000);
  // the commit: PostgreSQL delivers the tweet trigger's notification when the transaction commits
  const listener = new Client({ connectionString: o.dbUrl });
  await listener.connect();
  await listener.query('LISTEN sts_tweets');
  await listener.query('LISTEN sts_outbox');
  const committed = new Map<string, number>();
  let hitCommittedAt = 0;
  listener.on('notification', (n) => {
    if (n.channel === 'sts_outbox') hitCommittedAt ||= Date.now();
    else committed.set(n.payload?.split(' ')[1] ?? '', Date.now());
  });
  const total: number[] = [];
  const toCommit: number[] = [];
  const toDetect: number[] = [];
  const toHitCommit: number[] = [];
  const toReceipt: number[] = [];
  let lost = 0;
  try {
    for (let i = 0; i < posts; i++) {
      const author = o.usernames[i % o.usernames.length]!;
      committed.delete(author);
      hitCommittedAt = 0;
      const id = await cliTweet(o.env, author, `cli post ${i}`);
      const until = Date.now() + 10_000;
      while (!o.receipts.has(id) && Date.now() < until) await sleep(5);
      const r = o.receipts.get(id);
      const commitAt = committed.get(author);
      if (!r || commitAt === undefined) {
        lost++;
        continue;
      }
      total.push(r.at - r.createdAt);
      toCommit.push(commitAt - r.createdAt);
      toDetect.push(r.detectedAt - commitAt);
      toHitCommit.push(hitCommittedAt - r.detectedAt);
      toReceipt.push(r.at - hitCommittedAt);
      await sleep(gapMs);
    }
  } finally {
    await listener.end();
  }
  o.log(
    `cli posts ${posts}: createdAt → commit ${stats(toCommit)} ms; commit → detectedAt ${stats(toDetect)} ms; ` +
      `detectedAt → hit commit ${stats(toHitCommit)} ms; hit commit → receipt ${stats(toReceipt)} ms`,
  );
  const { p50, p99 } = pcts(total);
  console.log(`cli_post_to_webhook_p50_ms ${p50} p99_ms ${p99} lost ${lost}`);
}
