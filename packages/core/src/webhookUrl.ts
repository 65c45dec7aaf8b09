/**
 * Webhook URL rules. Only HTTPS, no credentials in the URL, at most 2048 characters. Discord
 * (`discord.com` / `discordapp.com` and their ptb/canary hosts, `/api/webhooks/<id>/<token>`)
 * and Slack (`hooks.slack.com/services/...`) incoming-webhook URLs get their own payload format.
 *
 * Address checks happen twice, with the same rules (addressPolicy.ts): when a URL is saved
 * (`checkWebhookUrlForSave`, below: IP literals, ports, what the name resolves to now) and at
 * delivery time on the address actually dialled (the dispatcher; DNS may change in between).
 */
import dns from 'node:dns';
import { isIP } from 'node:net';
import { blockedReason, createHostAllowList, normalizeHostname, WebhookConfigError } from './addressPolicy';

export type WebhookKindName = 'native' | 'discord' | 'slack';

/** What is wrong with a refused URL (machine-readable; the message names it for people). */
export type WebhookUrlProblem =
  'invalid_url' | 'not_https' | 'credentials' | 'private_address' | 'port_not_allowed' | 'resolves_to_private_address';

export class WebhookUrlError extends Error {
  override name = 'WebhookUrlError';
  constructor(
    message: string,
    readonly problem: WebhookUrlProblem = 'invalid_url',
    /** for the server's log only (e.g. the resolved addresses): never shown to the customer */
    readonly detail?: string,
  ) {
    super(message);
  }
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
    throw new WebhookUrlError(`webhook URL must use https (got ${u.protocol.replace(/:$/, '')})`, 'not_https');
  if (u.username || u.password) throw new WebhookUrlError('webhook URL must not contain credentials', 'credentials');
  if (!u.hostname) throw new WebhookUrlError('webhook URL has no host');
  u.hash = '';
  const host = u.hostname.toLowerCase();
  let kind: WebhookKindName = 'native';
  if (DISCORD_HOSTS.has(host) && /^\/api(\/v\d+)?\/webhooks\/\d+\/[\w-]+\/?$/.test(u.pathname)) kind = 'discord';
  else if (host === 'hooks.slack.com' && /^\/services\/[\w/]+$/.test(u.pathname)) kind = 'slack';
  return { url: u.toString(), kind };
}

/** Resolves a host name to its IP addresses (A and AAAA). Injected in tests: no network. */
export type HostResolver = (host: string) => Promise<string[]>;

/** The production resolver: the system resolver (what the dispatcher dials with), every address. */
export const systemResolver: HostResolver = async (host) =>
  (await dns.promises.lookup(host, { all: true, verbatim: true })).map((a) => a.address);

export interface WebhookSavePolicy {
  /** ports allowed besides 443 (WEBHOOK_ALLOWED_PORTS) */
  allowedPorts: readonly number[];
  /** host NAMES exempt from the address checks (WEBHOOK_ALLOW_PRIVATE_HOSTS); an IP literal is a config error */
  allowPrivateHosts: readonly string[];
  resolve: HostResolver;
  /** how long resolution may take before it counts as failed (a warning); default 5 s */
  resolveTimeoutMs?: number;
}

export interface CheckedWebhookUrl {
  url: string;
  kind: WebhookKindName;
  /** saved anyway, but worth telling the user (e.g. the name could not be resolved) */
  warnings: string[];
}

const DEFAULT_RESOLVE_TIMEOUT_MS = 5000;

