// Demo tweet generator for `npm start`: every DEMO_TWEET_INTERVAL_SECONDS it posts a tweet for a
// random user of the local store, often using a word the active monitors' keywords look for, so
// the demo monitors record hits and fire webhooks. Stops on SIGTERM/SIGINT.
import { randomInt } from 'node:crypto';
import { z } from 'zod';
import { ConfigError, commonEnv, createLogger, parseEnv } from '@sts/common';
import { createDbClient, type Db } from '@sts/db';
import { createSocialTweet } from '@sts/social';

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
  const watched = monitors.map((m) => m.targetUsername.toLowerCase());
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

if (require.main === module) {
  let env;
  try {
    env = parseEnv(
      z.object({
        DATABASE_URL: commonEnv.DATABASE_URL,
        LOG_LEVEL: commonEnv.LOG_LEVEL,
        DEMO_TWEET_INTERVAL_SECONDS: z.coerce.number().min(0.1).max(3600).default(5),
      }),
    );
  } catch (err) {
    console.error(`demo: ${err instanceof ConfigError ? err.message : String(err)}`);
    process.exit(2);
  }
  const logger = createLogger({ service: 'demo-generator', level: env.LOG_LEVEL });
  const db = createDbClient({ url: env.DATABASE_URL, poolSize: 1 });
  const timer = setInterval(() => {
    postDemoTweet(db)
      .then((t) => t && logger.info('demo tweet posted', t))
      .catch((err: unknown) =>
        logger.warn('demo tweet failed', { error: err instanceof Error ? err.message : String(err) }),
      );
  }, env.DEMO_TWEET_INTERVAL_SECONDS * 1000);
  const stop = () => {
    clearInterval(timer);
    void db.$disconnect().finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
