/**
 * Monitors and their webhook endpoints in PostgreSQL (Prisma). The projection the use-cases read
 * (`monitorSelect` → `toMonitorRecord`) is written here once.
 */
import { monitorSettingsSelect, withLastCheck, type Db, type Prisma } from '@sts/db';
import { accountEventKey, type AccountWebhookFailingEvent } from '@sts/messaging';
import {
  FRESH_WEBHOOK,
  type MonitorChange,
  type MonitorRecord,
  type MonitorsRepository,
  type WebhookRecord,
} from '../repositories/monitors';

/** the dispatcher's rule (services/webhook-dispatcher domain/health.ts): 5 failures in a row = failing */
const FAILING_AFTER = 5;

/**
 * Enables the webhook (its row locked meanwhile); when it was failing or disabled, the account is
 * told it recovered (`account.webhook.failing`, state recovered, de-duplicated like the dispatcher's).
 */
async function enableAndTell(db: Db, monitorId: string): Promise<void> {
  await db.$transaction(async (tx) => {
    const [prev] = await tx.$queryRaw<{ failures: number; disabled: boolean; account_id: string }[]>`
      SELECT w.consecutive_failures AS failures, w.disabled_at IS NOT NULL AS disabled, m.account_id::text AS account_id
      FROM webhook_endpoints w JOIN monitors m ON m.id = w.monitor_id
      WHERE w.monitor_id = ${monitorId}::uuid FOR UPDATE OF w`;
    await tx.webhookEndpoint.update({
      where: { monitorId },
      data: { consecutiveFailures: 0, firstFailureAt: null, disabledAt: null },
    });
    if (!prev || (!prev.disabled && prev.failures < FAILING_AFTER)) return;
    const payload: AccountWebhookFailingEvent = {
      accountId: prev.account_id,
      monitorId,
      state: 'recovered',
      consecutiveFailures: 0,
      occurredAt: new Date().toISOString(),
    };
    await tx.accountEvent.createMany({
      data: [
        {
          dedupKey: accountEventKey('account.webhook.failing', payload),
          routingKey: 'account.webhook.failing',
          accountId: prev.account_id,
          payload,
        },
      ],
      skipDuplicates: true,
    });
  });
}

const monitorSelect = {
  ...monitorSettingsSelect,
  accountId: true,
  // the last check and error come from the target's cursor (withLastCheck)
  targetKey: true,
  webhook: {
    select: {
      url: true,
      kind: true,
      isBroken: true,
      brokenReason: true,
      secretRotatedAt: true,
      previousSecretUntil: true,
      consecutiveFailures: true,
      firstFailureAt: true,
      disabledAt: true,
      retryPolicy: true,
      ordering: true,
      heldCount: true,
      heldDropped: true,
      createdAt: true,
    } satisfies Record<keyof WebhookRecord, true>,
  },
  _count: { select: { hits: true } },
} as const satisfies Prisma.MonitorSelect;

type MonitorRow = Prisma.MonitorGetPayload<{ select: typeof monitorSelect }>;

function toMonitorRecord({ _count, targetKey: _key, ...m }: MonitorRow): MonitorRecord {
  return { ...m, hitCount: _count.hits };
}

/** the columns of a change: the target's lookup key follows the target */
function columns({ targetUsername, ...rest }: MonitorChange): Prisma.MonitorUpdateManyMutationInput {
  return targetUsername === undefined
    ? rest
    : { ...rest, targetUsername, targetKey: targetUsername?.toLowerCase() ?? null };
}

export function prismaMonitors(db: Db): MonitorsRepository {
  return {
    async list(accountId) {
      const rows = await db.monitor.findMany({
        where: { accountId },
        select: monitorSelect,
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      });
      return (await withLastCheck(db, rows)).map(toMonitorRecord);
    },

    async find(accountId, id) {
      const m = await db.monitor.findFirst({ where: { id, accountId }, select: monitorSelect });
      return m && toMonitorRecord((await withLastCheck(db, [m]))[0]!);
    },

    async owns(accountId, id) {
      return (await db.monitor.findFirst({ where: { id, accountId }, select: { id: true } })) !== null;
    },

    async ownerOf(id) {
      return (await db.monitor.findUnique({ where: { id }, select: { accountId: true } }))?.accountId ?? null;
    },

    count: (accountId) => db.monitor.count({ where: { accountId } }),

    async createWithinLimit({ webhook, targetUsername, ...m }, limit) {
      return db.$transaction(async (tx) => {
        // serialises creates per account, so the count below cannot be raced past the limit
        await tx.$queryRaw`SELECT id FROM accounts WHERE id = ${m.accountId}::uuid FOR UPDATE`;
        if ((await tx.monitor.count({ where: { accountId: m.accountId } })) >= limit) return false;
        await tx.monitor.create({
          data: {
            ...m,
            targetUsername,
            targetKey: targetUsername?.toLowerCase() ?? null,
            ...(webhook ? { webhook: { create: webhook } } : {}),
          },
        });
        return true;
      });
    },

    async update(id, change) {
      await db.monitor.update({ where: { id }, data: columns(change) });
    },

    async remove(accountId, id) {
      return (await db.monitor.deleteMany({ where: { id, accountId } })).count > 0;
    },

    ...prismaWebhooks(db),
  };
}

type WebhookWrites =
  | 'setWebhook'
  | 'configureWebhook'
  | 'webhookSecret'
  | 'rotateSecret'
  | 'dropPreviousSecret'
  | 'removeWebhook'
  | 'enableWebhook';

/** a monitor's webhook endpoint: its URL and secrets (read only for a rotation) */
function prismaWebhooks(db: Db): Pick<MonitorsRepository, WebhookWrites> {
  return {
    async setWebhook(monitorId, hook, at) {
      // a new URL starts healthy (and is no longer disabled)
      const fields = { ...hook, ...FRESH_WEBHOOK };
      await db.webhookEndpoint.upsert({
        where: { monitorId },
        create: { monitorId, ...fields },
        update: { ...fields, secretRotatedAt: at },
      });
    },

    async configureWebhook(monitorId, settings) {
      await db.webhookEndpoint.update({ where: { monitorId }, data: settings });
    },

    async webhookSecret(monitorId) {
      const w = await db.webhookEndpoint.findUniqueOrThrow({
        where: { monitorId },
        select: { secretCiphertext: true },
      });
      return w.secretCiphertext;
    },

    async rotateSecret(monitorId, r) {
      await db.webhookEndpoint.update({
        where: { monitorId },
        data: {
          secretCiphertext: r.secretCiphertext,
          secretRotatedAt: r.rotatedAt,
          previousSecretCiphertext: r.previousSecretCiphertext,
          previousSecretUntil: r.previousSecretUntil,
        },
      });
    },

    async dropPreviousSecret(monitorId) {
      await db.webhookEndpoint.update({
        where: { monitorId },
        data: { previousSecretCiphertext: null, previousSecretUntil: null },
      });
    },

    async removeWebhook(monitorId) {
      await db.webhookEndpoint.deleteMany({ where: { monitorId } });
    },

    async enableWebhook(monitorId) {
      await enableAndTell(db, monitorId);
    },
  };
}
