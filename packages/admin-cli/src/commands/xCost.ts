/**
 * `x cost [--since T]`: what X bills for the period, estimated from `x_billable_reads` (every
 * resource a process received from X, once per UTC day as X bills it: @sts/social billing.ts)
 * and the prices X_PRICE_POST_READ, X_PRICE_USER_READ, X_PRICE_EVENT: per resource (count,
 * price, cost), per watched account (an X account a monitor watches, by lower-case username;
 * the posts read for query monitors and any account no monitor watches on one line) and the total.
 * The period starts at `--since` (default: the start of the current UTC month) and ends now.
 */
import { z } from 'zod';
import { ConfigError, parseEnv } from '@sts/common';
import { X_BILLABLE_RESOURCES, xPriceEnv, xPricesFromEnv, type XBillableResource } from '@sts/social';
import { CliUsageError, optionalString, type Command } from '../command';
import { costReport, type CostReport, type CountRow } from './xCostReport';

/** The settings `x cost` reads. */
export const xCostEnv = z.object({ ...xPriceEnv });

function pricesFromEnv(source: NodeJS.ProcessEnv): Record<XBillableResource, number> {
  try {
    return xPricesFromEnv(parseEnv(xCostEnv, source));
  } catch (err) {
    if (err instanceof ConfigError) throw new CliUsageError(err.message);
    throw err;
  }
}

const SINCE = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2}))?$/;

/** `--since`: a UTC date (YYYY-MM-DD) or an ISO time with its zone, not in the future */
function parseSince(value: string | undefined, now: Date): Date {
  if (value === undefined) return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const text = value.trim();
  const t = SINCE.test(text) ? new Date(text.length === 10 ? `${text}T00:00:00Z` : text) : null;
  // a date the calendar lacks (2026-02-30) does not round-trip
  const valid = t !== null && !Number.isNaN(t.getTime()) && (text.length > 10 || t.toISOString().startsWith(text));
  if (!valid)
    throw new CliUsageError(
      `--since must be a date (2026-12-01) or a time with its zone (2026-12-01T08:00:00Z), not "${value}"`,
    );
  if (t.getTime() > now.getTime()) throw new CliUsageError(`--since ${value} is in the future`);
  return t;
}

/** counts per resource and watched account since `since` (accounts no monitor watches as null) */
const COUNTS = `
  SELECT r.resource, CASE WHEN w.target_key IS NULL THEN NULL ELSE r.account END AS account, count(*)::int AS n
  FROM x_billable_reads r
  LEFT JOIN (SELECT DISTINCT target_key FROM monitors WHERE target_key IS NOT NULL) w ON w.target_key = r.account
  WHERE r.day >= ($1::timestamptz AT TIME ZONE 'UTC')::date AND r.read_at >= $1::timestamptz
  GROUP BY 1, 2`;

const usd = (v: number) => v.toFixed(4);
const col = (s: string | number, n: number) => String(s).padStart(n);

function render(r: CostReport): string {
  const lines = [
    `X cost estimate from ${r.since} to ${r.until} (each resource once per UTC day, as X bills it)`,
    '',
    `${'resource'.padEnd(16)}${col('count', 10)}${col('price USD', 12)}${col('cost USD', 14)}`,
    ...r.resources.map(
      (x) => `${x.resource.padEnd(16)}${col(x.count, 10)}${col(x.priceUsd, 12)}${col(usd(x.costUsd), 14)}`,
    ),
    `${'total'.padEnd(16)}${col(r.count, 10)}${col('', 12)}${col(usd(r.totalUsd), 14)}`,
    '',
  ];
  if (r.accounts.length === 0) return [...lines, 'no X reads recorded in the period'].join('\n');
  const width = Math.max(16, ...r.accounts.map((a) => (a.account ?? OTHER).length + 2));
  lines.push(
    `${'watched account'.padEnd(width)}${col('posts', 10)}${col('users', 8)}${col('events', 8)}${col('cost USD', 14)}`,
  );
  for (const a of r.accounts)
    lines.push(
      `${(a.account ?? OTHER).padEnd(width)}${col(a.post_read, 10)}${col(a.user_read, 8)}${col(a.activity_event, 8)}${col(usd(a.costUsd), 14)}`,
    );
  return lines.join('\n');
}

const OTHER = '(no watched account)';

const cost: Command = {
  name: 'x cost',
  summary: 'estimate what X bills for a period: per resource, per watched account, total',
  usage: [
    'usage: npm run cli -- x cost [--since 2026-12-01|2026-12-01T08:00:00Z] [--json]',
    '',
    'Counts the resources this service received from X, each once per UTC day as X bills them',
    `(${X_BILLABLE_RESOURCES.join(', ')}), since --since (default: the start of the current UTC month),`,
    'priced by X_PRICE_POST_READ, X_PRICE_USER_READ, X_PRICE_EVENT (USD). Per watched account: the X',
    'accounts monitors watch; posts read for query monitors and other authors on one line.',
  ].join('\n'),
  options: { since: { type: 'string' } },
  async run(ctx, values) {
    const prices = pricesFromEnv(ctx.env);
    const now = new Date();
    const since = parseSince(optionalString(values, 'since'), now);
    const rows = await ctx.db().$queryRawUnsafe<CountRow[]>(COUNTS, since);
    const report = costReport(rows, prices, since, now);
    return { json: { ...report }, text: render(report) };
  },
};

export const xCommands: Command[] = [cost];
