/**
 * Platform flow control for Discord and Slack incoming webhooks. Pure: time is passed in.
 *
 * - Discord rate-limits each webhook (documented bucket: 5 requests per 2 s, reported in the
 *   X-RateLimit-* headers) and answers 429 with `Retry-After` / `retry_after` (seconds, may be
 *   fractional).
 * - Slack allows about 1 message per second per incoming webhook, with short bursts, and answers
 *   429 with a `Retry-After` header (seconds).
 *
 * Deliveries to one such webhook are paced by a token bucket so they stay under the rate; a 429 is
 * the platform saying "later", so the same delivery is sent again after the wait it names,
 * a bounded number of times (see README "Platform flow control").
 */
import { memoizeString } from './memo';
import type { WebhookKind } from './payloads';

export interface PaceRule {
  /** requests that may go out at once after a quiet period */
  burst: number;
  /** sustained requests per second */
  perSecond: number;
}

export const PLATFORM_PACE: Readonly<Record<'discord' | 'slack', PaceRule>> = {
  discord: { burst: 5, perSecond: 2.5 },
  slack: { burst: 3, perSecond: 1 },
};

/** At most this many 429 waits per delivery, and at most this long waiting in all. */
const RATE_LIMIT_MAX_WAITS = 3;
const RATE_LIMIT_MAX_TOTAL_MS = 60_000;
/** used when a 429 names no wait */
const RATE_LIMIT_DEFAULT_WAIT_MS = 1000;

function paceRuleFor(kind: WebhookKind): PaceRule | null {
  return kind === 'native' ? null : PLATFORM_PACE[kind];
}

/**
 * The key deliveries are queued, limited and paced by. Native endpoints: scheme-less host:port
 * (many monitors pointing at one receiver share it). Discord and Slack: the webhook itself (one
 * customer's webhook is rate-limited on its own; all of them share the host discord.com:443).
 */
export function laneKey(kind: WebhookKind, rawUrl: string): string {
  return laneKeyByKey(`${kind} ${rawUrl}`);
}

const laneKeyByKey = memoizeString((key: string) => {
  const space = key.indexOf(' ');
  return laneKeyUncached(key.slice(0, space) as WebhookKind, key.slice(space + 1));
});

function laneKeyUncached(kind: WebhookKind, rawUrl: string): string {
  let u: URL;
  try {
    u = new URL(rawUrl);
  } catch {
    return `invalid:${rawUrl}`;
  }
  const hostPort = `${u.hostname.toLowerCase()}:${u.port || '443'}`;
  if (kind === 'discord') {
    const id = /\/webhooks\/(\d+)/.exec(u.pathname)?.[1];
    return `discord:${id ?? u.pathname}`;
  }
  if (kind === 'slack') return `slack:${u.pathname}`;
  return hostPort;
}

/** A token bucket; `now` in ms. */
export class TokenBucket {
  private tokens: number;
  private at: number;
  private blockedUntil = 0;

  constructor(
    private readonly rule: PaceRule,
    now: number,
  ) {
    this.tokens = rule.burst;
    this.at = now;
  }

  private refill(now: number): void {
    if (now > this.at) {
      this.tokens = Math.min(this.rule.burst, this.tokens + ((now - this.at) / 1000) * this.rule.perSecond);
      this.at = now;
    }
  }

  /** ms until a token can be taken (0: now) */
  waitMs(now: number): number {
    this.refill(now);
    const blocked = Math.max(0, this.blockedUntil - now);
    const forToken = this.tokens >= 1 ? 0 : Math.ceil(((1 - this.tokens) / this.rule.perSecond) * 1000);
    return Math.max(blocked, forToken);
  }

  /** takes a token if one is there */
  tryTake(now: number): boolean {
    if (this.waitMs(now) > 0) return false;
    this.tokens -= 1;
    return true;
  }

  /** the platform said "not before `until`": no token before then, one token at `until`, refilling from there */
  blockUntil(until: number, now: number): void {
    this.refill(now);
    this.blockedUntil = Math.max(this.blockedUntil, until);
    this.tokens = 1;
    this.at = Math.max(now, this.blockedUntil);
  }

  /** true when nothing is owed: the bucket can be forgotten */
  isFull(now: number): boolean {
    return this.waitMs(now) === 0 && this.tokens >= this.rule.burst;
  }
}

function secondsToMs(raw: unknown): number | null {
  const n = typeof raw === 'number' ? raw : typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : NaN;
  return Number.isFinite(n) && n >= 0 ? Math.ceil(n * 1000) : null;
}

