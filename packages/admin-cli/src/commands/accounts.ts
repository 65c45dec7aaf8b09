/**
 * Account, API-key and plan commands, and `seed` (the demo account, key, users, tweets and
 * monitors `npm start` uses). Keys are shown once; only their SHA-256 is stored.
 */
import { Redis } from 'ioredis';
import { displayPrefix, effectivePlan, generateApiKey, hashApiKey, isWellFormedApiKey, type PlanName } from '@sts/core';
import { Prisma } from '@sts/db';
import { createSocialTweet, createSocialUser } from '@sts/social';
import {
  CliUsageError,
  optionalInt,
  optionalString,
  requireString,
  requireUuid,
  type CliContext,
  type Command,
  type OptionValues,
} from '../command';

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,255}\.[^\s@]{2,63}$/;

function planOption(values: OptionValues, fallback?: PlanName): PlanName {
  const v = optionalString(values, 'plan') ?? fallback;
  if (v !== 'free' && v !== 'starter') throw new CliUsageError('--plan must be free or starter');
  return v;
}

/** Deletes a key's cached lookup in Redis so a revocation is immediate; the gateway's TTLs bound it anyway. */
async function evictKeyCache(ctx: CliContext, keyHash: string): Promise<boolean> {
  const redis = new Redis(ctx.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
    keyPrefix: ctx.env.REDIS_KEY_PREFIX ?? 'sts:',
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    connectTimeout: 2000,
    retryStrategy: () => null,
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    await redis.del(`apikey:${keyHash}`);
    return true;
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

const accountCreate: Command = {
  name: 'account create',
  summary: 'create an account',
  usage: 'usage: npm run cli -- account create --email E [--plan free|starter] [--json]',
  options: { email: { type: 'string' }, plan: { type: 'string' } },
  async run(ctx, values) {
    const email = requireString(values, 'email').toLowerCase();
    if (!EMAIL.test(email)) throw new CliUsageError(`--email "${email}" is not an email address`);
    const plan = planOption(values, 'free');
    try {
      const account = await ctx.db().account.create({ data: { email, plan } });
      return { json: { id: account.id, email, plan }, text: `account ${account.id} (${email}, ${plan})` };
    } catch (err) {
      if (err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002') {
        throw new CliUsageError(`an account with email ${email} already exists`);
      }
      throw err;
    }
  },
};

const keyCreate: Command = {
  name: 'key create',
  summary: 'create an API key for an account (shown once)',
  usage: 'usage: npm run cli -- key create --account ID [--name N] [--json]',
  options: { account: { type: 'string' }, name: { type: 'string' } },
  async run(ctx, values) {
    const accountId = requireUuid(values, 'account', 'an account');
    const db = ctx.db();
    if (!(await db.account.findUnique({ where: { id: accountId }, select: { id: true } }))) {
      throw new CliUsageError(`no account ${accountId}`);
    }
    const k = generateApiKey();
    await db.apiKey.create({
      data: { accountId, keyHash: k.hash, prefix: k.prefix, name: optionalString(values, 'name') ?? 'default' },
    });
    return {
      json: { key: k.key, prefix: k.prefix },
      text: `${k.key}\n(prefix ${k.prefix}; the key is shown only this once)`,
    };
  },
};

const keyRevoke: Command = {
  name: 'key revoke',
  summary: 'revoke an API key by its prefix (stops working within 5 s everywhere)',
  usage: 'usage: npm run cli -- key revoke --prefix P [--json]',
  options: { prefix: { type: 'string' } },
  async run(ctx, values) {
    const prefix = requireString(values, 'prefix');
    const db = ctx.db();
    const key = await db.apiKey.findUnique({ where: { prefix }, select: { id: true, keyHash: true, revokedAt: true } });
    if (!key) throw new CliUsageError(`no API key with prefix ${prefix}`);
    const revokedAt =
      key.revokedAt ?? (await db.apiKey.update({ where: { id: key.id }, data: { revokedAt: new Date() } })).revokedAt!;
    const evicted = await evictKeyCache(ctx, key.keyHash);
    return {
      json: { prefix, revoked_at: revokedAt.toISOString(), cache_evicted: evicted },
      text: `key ${prefix} revoked${evicted ? '' : ' (Redis not reachable: gateways stop accepting it within 5 s)'}`,
    };
  },
};

const planSet: Command = {
  name: 'plan set',
  summary: "set an account's plan; --trial-days N starts an N-day Starter trial, 0 ends a trial",
  usage:
    'usage: npm run cli -- plan set --account ID --plan free|starter [--trial-days N] [--json]\n' +
    '  --trial-days N  (1-365) Starter features until N days from now, whatever the plan; 0 ends a running trial.\n' +
    '  Gateways apply the change within a few seconds (their key cache).',
  options: { account: { type: 'string' }, plan: { type: 'string' }, 'trial-days': { type: 'string' } },
  async run(ctx, values) {
    const accountId = requireUuid(values, 'account', 'an account');
    const plan = planOption(values);
    const trialDays = optionalInt(values, 'trial-days', 0, 365);
    const trial =
      trialDays === undefined
        ? {}
        : { trialEndsAt: trialDays === 0 ? null : new Date(Date.now() + trialDays * 86_400_000) };
    try {
      const a = await ctx.db().account.update({ where: { id: accountId }, data: { plan, ...trial } });
      const effective = effectivePlan(a);
      const trialText = a.trialEndsAt
        ? a.trialEndsAt.getTime() > Date.now()
          ? `, Starter trial until ${a.trialEndsAt.toISOString()}`
          : ''
        : '';
      return {
        json: {
          id: a.id,
          plan: a.plan,
          trial_ends_at: a.trialEndsAt?.toISOString() ?? null,
          effective_plan: effective,
        },
        text: `account ${a.id}: plan ${a.plan}${trialText} (in force: ${effective})`,
      };
    } catch (err) {
      if (err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2025')
        throw new CliUsageError(`no account ${accountId}`);
      throw err;
    }
  },
};

const DEMO_USERS = [
  {
    username: 'demo_news',
    name: 'Demo News',
    followersCount: 120_000,
    verified: true,
    description: 'Breaking demo news',
  },
  {
    username: 'demo_dev',
    name: 'Demo Developer',
    followersCount: 4_200,
    verified: false,
    description: 'Ships code, tweets about it',
  },
  {
    username: 'demo_coffee',
    name: 'Demo Coffee',
    followersCount: 870,
    verified: false,
    description: 'Espresso enthusiast',
  },
  {
    username: 'demo_space',
    name: 'Demo Space',
    followersCount: 56_000,
    verified: true,
    description: 'Launches and landings',
  },
  {
    username: 'demo_music',
    name: 'Demo Music',
    followersCount: 9_300,
    verified: false,
    description: 'New releases every Friday',
  },
];
const DEMO_TWEETS = [
  'Hello from the demo store',
  'A new release is out today',
  'Coffee first, then code',
  'Launch window opens tomorrow',
  'Weekend playlist is live',
];

const seed: Command = {
  name: 'seed',
  summary: 'create the demo account, key, social users, tweets and monitors (idempotent)',
  usage: 'usage: npm run cli -- seed [--json]   (DEMO_API_KEY pins the demo key when set)',
  options: {},
  async run(ctx) {
    const db = ctx.db();
    const pinned = ctx.env.DEMO_API_KEY;
    if (pinned !== undefined && pinned !== '' && !isWellFormedApiKey(pinned)) {
      throw new CliUsageError('DEMO_API_KEY is not a well-formed API key (generate one with `key create`)');
    }
    const account = await db.account.upsert({
      where: { email: 'demo@example.com' },
      create: { email: 'demo@example.com', plan: 'starter' },
      update: {},
    });
    let key: string | null = null;
    if (pinned) {
      key = pinned;
      const hash = hashApiKey(pinned);
      await db.apiKey.upsert({
        where: { keyHash: hash },
        create: { accountId: account.id, keyHash: hash, prefix: displayPrefix(pinned), name: 'demo' },
        update: { revokedAt: null, accountId: account.id },
      });
    } else if (!(await db.apiKey.findFirst({ where: { accountId: account.id, name: 'demo', revokedAt: null } }))) {
      const k = generateApiKey();
      await db.apiKey.create({ data: { accountId: account.id, keyHash: k.hash, prefix: k.prefix, name: 'demo' } });
      key = k.key;
    }
    for (const [i, u] of DEMO_USERS.entries()) {
      const user = await createSocialUser(db, u);
      if ((await db.socialTweet.count({ where: { authorId: BigInt(user.id) } })) === 0) {
        for (let j = 0; j < 3; j++) {
          await createSocialTweet(db, {
            authorUsername: u.username,
            text: `${DEMO_TWEETS[(i + j) % DEMO_TWEETS.length]!} (${u.username} #${j + 1})`,
            createdAt: new Date(Date.now() - (3 - j) * 3600_000),
          });
        }
      }
    }
    const monitors = [
      { targetUsername: 'demo_dev', keywords: ['release', 'launch'] },
      { targetUsername: 'demo_news', keywords: [] as string[] },
    ];
    for (const m of monitors) {
      const exists = await db.monitor.findFirst({ where: { accountId: account.id, targetKey: m.targetUsername } });
      if (!exists)
        await db.monitor.create({
          data: {
            accountId: account.id,
            targetUsername: m.targetUsername,
            targetKey: m.targetUsername,
            keywords: m.keywords,
          },
        });
    }
    const usernames = DEMO_USERS.map((u) => u.username);
    return {
      json: { account_id: account.id, key, usernames },
      text: key
        ? `demo account ${account.id}\ndemo API key: ${key}`
        : `demo account ${account.id} (its demo key was created earlier and is not shown again; set DEMO_API_KEY to pin one)`,
    };
  },
};

export const accountCommands: Command[] = [accountCreate, keyCreate, keyRevoke, planSet, seed];
