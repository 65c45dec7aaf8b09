/**
 * Whether a delivery goes out, and what the attempt log says when it does not. Pure functions.
 */
import { effectivePlan, type PlanName } from '@sts/core';
import type { WebhookKind } from './payloads';
import { memoizeString } from './memo';
import { disabledReason, type EndpointHealth } from './health';

interface EndpointState extends EndpointHealth {
  url: string;
  kind: WebhookKind;
  isBroken: boolean;
  brokenReason: string | null;
}

export interface MonitorState {
  isActive: boolean;
  plan: PlanName;
  trialEndsAt: Date | null;
  webhook: EndpointState | null;
}

/** a monitor's state as far as holding goes: its endpoint's health and hold (held events still waiting) */
export type HoldState = MonitorState & {
  webhook: (NonNullable<MonitorState['webhook']> & { heldCount: number }) | null;
};

type PolicyEvent =
  'monitor.hit' | 'monitor.test' | 'monitor.profile_changed' | 'monitor.target_unavailable' | 'monitor.post_deleted';

export const SKIP_REASONS = {
  noWebhook: 'monitor has no webhook',
  inactive: 'monitor is inactive',
  freePlan: 'live webhooks need the Starter plan (or an active trial); the hit is recorded and shown in the dashboard',
} as const;

/**
 * Null when the delivery should be sent; otherwise the reason it is skipped.
 * Live hits need an active monitor with a webhook, an endpoint not marked broken, and Starter
 * (a running trial counts as Starter), and an endpoint not disabled by its health (health.ts).
 * Test pings go out on every plan and also to a broken or disabled endpoint, so the user can check a fix.
 */
export function skipReason(event: PolicyEvent, m: MonitorState, now: Date = new Date()): string | null {
  if (!m.webhook) return SKIP_REASONS.noWebhook;
  if (!m.isActive) return SKIP_REASONS.inactive;
  if (event === 'monitor.test') return null;
  if (effectivePlan({ plan: m.plan, trialEndsAt: m.trialEndsAt }, now) !== 'starter') return SKIP_REASONS.freePlan;
  if (m.webhook.isBroken) {
    return `endpoint is marked broken (${m.webhook.brokenReason ?? 'no reason recorded'}); fix it, then send a test ping`;
  }
  if (m.webhook.disabledAt) return disabledReason(m.webhook);
  return null;
}

/**
 * Whether an event goes to the hold instead of out (or to the log as skipped). Held: a live event
 * (never a test ping or a redelivery, which the user asks for) that would go out but for the
 * endpoint being disabled, or that arrives while held ones still wait for their turn.
 */
function holdsEvent(event: PolicyEvent, redelivery: boolean, m: HoldState, now: Date): boolean {
  const webhook = m.webhook;
  if (!webhook || event === 'monitor.test' || redelivery) return false;
  if (webhook.disabledAt === null && webhook.heldCount === 0) return false;
  // everything else that keeps it from going out (plan, broken, paused) still skips it
  return skipReason(event, { ...m, webhook: { ...webhook, disabledAt: null } }, now) === null;
}

/** What the policy makes of one delivery, decided once before anything else is done for it. */
export interface DeliveryPolicy {
  /** it goes to the hold (holdsEvent) instead of out or to the log */
  held: boolean;
  /** why it is skipped (skipReason); null: it goes out */
  skip: string | null;
  /** the endpoint's URL as the attempt log stores it (redactWebhookUrl; '' without a webhook) */
  url: string;
}

export function deliveryPolicy(event: PolicyEvent, redelivery: boolean, m: HoldState, now: Date): DeliveryPolicy {
  return {
    held: holdsEvent(event, redelivery, m, now),
    skip: skipReason(event, m, now),
    url: m.webhook ? redactWebhookUrl(m.webhook.url, m.webhook.kind) : '',
  };
}

/**
 * Discord and Slack answer 404 or 410 for a deleted incoming webhook, and 401 or 403 for a revoked
 * or invalid token (Discord "Invalid Webhook Token", Slack `invalid_token` / `action_prohibited`):
 * either way the webhook will not work again until the user fixes it, so stop sending to it.
 */
export function brokenReasonFor(kind: WebhookKind, status: number | null): string | null {
  if (kind === 'native' || status === null) return null;
  const name = kind === 'discord' ? 'Discord' : 'Slack';
  if (status === 404 || status === 410) return `${name} answered HTTP ${status}: the incoming webhook no longer exists`;
  if (status === 401 || status === 403) {
    return `${name} answered HTTP ${status}: the webhook token was revoked or is not valid`;
  }
  return null;
}

/**
 * The URL as stored in the attempt log: Discord and Slack webhook tokens are credentials, so they
 * are replaced by [REDACTED]; for other URLs the query string (which may carry a token) and any
 * fragment are dropped. Never used to send: deliveries read the endpoint's current URL.
 */
export function redactWebhookUrl(raw: string, kind: WebhookKind): string {
  return redactedByKey(`${kind} ${raw}`);
}

const redactedByKey = memoizeString((key: string) => {
  const space = key.indexOf(' ');
  return redactUncached(key.slice(space + 1), key.slice(0, space) as WebhookKind);
});

function redactUncached(raw: string, kind: WebhookKind): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return '[invalid URL]';
  }
  u.username = '';
  u.password = '';
  u.hash = '';
  if (kind === 'discord') {
    u.pathname = u.pathname.replace(/(\/webhooks\/\d+\/)[^/]+/, '$1[REDACTED]');
  } else if (kind === 'slack') {
    const parts = u.pathname.split('/');
    if (parts.length > 3) parts[parts.length - 1] = '[REDACTED]';
    u.pathname = parts.join('/');
  }
  if (u.search) u.search = '?[REDACTED]';
  return u.toString().replace(/%5BREDACTED%5D/g, '[REDACTED]');
}

/**
 * Whether a delivery id already has its final attempt in the log (a broker redelivery of it is then
 * acknowledged without sending). A 429 attempt is not final: it was the platform's "later", and the
 * dispatcher was still waiting to send it again when it stopped.
 */
export function finalOutcome(
  logged: readonly { outcome: 'delivered' | 'failed' | 'skipped' | 'exhausted'; statusCode: number | null }[],
): 'delivered' | 'failed' | 'skipped' | 'exhausted' | null {
  const final = logged.filter((a) => !(a.outcome === 'failed' && a.statusCode === 429));
  if (final.length === 0) return null;
  return final.some((a) => a.outcome === 'delivered') ? 'delivered' : final[0]!.outcome;
}

/**
 * A monitor's live events: what a retry schedule, a fifo turn and a hold apply to. A test ping and
 * a requested redelivery are not among them.
 */
export const LIVE_EVENTS = [
  'monitor.hit',
  'monitor.profile_changed',
  'monitor.target_unavailable',
  'monitor.post_deleted',
] as const;
