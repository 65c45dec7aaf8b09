/**
 * The save-time webhook URL rule, in one place for the dashboard and the CLI. Async on purpose:
 * @sts/core is getting `checkWebhookUrlForSave` (a DNS check that the host resolves to public
 * addresses); when it lands, it replaces the classifyWebhookUrl call below and nothing else
 * changes. Today: HTTPS, no credentials, ≤ 2048 characters; Discord and Slack recognised.
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

/** ValidationError('webhookUrl') when the URL may not be saved. */
export function checkWebhookUrl(raw: unknown): Promise<{ url: string; kind: WebhookKindName }> {
  if (typeof raw !== 'string') return Promise.reject(new ValidationError('webhookUrl', 'webhook URL is empty'));
  try {
    return Promise.resolve(classifyWebhookUrl(raw));
  } catch (err) {
    if (err instanceof WebhookUrlError) return Promise.reject(new ValidationError('webhookUrl', err.message));
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
}
