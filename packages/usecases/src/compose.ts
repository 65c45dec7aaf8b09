/** The use-cases over any implementation of their repositories (createUseCases gives PostgreSQL's). */
import { accountUseCases, type AccountAdminUseCases, type AccountUseCases } from './accounts';
import { createCtx } from './context';
import { coverageUseCases, type CoverageUseCases } from './coverage';
import { identityUseCases, type IdentityUseCases } from './identity';
import { keyUseCases, type KeyAdminUseCases, type KeyUseCases } from './keys';
import { logUseCases, type DeliveryUseCases, type HitUseCases, type LogAdminUseCases } from './logs';
import {
  monitorUseCases,
  webhookUseCases,
  type MonitorAdminUseCases,
  type MonitorUseCases,
  type WebhookUseCases,
} from './monitors';
import { overviewUseCases, type PlanUseCases } from './overview';
import { payloadPreviewUseCases, type PayloadPreviewUseCases } from './payloadPreview';
import { previewUseCases, type PreviewUseCases } from './preview';
import type { Repositories } from './repositories';
import type { Overview, UseCaseOptions } from './types';

export type AdminUseCases = AccountAdminUseCases & KeyAdminUseCases & MonitorAdminUseCases & LogAdminUseCases;

export interface UseCases {
  accounts: AccountUseCases;
  identity: IdentityUseCases;
  overview(accountId: string): Promise<Overview>;
  plans: PlanUseCases;
  keys: KeyUseCases;
  monitors: MonitorUseCases & PreviewUseCases;
  webhooks: WebhookUseCases & PayloadPreviewUseCases;
  deliveries: DeliveryUseCases;
  hits: HitUseCases;
  /** a monitor's coverage record and delivery speed */
  coverage: CoverageUseCases;
  /** operator-only calls (the CLI): not scoped by account — never reachable from the dashboard */
  admin: AdminUseCases;
}

export function composeUseCases(settings: Omit<UseCaseOptions, 'db'>, repos: Repositories): UseCases {
  const ctx = createCtx(settings, repos);
  const k = keyUseCases(ctx);
  const a = accountUseCases(ctx);
  const m = monitorUseCases(ctx);
  const logs = logUseCases(ctx);
  const o = overviewUseCases(ctx);
  return {
    accounts: a.accounts,
    identity: identityUseCases(ctx),
    overview: o.overview,
    plans: o.plans,
    keys: k.keys,
    monitors: { ...m.monitors, ...previewUseCases(ctx) },
    webhooks: { ...webhookUseCases(ctx), ...payloadPreviewUseCases(ctx) },
    deliveries: logs.deliveries,
    hits: logs.hits,
    coverage: coverageUseCases(ctx),
    admin: { ...a.admin, ...k.admin, ...m.admin, ...logs.admin },
  };
}