/**
 * How long a 429 asks to wait, in ms: the `Retry-After` header (seconds, fractional allowed, or an
 * HTTP date), else `retry_after` in a JSON body (seconds; Discord sends fractions), else null.
 */
export function retryAfterMs(
  headers: Record<string, string | string[] | undefined>,
  body: string | null,
  now: number,
): number | null {
  const raw = headers['retry-after'];
  const header = Array.isArray(raw) ? raw[0] : raw;
  if (header !== undefined) {
    const s = secondsToMs(header);
    if (s !== null) return s;
    const date = Date.parse(header);
    if (Number.isFinite(date)) return Math.max(0, date - now);
  }
  if (body) {
    try {
      const parsed = JSON.parse(body) as unknown;
      if (parsed && typeof parsed === 'object' && 'retry_after' in parsed) {
        return secondsToMs(parsed.retry_after);
      }
    } catch {
      // not JSON: no wait named
    }
  }
  return null;
}

/** the part of an answer the 429 rules read */
export interface RateLimitAnswer {
  statusCode: number | null;
  headers: Record<string, string | string[] | undefined>;
  responseSnippet: string | null;
}

/**
 * ms to wait before sending a delivery again after a Discord/Slack 429, or null to stop here:
 * `waits` waits of `waited` ms in all so far, bounded by RATE_LIMIT_MAX_WAITS and RATE_LIMIT_MAX_TOTAL_MS.
 */
export function rateLimitWait(
  kind: WebhookKind,
  answer: RateLimitAnswer,
  waits: number,
  waited: number,
  now: number,
): number | null {
  if (kind === 'native' || answer.statusCode !== 429 || waits >= RATE_LIMIT_MAX_WAITS) return null;
  const wait = retryAfterMs(answer.headers, answer.responseSnippet, now) ?? RATE_LIMIT_DEFAULT_WAIT_MS;
  return waited + wait > RATE_LIMIT_MAX_TOTAL_MS ? null : wait;
}

function platform(kind: WebhookKind): string {
  return kind === 'discord' ? 'Discord' : kind === 'slack' ? 'Slack' : 'the receiver';
}

function seconds(ms: number): number {
  return Math.round(ms / 100) / 10;
}

/** the attempt log's error for a 429 that is sent again after `wait` ms (the `waits`th wait) */
export function rateLimitWaitError(kind: WebhookKind, wait: number, waits: number): string {
  return `${platform(kind)} answered HTTP 429 (rate limited); sending again in ${seconds(wait)} s (wait ${waits} of ${RATE_LIMIT_MAX_WAITS})`;
}

/** the attempt log's error for a 429 after which the delivery gives up */
export function rateLimitGiveUpError(kind: WebhookKind, waits: number, waited: number): string {
  return `${platform(kind)} answered HTTP 429 (rate limited); gave up after ${waits} wait(s) of ${seconds(waited)} s in all`;
}

/** what a Discord or Slack 429 makes of a delivery: wait `ms` and send again, or give up; the attempt log's error either way */
type RateLimitVerdict = { kind: 'wait'; ms: number; error: string } | { kind: 'give-up'; error: string };

/** a 429 rule: `waits` waits of `totalMs` in all so far */
type After429 = (answer: RateLimitAnswer, waits: { count: number; totalMs: number }, now: number) => RateLimitVerdict;

function after429Of(kind: 'discord' | 'slack'): After429 {
  return (answer, waits, now) => {
    const wait = rateLimitWait(kind, answer, waits.count, waits.totalMs, now);
    if (wait === null) return { kind: 'give-up', error: rateLimitGiveUpError(kind, waits.count, waits.totalMs) };
    return { kind: 'wait', ms: wait, error: rateLimitWaitError(kind, wait, waits.count + 1) };
  };
}

const AFTER_429: Readonly<Record<'discord' | 'slack', After429>> = {
  discord: after429Of('discord'),
  slack: after429Of('slack'),
};

/** Everything pacing decides for one delivery, worked out once before its first attempt. */
export interface Pacing {
  /** the lane it queues, is limited and paced in (laneKey) */
  laneKey: string;
  pace: PaceRule | null;
  /** the rule for a 429 answer; null for a native endpoint, whose 429 is a failure like any other */
  after429: After429 | null;
}

export function pacingFor(kind: WebhookKind, rawUrl: string): Pacing {
  return {
    laneKey: laneKey(kind, rawUrl),
    pace: paceRuleFor(kind),
    after429: kind === 'native' ? null : AFTER_429[kind],
  };
}
