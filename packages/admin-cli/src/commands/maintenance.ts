/**
 * `maintenance run`: the storage maintenance step (@sts/db maintenance): week partitions of hits
 * and delivery_attempts created ahead and dropped after retention, finished rows of the
 * queue-like tables pruned in bounded batches. Idempotent and safe to run from several places at
 * once; the k8s CronJob and `npm start`'s timer run exactly this.
 */
import { z } from 'zod';
import { ConfigError, parseEnv } from '@sts/common';
import { planRetentionEnv, retentionFromEnv, storageRetention } from '@sts/core';
import { DEFAULT_RETENTION, runMaintenance, type RetentionPolicy } from '@sts/db';
import { CliUsageError, type Command } from '../command';

const count = (fallback: number, max: number) => z.coerce.number().int().min(1).max(max).default(fallback);

/** The step's settings; the hits and delivery-log days come from the plans (longest plan wins). */
export const maintenanceEnv = z.object({
  ...planRetentionEnv,
  /** published outbox rows are kept this many hours */
  OUTBOX_RETENTION_HOURS: count(DEFAULT_RETENTION.outboxHours, 24 * 365),
  /** published account events are kept this many days */
  ACCOUNT_EVENTS_RETENTION_DAYS: count(DEFAULT_RETENTION.accountEventsDays, 3650),
  /** sent mail, and mail never sent, is kept this many days */
  MAIL_RETENTION_DAYS: count(DEFAULT_RETENTION.mailDays, 3650),
  /** per-day usage rows (the dashboard's charts) are kept this many days */
  USAGE_DAILY_RETENTION_DAYS: count(DEFAULT_RETENTION.usageDailyDays, 3650),
  /** days of what X billed (`npm run cli -- x cost`) kept, counted from the UTC day of the read */
  X_BILLABLE_RETENTION_DAYS: count(DEFAULT_RETENTION.xBillableDays, 3650),
  /** week partitions created ahead of the current week */
  MAINTENANCE_WEEKS_AHEAD: count(DEFAULT_RETENTION.weeksAhead, 52),
  /** rows deleted per statement from a queue-like table */
  MAINTENANCE_BATCH_SIZE: count(DEFAULT_RETENTION.batchSize, 100_000),
  /** batches per table and run; the rest waits for the next run */
  MAINTENANCE_MAX_BATCHES: count(DEFAULT_RETENTION.maxBatches, 10_000),
});

function policyFromEnv(source: NodeJS.ProcessEnv): RetentionPolicy {
  let env: z.infer<typeof maintenanceEnv>;
  try {
    env = parseEnv(maintenanceEnv, source);
  } catch (err) {
    if (err instanceof ConfigError) throw new CliUsageError(err.message);
    throw err;
  }
  const kept = storageRetention(retentionFromEnv(env));
  return {
    ...DEFAULT_RETENTION,
    hitsDays: kept.hitsDays,
    deliveryAttemptsDays: kept.deliveryLogDays,
    // a delivery in the log can be redelivered: its event row lives as long as the log
    monitorEventsDays: kept.deliveryLogDays,
    outboxHours: env.OUTBOX_RETENTION_HOURS,
    accountEventsDays: env.ACCOUNT_EVENTS_RETENTION_DAYS,
    mailDays: env.MAIL_RETENTION_DAYS,
    usageDailyDays: env.USAGE_DAILY_RETENTION_DAYS,
    xBillableDays: env.X_BILLABLE_RETENTION_DAYS,
    weeksAhead: env.MAINTENANCE_WEEKS_AHEAD,
    batchSize: env.MAINTENANCE_BATCH_SIZE,
    maxBatches: env.MAINTENANCE_MAX_BATCHES,
  };
}

const run: Command = {
  name: 'maintenance run',
  summary: 'create week partitions ahead, drop those past retention, prune finished rows in batches',
  usage: [
    'usage: npm run cli -- maintenance run [--json]',
    '',
    'Idempotent; safe to run from several places at once (the k8s CronJob and npm start run it).',
    'Retention: PLAN_{FREE,STARTER}_HIT_RETENTION_DAYS, PLAN_{FREE,STARTER}_DELIVERY_LOG_RETENTION_DAYS',
    '(storage keeps the longest plan; monitor_events follow the delivery log), OUTBOX_RETENTION_HOURS, ACCOUNT_EVENTS_RETENTION_DAYS,',
    'MAIL_RETENTION_DAYS, USAGE_DAILY_RETENTION_DAYS, X_BILLABLE_RETENTION_DAYS; MAINTENANCE_WEEKS_AHEAD, MAINTENANCE_BATCH_SIZE,',
    'MAINTENANCE_MAX_BATCHES bound one run.',
  ].join('\n'),
  options: {},
  async run(ctx) {
    const policy = policyFromEnv(ctx.env);
    const r = await runMaintenance(ctx.db(), policy);
    const pruned = Object.entries(r.pruned)
      .filter(([, n]) => n > 0)
      .map(([t, n]) => `${t} ${n}`);
    return {
      json: { ...r, policy },
      text: [
        `maintenance done in ${r.ms} ms`,
        `  partitions created: ${r.created.join(', ') || 'none'}`,
        `  partitions dropped: ${r.dropped.join(', ') || 'none'}`,
        `  rows pruned: ${pruned.join(', ') || 'none'}${r.more ? ' (more left for the next run)' : ''}`,
        ...(r.busy.length > 0 ? [`  held by another runner: ${r.busy.join(', ')}`] : []),
      ].join('\n'),
    };
  },
};

export const maintenanceCommands: Command[] = [run];
