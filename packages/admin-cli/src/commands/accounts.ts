/**
 * Account, API-key and plan commands, and `seed` (the demo account, key, users, tweets and
 * monitors `npm start` uses). The rules live in @sts/usecases; these commands parse flags, call
 * it and print. Keys are shown once; only their SHA-256 is stored.
 */
import { displayPrefix, generateApiKey, hashApiKey, isWellFormedApiKey, type PlanName } from '@sts/core';
import { createSocialTweet, createSocialUser } from '@sts/social';
import { checkPassword, ValidationError, type AccountView } from '@sts/usecases';
import {
  CliUsageError,
  optionalInt,
  optionalString,
  requireString,
  requireUuid,
  type Command,
  type OptionValues,
} from '../command';
import { call, useCases } from '../usecases';

function planOption(values: OptionValues, fallback?: PlanName): PlanName {
  const v = optionalString(values, 'plan') ?? fallback;
  if (v !== 'free' && v !== 'starter') throw new CliUsageError('--plan must be free or starter');
  return v;
}

const accountCreate: Command = {
  name: 'account create',
  summary: 'create an account',
  usage: 'usage: npm run cli -- account create --email E [--plan free|starter] [--json]',
  options: { email: { type: 'string' }, plan: { type: 'string' } },
  async run(ctx, values) {
    const email = requireString(values, 'email');
    const plan = planOption(values, 'free');
    const a = await call(() => useCases(ctx).admin.createAccount({ email, plan }), { strict: true });
    return { json: { id: a.id, email: a.email, plan: a.plan }, text: `account ${a.id} (${a.email}, ${a.plan})` };
  },
};

const keyCreate: Command = {
  name: 'key create',
  summary: 'create an API key for an account (shown once)',
  usage: 'usage: npm run cli -- key create --account ID [--name N] [--scope read|manage] [--json]',
  options: { account: { type: 'string' }, name: { type: 'string' }, scope: { type: 'string' } },
  async run(ctx, values) {
    const accountId = requireUuid(values, 'account', 'an account');
    const name = optionalString(values, 'name');
    const scope = optionalString(values, 'scope');
    const k = await call(
      () =>
        useCases(ctx).keys.create(accountId, {
          ...(name !== undefined ? { name } : {}),
          ...(scope !== undefined ? { scope } : {}),
        }),
      { strict: true },
    );
    return {
      json: { key: k.key, prefix: k.prefix, scope: k.scope },
      text: `${k.key}\n(prefix ${k.prefix}, scope ${k.scope}; the key is shown only this once)`,
    };
  },
};

const keyList: Command = {
  name: 'key list',
  summary: "an account's API keys, newest first (prefix, name, created, last used, revoked)",
  usage: 'usage: npm run cli -- key list --account ID [--json]',
  options: { account: { type: 'string' } },
  async run(ctx, values) {
    const accountId = requireUuid(values, 'account', 'an account');
    const keys = await call(() => useCases(ctx).keys.list(accountId), { strict: true });
    const data = keys.map((k) => ({
      id: k.id,
      prefix: k.prefix,
      name: k.name,
      scope: k.scope,
      created_at: k.createdAt.toISOString(),
      last_used_at: k.lastUsedAt?.toISOString() ?? null,
      revoked_at: k.revokedAt?.toISOString() ?? null,
    }));
    const text = data.length
      ? data
          .map(
            (k) =>
              `${k.prefix}  ${k.name}  ${k.scope}  created ${k.created_at}  last used ${k.last_used_at ?? 'never'}${
                k.revoked_at ? `  REVOKED ${k.revoked_at}` : ''
              }`,
          )
          .join('\n')
      : `no API keys for account ${accountId}`;
    return { json: { data }, text };
  },
};

