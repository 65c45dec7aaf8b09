/**
 * The demo tweet generator (`npm start` runs `npm run cli -- demo run`): posts a tweet for a random
 * user of the local social store, often using a word the active monitors' keywords look for, so
 * the demo monitors record hits and fire webhooks. `demo tweet` posts one; `demo run` posts one
 * every --interval seconds (default DEMO_TWEET_INTERVAL_SECONDS, else 5) until SIGTERM/SIGINT.
 */
import { randomInt } from 'node:crypto';
import type { Db } from '@sts/db';
import { createSocialTweet } from '@sts/social';
import { CliUsageError, optionalString, type Command } from '../command';

const OPENERS = ['Just shipped', 'Thinking about', 'Big news on', 'Quick update on', 'Loving the new', 'Anyone tried'];
const TOPICS = [
  'the roadmap',
  'our API',
  'coffee',
  'open source',
  'the weekend',
  'a new release',
  'TypeScript',
  'latency',
];

export async function postDemoTweet(db: Db): Promise<{ id: string; author: string; text: string } | null> {
  const users = await db.socialUser.findMany({ select: { username: true }, take: 200 });
  if (users.length === 0) return null;
  const monitors = await db.monitor.findMany({
    where: { isActive: true },
    select: { keywords: true, targetUsername: true },
    take: 200,
  });
  const watched = monitors.flatMap((m) => (m.targetUsername ? [m.targetUsername.toLowerCase()] : []));
  // prefer watched users, so the demo monitors see activity
  const candidates = users.filter((u) => watched.includes(u.username.toLowerCase()));
  const author = (candidates.length > 0 && randomInt(4) > 0 ? candidates : users)[
    randomInt(candidates.length > 0 ? candidates.length : users.length)
  ]!;
  const keywords = monitors.flatMap((m) => m.keywords);
  const topic =
    keywords.length > 0 && randomInt(2) === 0
      ? keywords[randomInt(keywords.length)]!
      : TOPICS[randomInt(TOPICS.length)]!;
  const text = `${OPENERS[randomInt(OPENERS.length)]} ${topic} #${randomInt(1000)}`;
  const tweet = await createSocialTweet(db, { authorUsername: author.username, text });
  return { id: tweet.id, author: author.username, text };
}

const demoTweet: Command = {
  name: 'demo tweet',
  summary: 'post one demo tweet for a random local user (what npm start does every 5 s)',
  usage: 'usage: npm run cli -- demo tweet [--json]',
  options: {},
  async run(ctx) {
    const tweet = await postDemoTweet(ctx.db());
    if (!tweet) throw new Error('the local social store has no users yet (npm run cli -- seed)');
    return { json: tweet, text: `@${tweet.author}: ${tweet.text} (${tweet.id})` };
  },
};

const demoRun: Command = {
  name: 'demo run',
  summary: 'post a demo tweet every --interval seconds until stopped (npm start runs it)',
  usage: [
    'usage: npm run cli -- demo run [--interval SECONDS] [--json]',
    '',
    'Posts a demo tweet every SECONDS (0.1 to 3600; default DEMO_TWEET_INTERVAL_SECONDS, else 5),',
    'one log line each, until SIGTERM or SIGINT; then prints how many it posted.',
  ].join('\n'),
  options: { interval: { type: 'string' } },
  async run(ctx, values) {
    const raw = optionalString(values, 'interval') ?? ctx.env.DEMO_TWEET_INTERVAL_SECONDS ?? '5';
    const seconds = Number(raw);
    if (!/^\d+(\.\d+)?$/.test(raw) || seconds < 0.1 || seconds > 3600)
      throw new CliUsageError('--interval must be a number of seconds from 0.1 to 3600');
    const db = ctx.db();
    let posted = 0;
    // one post at a time: on a slow database a tick is skipped rather than piling posts up
    let inFlight: Promise<void> | undefined;
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        if (inFlight) return;
        inFlight = postDemoTweet(db)
          .then((t) => {
            if (!t) return;
            posted++;
            process.stdout.write(`${JSON.stringify({ level: 'info', message: 'demo tweet posted', ...t })}\n`);
          })
          .catch((err: unknown) => {
            process.stderr.write(`demo tweet failed: ${err instanceof Error ? err.message : String(err)}\n`);
          })
          .finally(() => (inFlight = undefined));
      }, seconds * 1000);
      const stop = () => {
        clearInterval(timer);
        process.off('SIGTERM', stop);
        process.off('SIGINT', stop);
        resolve();
      };
      process.on('SIGTERM', stop);
      process.on('SIGINT', stop);
    });
    await inFlight; // the tweet being posted when the signal came is finished and counted
    return { json: { posted }, text: `${posted} demo tweet(s) posted` };
  },
};

export const demoCommands: Command[] = [demoTweet, demoRun];
