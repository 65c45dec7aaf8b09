/** Accounts, email links and usage in PostgreSQL (Prisma). */
import { Prisma, type Db } from '@sts/db';
import type {
  AccountRecord,
  AccountsRepository,
  EmailTokensRepository,
  TrialStart,
  UsageRepository,
} from '../repositories/accounts';

const accountSelect = {
  id: true,
  email: true,
  plan: true,
  planSince: true,
  trialStartedAt: true,
  trialEndsAt: true,
  passwordHash: true,
  createdAt: true,
  emailVerifiedAt: true,
  notifyQuota: true,
  notifyWebhook: true,
  notifyTrial: true,
  sessionGeneration: true,
} as const satisfies Prisma.AccountSelect satisfies Record<keyof AccountRecord, true>;

function isUniqueViolation(err: unknown): boolean {
  return err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002';
}

class TrialRefused extends Error {
  constructor(readonly outcome: Exclude<TrialStart, 'started'>) {
    super(outcome);
  }
}

export function prismaAccounts(db: Db): AccountsRepository {
  return {
    findById: (id) => db.account.findUnique({ where: { id }, select: accountSelect }),
    findByEmail: (email) => db.account.findUnique({ where: { email }, select: accountSelect }),

    async create(data) {
      try {
        return await db.account.create({ data, select: accountSelect });
      } catch (err) {
        if (isUniqueViolation(err)) return null;
        throw err;
      }
    },

    async update(id, { endSessions, ...data }) {
      const generation = endSessions ? { sessionGeneration: { increment: 1 } } : {};
      return (await db.account.updateMany({ where: { id }, data: { ...data, ...generation } })).count > 0;
    },

    async markVerified(id, at) {
      await db.account.updateMany({ where: { id, emailVerifiedAt: null }, data: { emailVerifiedAt: at } });
    },

    async startTrial(id, { startedAt, endsAt, grantKey }) {
      try {
        await db.$transaction(async (tx) => {
          if (grantKey !== null) {
            const granted = await tx.$executeRaw`
              INSERT INTO trial_grants (email_key, account_id) VALUES (${grantKey}, ${id}::uuid)
              ON CONFLICT (email_key) DO NOTHING`;
            if (granted === 0) throw new TrialRefused('address_used');
          }
          // conditional update: of two concurrent attempts exactly one starts the trial
          const r = await tx.account.updateMany({
            where: { id, trialStartedAt: null, trialEndsAt: null },
            data: { trialStartedAt: startedAt, trialEndsAt: endsAt },
          });
          // throwing rolls the grant back: the address keeps its trial for an account that can use it
          if (r.count === 0) throw new TrialRefused('account_used');
        });
      } catch (err) {
        if (err instanceof TrialRefused) return err.outcome;
        throw err;
      }
      return 'started';
    },
  };
}

export function prismaEmailTokens(db: Db): EmailTokensRepository {
  return {
    async create(data) {
      await db.emailToken.create({ data });
    },

    async findByHash(tokenHash) {
      const row = await db.emailToken.findUnique({
        where: { tokenHash },
        select: {
          id: true,
          accountId: true,
          purpose: true,
          expiresAt: true,
          usedAt: true,
          account: { select: { email: true } },
        },
      });
      if (!row) return null;
      const { account, ...token } = row;
      return { ...token, email: account.email };
    },

    async use(id, at) {
      return (await db.emailToken.updateMany({ where: { id, usedAt: null }, data: { usedAt: at } })).count > 0;
    },

    async useAll(accountId, purpose, at) {
      await db.emailToken.updateMany({ where: { accountId, purpose, usedAt: null }, data: { usedAt: at } });
    },
  };
}

export function prismaUsage(db: Db): UsageRepository {
  return {
    async monthly(accountId, period) {
      const row = await db.usageMonthly.findUnique({
        where: { accountId_period: { accountId, period } },
        select: { used: true },
      });
      return row?.used ?? 0;
    },

    daily: (accountId, from, to) =>
      db.usageDaily.findMany({
        where: { accountId, day: { gte: from, lte: to } },
        select: { day: true, used: true },
      }),
  };
}