async function resolveWithin(resolve: HostResolver, host: string, ms: number): Promise<string[]> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      resolve(host),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The save-time check of a webhook URL (CLI now, dashboard later). Refuses, with a
 * WebhookUrlError whose message names the problem:
 * - everything `classifyWebhookUrl` refuses (not https, credentials, too long, not a URL);
 * - an IP-literal host outside the public ranges, in every form the URL parser normalises to an
 *   address (`https://2130706433/`, `https://0x7f.1/`, `https://017700000001/`, `https://[::ffff:7f00:1]/`);
 *   WEBHOOK_ALLOW_PRIVATE_HOSTS never exempts a literal;
 * - a port other than 443 unless `allowedPorts` lists it;
 * - a host name (not in `allowPrivateHosts`) whose addresses are ALL non-public.
 * When the name cannot be resolved (or some but not all of its addresses are non-public) the
 * URL is accepted with a warning: DNS can change, and the dispatcher checks every address it
 * dials anyway.
 */
export async function checkWebhookUrlForSave(raw: string, policy: WebhookSavePolicy): Promise<CheckedWebhookUrl> {
  const isAllowedName = createHostAllowList(policy.allowPrivateHosts);
  const { url, kind } = classifyWebhookUrl(raw);
  const u = new URL(url);
  const host = normalizeHostname(u.hostname);
  if (isIP(host)) {
    const reason = blockedReason(host);
    if (reason) throw new WebhookUrlError(`webhook URL host ${reason}`, 'private_address');
  }
  if (u.port !== '' && !policy.allowedPorts.includes(Number(u.port))) {
    throw new WebhookUrlError(
      `webhook URL port ${u.port} is not allowed: only 443${
        policy.allowedPorts.length ? `, ${policy.allowedPorts.join(', ')}` : ''
      } (WEBHOOK_ALLOWED_PORTS lists extra ports)`,
      'port_not_allowed',
    );
  }
  const warnings: string[] = [];
  if (isIP(host) || isAllowedName(host)) return { url, kind, warnings };
  let addresses: string[];
  try {
    addresses = await resolveWithin(policy.resolve, host, policy.resolveTimeoutMs ?? DEFAULT_RESOLVE_TIMEOUT_MS);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    warnings.push(
      `could not resolve ${host} (${e.code ?? e.message}); saved anyway, every delivery checks the address it dials`,
    );
    return { url, kind, warnings };
  }
  if (addresses.length === 0) {
    warnings.push(`${host} has no addresses now; saved anyway, every delivery checks the address it dials`);
    return { url, kind, warnings };
  }
  const refused = addresses.map((a) => [a, blockedReason(a)] as const).filter(([, r]) => r !== null);
  if (refused.length === addresses.length) {
    // the addresses are not in the message: it would be a map of the internal network
    throw new WebhookUrlError(
      `webhook URL host ${host} resolves only to non-public addresses; use a public HTTPS endpoint`,
      'resolves_to_private_address',
      refused.map(([, r]) => r).join('; '),
    );
  }
  if (refused.length > 0) {
    warnings.push(`${host} also resolves to non-public addresses; deliveries are refused while it does`);
  }
  return { url, kind, warnings };
}

/**
 * The save policy from the environment: WEBHOOK_ALLOWED_PORTS (comma list of ports besides 443)
 * and WEBHOOK_ALLOW_PRIVATE_HOSTS (comma list of host names). Throws WebhookConfigError naming
 * the variable on a bad value.
 */
export function webhookSavePolicyFromEnv(
  env: Record<string, string | undefined>,
  resolve: HostResolver = systemResolver,
): WebhookSavePolicy {
  const list = (v: string | undefined) =>
    (v ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  const allowedPorts = list(env.WEBHOOK_ALLOWED_PORTS).map((p) => {
    if (!/^\d{1,5}$/.test(p) || Number(p) < 1 || Number(p) > 65_535) {
      throw new WebhookConfigError(
        `WEBHOOK_ALLOWED_PORTS must be a comma list of ports 1-65535; got ${JSON.stringify(p)}`,
      );
    }
    return Number(p);
  });
  const allowPrivateHosts = list(env.WEBHOOK_ALLOW_PRIVATE_HOSTS);
  createHostAllowList(allowPrivateHosts); // validates: names only
  return { allowedPorts, allowPrivateHosts, resolve };
}
