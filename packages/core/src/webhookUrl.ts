/**
 * Webhook URL rules. Only HTTPS, no credentials in the URL, at most 2048 characters. Discord
 * (`discord.com` / `discordapp.com` and their ptb/canary hosts, `/api/webhooks/<id>/<token>`)
 * and Slack (`hooks.slack.com/services/...`) incoming-webhook URLs get their own payload format.
 * Address checks (no private or loopback targets) happen at delivery time, on the address dialled.
 */
export type WebhookKindName = 'native' | 'discord' | 'slack';

export class WebhookUrlError extends Error {
  override name = 'WebhookUrlError';
}

export const MAX_WEBHOOK_URL_LENGTH = 2048;
const DISCORD_HOSTS = new Set(['discord.com', 'discordapp.com', 'ptb.discord.com', 'canary.discord.com']);

export function classifyWebhookUrl(raw: string): { url: string; kind: WebhookKindName } {
  if (typeof raw !== 'string' || raw.trim() === '') throw new WebhookUrlError('webhook URL is empty');
  if (raw.length > MAX_WEBHOOK_URL_LENGTH)
    throw new WebhookUrlError(`webhook URL is longer than ${MAX_WEBHOOK_URL_LENGTH} characters`);
  let u: URL;
  try {
    u = new URL(raw.trim());
  } catch {
    throw new WebhookUrlError('webhook URL is not a valid URL');
  }
  if (u.protocol !== 'https:')
    throw new WebhookUrlError(`webhook URL must use https (got ${u.protocol.replace(/:$/, '')})`);
  if (u.username || u.password) throw new WebhookUrlError('webhook URL must not contain credentials');
  if (!u.hostname) throw new WebhookUrlError('webhook URL has no host');
  u.hash = '';
  const host = u.hostname.toLowerCase();
  let kind: WebhookKindName = 'native';
  if (DISCORD_HOSTS.has(host) && /^\/api(\/v\d+)?\/webhooks\/\d+\/[\w-]+\/?$/.test(u.pathname)) kind = 'discord';
  else if (host === 'hooks.slack.com' && /^\/services\/[\w/]+$/.test(u.pathname)) kind = 'slack';
  return { url: u.toString(), kind };
}
