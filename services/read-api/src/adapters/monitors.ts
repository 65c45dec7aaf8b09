/**
 * Monitors and hits from PostgreSQL (Prisma), always scoped to one account. Hits page newest first
 * by keyset on (detected_at, id), which the (monitor_id, detected_at DESC, id DESC) index serves.
 */
import { UUID_RE } from '@sts/core';
import {
  HIT_SQL_COLUMNS,
  hitOfSqlRow,
  hitSelect,
  monitorSettingsSelect,
  withLastCheck,
  type HitRow,
  type HitSqlRow,
  type Prisma,
  type Db,
} from '@sts/db';
import { decodeKeyset, encodeKeyset } from '@sts/social';
import type { MonitorRow } from '../domain/records';
const HIT_CURSOR = 'ht';

export interface MonitorRepository {
  /** every monitor of the account, newest first */
  listMonitors(accountId: string): Promise<MonitorRow[]>;
  /** the newest `perMonitor` hits of each monitor of posts from `since` on, by monitor id */
  recentHits(monitorIds: string[], perMonitor: number, since: Date): Promise<Map<string, HitRow[]>>;
  /** the monitor when it exists and belongs to the account */
  findMonitor(accountId: string, monitorId: string): Promise<MonitorRow | null>;
  /**
   * one page of a monitor's hits of posts from `since` on (the plan's window), newest first;
   * throws InvalidCursorError for a foreign cursor
   */
  listHits(
    monitorId: string,
    page: { limit: number; cursor?: string | undefined; since: Date },
  ): Promise<{ items: HitRow[]; nextCursor: string | null }>;
}

const monitorSelect = {
  ...monitorSettingsSelect,
  // the last check and error come from the target's cursor (withLastCheck)
  targetKey: true,
  webhook: { select: { id: true, heldCount: true } },
} as const;

type MonitorSelected = Prisma.MonitorGetPayload<{ select: typeof monitorSelect }>;

function toMonitorRow({ webhook, targetKey: _key, ...m }: MonitorSelected): MonitorRow {
  return { ...m, hasWebhook: webhook !== null, heldEvents: webhook?.heldCount ?? 0 };
}

export function createMonitorRepository(db: Db): MonitorRepository {
  return {
    async listMonitors(accountId) {
      const rows = await db.monitor.findMany({
        where: { accountId },
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
        select: monitorSelect,
      });
      return (await withLastCheck(db, rows)).map(toMonitorRow);
    },

    async recentHits(monitorIds, perMonitor, since) {
      const byMonitor = new Map<string, HitRow[]>(monitorIds.map((id) => [id, []]));
      if (monitorIds.length === 0) return byMonitor;
      // one round trip: the newest N hits of each monitor through the hits index
      const rows = await db.$queryRaw<HitSqlRow[]>`
        SELECT ${HIT_SQL_COLUMNS}
        FROM unnest(${monitorIds}::uuid[]) AS m(id)
        CROSS JOIN LATERAL (
          SELECT * FROM hits WHERE hits.monitor_id = m.id AND hits.tweet_created_at >= ${since}
          ORDER BY hits.detected_at DESC, hits.id DESC
          LIMIT ${perMonitor}
        ) h
        ORDER BY h.monitor_id, h.detected_at DESC, h.id DESC`;
      for (const r of rows) byMonitor.get(r.monitor_id)?.push(hitOfSqlRow(r));
      return byMonitor;
    },

    async findMonitor(accountId, monitorId) {
      // the column is a uuid: a malformed id names no monitor (PostgreSQL would refuse the cast)
      if (!UUID_RE.test(monitorId)) return null;
      const m = await db.monitor.findFirst({ where: { id: monitorId, accountId }, select: monitorSelect });
      return m ? toMonitorRow((await withLastCheck(db, [m]))[0]!) : null;
    },

    async listHits(monitorId, page) {
      const after = page.cursor === undefined ? null : decodeKeyset(page.cursor, HIT_CURSOR, UUID_RE);
      const rows = await db.hit.findMany({
        where: {
          monitorId,
          tweetCreatedAt: { gte: page.since },
          ...(after ? { OR: [{ detectedAt: { lt: after.at } }, { detectedAt: after.at, id: { lt: after.id } }] } : {}),
        },
        orderBy: [{ detectedAt: 'desc' }, { id: 'desc' }],
        take: page.limit + 1,
        select: hitSelect,
      });
      const items = rows.slice(0, page.limit);
      const last = items[items.length - 1];
      return {
        items,
        nextCursor: rows.length > page.limit && last ? encodeKeyset(HIT_CURSOR, last.detectedAt, last.id) : null,
      };
    },
  };
}