const keyRevoke: Command = {
  name: 'key revoke',
  summary: 'revoke an API key by its prefix (stops working within 5 s everywhere)',
  usage: 'usage: npm run cli -- key revoke --prefix P [--json]',
  options: { prefix: { type: 'string' } },
  async run(ctx, values) {
    const prefix = requireString(values, 'prefix');
    const k = await call(() => useCases(ctx).admin.revokeKeyByPrefix(prefix), { strict: true });
    return {
      json: { prefix, revoked_at: k.revokedAt.toISOString(), cache_evicted: k.cacheEvicted },
      text: `key ${prefix} revoked${k.cacheEvicted ? '' : ' (Redis not reachable: gateways stop accepting it within 5 s)'}`,
    };
  },
};

function planText(a: AccountView): string {
  const trial =
    a.trialEndsAt && a.trialEndsAt.getTime() > Date.now() ? `, Starter trial until ${a.trialEndsAt.toISOString()}` : '';
  return `account ${a.id}: plan ${a.plan}${trial} (in force: ${a.effectivePlan})`;
}

const planSet: Command = {
  name: 'plan set',
  summary: "set an account's plan; --trial-days N starts an N-day Starter trial, 0 ends a trial",
  usage:
    'usage: npm run cli -- plan set --account ID --plan free|starter [--trial-days N] [--json]\n' +
    '  --trial-days N  (1-365) Starter features until N days from now, whatever the plan; 0 ends a running trial.\n' +
    "  A trial given here counts as the account's one trial (the dashboard offers no second).\n" +
    '  Gateways apply the change within a few seconds (their key cache).',
  options: { account: { type: 'string' }, plan: { type: 'string' }, 'trial-days': { type: 'string' } },
  async run(ctx, values) {
    const accountId = requireUuid(values, 'account', 'an account');
    const plan = planOption(values);
    const trialDays = optionalInt(values, 'trial-days', 0, 365);
    const a = await call(
      () => useCases(ctx).admin.setPlan(accountId, trialDays === undefined ? { plan } : { plan, trialDays }),
      { strict: true },
    );
    return {
      json: {
        id: a.id,
        plan: a.plan,
        trial_ends_at: a.trialEndsAt?.toISOString() ?? null,
        effective_plan: a.effectivePlan,
      },
      text: planText(a),
    };
  },
};

const DEMO_EMAIL = 'demo@example.com';
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
  usage:
    "usage: npm run cli -- seed [--json]   (DEMO_API_KEY pins the demo key when set; DEMO_PASSWORD sets the demo login's password)",
  options: {},
  async run(ctx) {
    const db = ctx.db();
    const pinned = ctx.env.DEMO_API_KEY;
    if (pinned !== undefined && pinned !== '' && !isWellFormedApiKey(pinned)) {
      throw new CliUsageError('DEMO_API_KEY is not a well-formed API key (generate one with `key create`)');
    }
    const password = ctx.env.DEMO_PASSWORD || undefined;
    if (password) {
      try {
        checkPassword(password, DEMO_EMAIL);
      } catch (err) {
        if (err instanceof ValidationError) throw new CliUsageError(`DEMO_PASSWORD ${err.message}`);
        throw err;
      }
    }
    // the demo address is ours and receives no mail: verified at seed time, so its dashboard pages
    // (keys, webhooks) work at once; a demo account seeded before this rule is verified now
    const account = await db.account.upsert({
      where: { email: DEMO_EMAIL },
      create: { email: DEMO_EMAIL, plan: 'starter', emailVerifiedAt: new Date() },
      update: {},
    });
    if (!account.emailVerifiedAt)
      await db.account.update({ where: { id: account.id }, data: { emailVerifiedAt: new Date() } });
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
    if (password) await useCases(ctx).admin.setPassword(account.id, password);
    const usernames = DEMO_USERS.map((u) => u.username);
    return {
      json: { account_id: account.id, key, usernames },
      text: key
        ? `demo account ${account.id}\ndemo API key: ${key}`
        : `demo account ${account.id} (its demo key was created earlier and is not shown again; set DEMO_API_KEY to pin one)`,
    };
  },
};

export const accountCommands: Command[] = [accountCreate, keyCreate, keyList, keyRevoke, planSet, seed];
