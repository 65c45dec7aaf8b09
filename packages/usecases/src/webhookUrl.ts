/**
 * The save-time webhook URL rule, in one place for the dashboard and the CLI. Async on purpose:
 * the rule is `UseCaseOptions.webhookUrlCheck` when given — meant for @sts/core's
 * `checkWebhookUrlForSave(raw, policy)` (public addresses, ports, what the name resolves to;
 * it may add warnings) — else @sts/core's classifyWebhookUrl: HTTPS, no credentials,
 * ≤ 2048 characters; Discord and Slack recognised. Either way a WebhookUrlError becomes
 * ValidationError('webhookUrl') with its message.
 */
import { classifyWebhookUrl, WebhookUrlError, type WebhookKindName } from '@sts/core';
import { ValidationError } from './errors';

export const WEBHOOK_LABEL: Record<WebhookKindName, string> = {
  native: 'Webhook',
  discord: 'Discord',
  slack: 'Slack',
};

/** The URL as shown: Discord and Slack tokens are credentials, so they are masked. */
export function shownWebhookUrl(url: string, kind: WebhookKindName): string {
  if (kind === 'discord') return url.replace(/(\/webhooks\/\d+\/)[^/?#]+/, '$1…');
  if (kind === 'slack') return url.replace(/(\/services\/[^/]+\/[^/]+\/)[^/?#]+/, '$1…');
  return url;
}

/** A stored URL for display when its kind is not at hand (delivery log rows): tokens masked. */
export function maskWebhookUrl(url: string): string {
  try {
    return shownWebhookUrl(url, classifyWebhookUrl(url).kind);
  } catch {
    return url;
  }
}

export interface CheckedUrl {
  url: string;
  kind: WebhookKindName;
  /** saved anyway, but worth telling the user (e.g. the name could not be resolved) */
  warnings?: string[];
}

export type WebhookUrlCheck = (raw: string) => Promise<CheckedUrl>;

const classify: WebhookUrlCheck = (raw) => Promise.resolve(classifyWebhookUrl(raw));

/** ValidationError('webhookUrl') when the URL may not be saved. */
export async function checkWebhookUrl(raw: unknown, check: WebhookUrlCheck = classify): Promise<Required<CheckedUrl>> {
  if (typeof raw !== 'string') throw new ValidationError('webhookUrl', 'webhook URL is empty');
  try {
    const r = await check(raw);
    return { url: r.url, kind: r.kind, warnings: r.warnings ?? [] };
  } catch (err) {
    if (err instanceof WebhookUrlError) throw new ValidationError('webhookUrl', err.message);
    throw err;
  }
}
