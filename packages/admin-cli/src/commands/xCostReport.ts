/**
 * The arithmetic of `x cost`, without I/O: counts per resource and watched account priced, summed
 * in billionths of a dollar (whole numbers, so the lines add up to the total exactly).
 */
import { X_BILLABLE_RESOURCES, type XBillableResource } from '@sts/social';

export interface CountRow {
  resource: string;
  /** the watched account (lower-case username); null: no monitor watches it */
  account: string | null;
  n: number;
}

type PerResource = Record<XBillableResource, number>;

export interface CostReport {
  since: string;
  until: string;
  resources: { resource: XBillableResource; count: number; priceUsd: number; costUsd: number }[];
  /** by cost, highest first; the accounts no monitor watches (account null) last */
  accounts: ({ account: string | null; costUsd: number } & PerResource)[];
  count: number;
  totalUsd: number;
}

const NANO = 1e9;
const nano = (usd: number) => Math.round(usd * NANO);
const zero = (): PerResource => ({ post_read: 0, user_read: 0, activity_event: 0 });
const isResource = (r: string): r is XBillableResource => (X_BILLABLE_RESOURCES as readonly string[]).includes(r);

function costNano(counts: PerResource, prices: PerResource): number {
  return X_BILLABLE_RESOURCES.reduce((sum, r) => sum + counts[r] * nano(prices[r]), 0);
}

export function costReport(rows: readonly CountRow[], prices: PerResource, since: Date, until: Date): CostReport {
  const totals = zero();
  const byAccount = new Map<string | null, PerResource>();
  for (const row of rows) {
    if (!isResource(row.resource)) continue;
    const n = Number(row.n);
    totals[row.resource] += n;
    const a = byAccount.get(row.account) ?? zero();
    a[row.resource] += n;
    byAccount.set(row.account, a);
  }
  const accounts = [...byAccount].map(([account, counts]) => ({
    account,
    ...counts,
    nano: costNano(counts, prices),
  }));
  accounts.sort(
    (a, b) =>
      Number(a.account === null) - Number(b.account === null) ||
      b.nano - a.nano ||
      (a.account ?? '').localeCompare(b.account ?? ''),
  );
  return {
    since: since.toISOString(),
    until: until.toISOString(),
    resources: X_BILLABLE_RESOURCES.map((resource) => ({
      resource,
      count: totals[resource],
      priceUsd: prices[resource],
      costUsd: (totals[resource] * nano(prices[resource])) / NANO,
    })),
    accounts: accounts.map(({ nano: n, ...a }) => ({ ...a, costUsd: n / NANO })),
    count: X_BILLABLE_RESOURCES.reduce((s, r) => s + totals[r], 0),
    totalUsd: costNano(totals, prices) / NANO,
  };
}
