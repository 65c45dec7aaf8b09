/**
 * Row shapes more than one service reads, with their Prisma select, written once: the type is
 * what Prisma returns for the select, so the two cannot drift apart.
 */
import type { Prisma } from './generated/prisma/client';

/** A recorded hit as read-api lists it and the dispatcher delivers it. */
export const hitSelect = {
  id: true,
  monitorId: true,
  tweetId: true,
  tweetText: true,
  tweetAuthorUsername: true,
  tweetCreatedAt: true,
  detectedAt: true,
} as const satisfies Prisma.HitSelect;

export type HitRow = Prisma.HitGetPayload<{ select: typeof hitSelect }>;

/**
 * A monitor's own settings and state (filters, interval, last check), as the dashboard's use-cases
 * and read-api's monitor records read them; each adds the relations it needs.
 */
export const monitorSettingsSelect = {
  id: true,
  targetUsername: true,
  keywords: true,
  excludeTypes: true,
  langs: true,
  isActive: true,
  checkIntervalSec: true,
  lastCheckAt: true,
  lastError: true,
  createdAt: true,
  updatedAt: true,
} as const satisfies Prisma.MonitorSelect;
