/**
 * Monitors and their webhooks. Every call is scoped by account: another account's monitor id is
 * NotFound. Plan rules: an account may have PLAN_<PLAN>_MONITORS monitors (paused ones count;
 * the count is taken under a lock on the account row, so two concurrent creates cannot both
 * pass), and a monitor is checked no more often than its plan's poll interval. Webhook signing
 * secrets are generated here, stored encrypted (the monitor id bound in) and returned once, at
 * creation and at rotation. Input is validated before anything is written.
 */
import { randomUUID } from 'node:crypto';
import {
  generateWebhookSecret,
  isValidUsername,
  KeywordError,
  parseKeywords,
  parseLangs,
  parsePostTypes,
  parseQuery,
  QueryError,
  RuleError,
  type MonitorFilters,
  type PlanName,
} from '@sts/core';
import { monitorRef } from '@sts/messaging';
import { standardWebhookSecret } from '@sts/signing';
import { idOrNotFound, loadAccount, PLAN_LABEL, planOf, requireVerified, type Ctx } from './context';
import { ConflictError, NotFoundError, PlanLimitError, ValidationError } from './errors';
import type { MonitorRecord, WebhookRecord, WebhookSettings } from './repositories/monitors';
import { MONITOR_EVENT_KINDS, ORDERINGS, RETRY_POLICIES } from './types';
import type {
  MonitorEdit,
  MonitorEventKind,
  MonitorInput,
  MonitorView,
  Queued,
  TargetStatusName,
  WebhookHealthView,
  WebhookSettingsInput,
  WebhookView,
  WebhookWithSecret,
} from './types';
import { checkWebhookUrl, shownWebhookUrl, WEBHOOK_LABEL } from './webhookUrl';

export const MAX_INTERVAL_SEC = 86_400;
/** how long the old secret still signs after a rotation, by default (24 h) */
const ROTATION_OVERLAP_SEC_DEFAULT = 86_400;
const ROTATION_OVERLAP_SEC_MAX = 7 * 86_400;

function toWebhookView(w: WebhookRecord): WebhookView {
  return {
    url: w.url,
    shownUrl: shownWebhookUrl(w.url, w.kind),
    kind: w.kind,
    label: WEBHOOK_LABEL[w.kind],
    isBroken: w.isBroken,
    brokenReason: w.brokenReason,
    secretRotatedAt: w.secretRotatedAt,
    previousSecretUntil: w.previousSecretUntil,
    health: webhookHealth(w),
    retryPolicy: w.retryPolicy,
    ordering: w.ordering,
    createdAt: w.createdAt,
  };
}

/** the delivery rules given, checked; ValidationError naming the field for an unknown value */
function checkWebhookSettings(raw: WebhookSettingsInput | undefined): WebhookSettings {
  const out: WebhookSettings = {};
  if (raw?.retryPolicy !== undefined) {
    const p = RETRY_POLICIES.find((v) => v === raw.retryPolicy);
    if (!p) throw new ValidationError('retryPolicy', `must be one of ${RETRY_POLICIES.join(', ')}`);
    out.retryPolicy = p;
  }
  if (raw?.ordering !== undefined) {
    const o = ORDERINGS.find((v) => v === raw.ordering);
    if (!o) throw new ValidationError('ordering', `must be one of ${ORDERINGS.join(', ')}`);
    out.ordering = o;
  }
  return out;
}

/** the dispatcher's rules (services/webhook-dispatcher domain/health.ts): 5 in a row = failing */
const WEBHOOK_FAILING_AFTER = 5;

function webhookHealth(w: WebhookRecord): WebhookHealthView {
  const state = w.disabledAt ? 'disabled' : w.consecutiveFailures >= WEBHOOK_FAILING_AFTER ? 'failing' : 'ok';
  return {
    state,
    consecutiveFailures: w.consecutiveFailures,
    failingSince: w.consecutiveFailures > 0 ? w.firstFailureAt : null,
    disabledAt: w.disabledAt,
    held: w.heldCount,
    heldDropped: w.heldDropped,
  };
}

function toMonitorView(m: MonitorRecord): MonitorView {
  return {
    id: m.id,
    targetUsername: m.targetUsername,
    query: m.query,
    keywords: m.keywords,
    filters: { exclude: parsePostTypes(m.excludeTypes), lang: [...m.langs] },
    status: m.isActive ? 'active' : 'paused',
    events: eventsOf(m.events),
    targetStatus: m.targetStatus as TargetStatusName,
    targetStatusAt: m.targetStatusAt,
    intervalSec: m.checkIntervalSec,
    lastCheckAt: m.lastCheckAt,
    lastError: m.lastError,
    hitCount: m.hitCount,
    webhook: m.webhook ? toWebhookView(m.webhook) : null,
    createdAt: m.createdAt,
    updatedAt: m.updatedAt,
  };
}

/** a stored events list (null: the default, posts only), in the canonical order */
function eventsOf(stored: readonly string[] | null): MonitorEventKind[] {
  const kinds = stored ?? ['posts'];
  return MONITOR_EVENT_KINDS.filter((k) => kinds.includes(k));
}

/**
 * What a monitor sends: "posts,profile,deletes" or a list, each once (null or absent: leave as is /
 * posts only); an unknown kind, an empty list, or profile or deletes on a query monitor (it
 * watches no account, so it has no profile and no deletions of its own) is refused, naming the field.
 */
function checkEvents(raw: MonitorInput['events'], isQuery: boolean): MonitorEventKind[] | undefined {
  const events = parseEvents(raw);
  if (isQuery && events?.includes('profile')) {
    throw new ValidationError('events', 'a query monitor watches no account, so it has no profile: use posts');
  }
  if (isQuery && events?.includes('deletes')) {
    throw new ValidationError('events', 'a query monitor watches no account, so it sees no deletions: use posts');
  }
  return events;
}

function parseEvents(raw: MonitorInput['events']): MonitorEventKind[] | undefined {
  if (raw === undefined || raw === null) return undefined;
  const items = typeof raw === 'string' ? raw.split(',') : [...raw];
  const kinds = new Set<MonitorEventKind>();
  for (const item of items) {
    const k = typeof item === 'string' ? item.trim().toLowerCase() : '';
    if (k === '' && typeof raw === 'string') continue;
    if (!(MONITOR_EVENT_KINDS as readonly string[]).includes(k)) {
      throw new ValidationError(
        'events',
        `unknown event kind ${JSON.stringify(item)}: use posts, profile and/or deletes`,
      );
    }
    kinds.add(k as MonitorEventKind);
  }
  if (kinds.size === 0) throw new ValidationError('events', 'must name at least one of posts, profile, deletes');
  return MONITOR_EVENT_KINDS.filter((k) => kinds.has(k));
}

export function checkTarget(raw: unknown): string {
  if (typeof raw !== 'string' || raw.trim() === '') throw new ValidationError('target', 'is required');
  const target = raw.trim().replace(/^@/, '');
  if (!isValidUsername(target)) {
    throw new ValidationError('target', 'must be a username: 1 to 15 letters, digits or underscores');
  }
  return target;
}

/** A query monitor's query as saved (trimmed), validated by @sts/core parseQuery; the refusal names the part. */
function checkQuery(raw: unknown): string {
  if (typeof raw !== 'string') throw new ValidationError('query', 'must be a string');
  // bounded before parsing: a hostile client's megabyte query is refused without being scanned
  if (raw.length > 4096) throw new ValidationError('query', `is ${raw.length} characters; at most 512`);
  try {
    return parseQuery(raw).text;
  } catch (err) {
    if (err instanceof QueryError) throw new ValidationError('query', err.message);
    throw err;
  }
}

/**
 * What a new monitor watches: exactly one of a username (`target`) and a query. A query monitor
 * takes no keywords (its words are in the query); the post-type and language filters apply to both.
 */
export function checkWatched(
  input: Pick<MonitorInput, 'target' | 'query' | 'keywords'>,
): { targetUsername: string; query: null } | { targetUsername: null; query: string } {
  // a blank username is "none" (a form sends both fields); a query given is checked, even empty
  const hasTarget = typeof input.target === 'string' && input.target.trim() !== '';
  const hasQuery = input.query !== undefined && input.query !== null;
  if (hasTarget && hasQuery) throw new ValidationError('query', 'give a username or a query, not both');
  if (!hasQuery) return { targetUsername: checkTarget(input.target), query: null };
  const query = checkQuery(input.query);
  if (checkKeywords(input.keywords).length > 0) {
    throw new ValidationError('keywords', 'a query monitor takes no keywords; write the words into its query');
  }
  return { targetUsername: null, query };
}

export function checkKeywords(raw: MonitorInput['keywords']): string[] {
  try {
    return parseKeywords(raw ?? null);
  } catch (err) {
    if (err instanceof KeywordError) throw new ValidationError('keywords', err.message);
    throw err;
  }
}

/** The filters given (undefined = leave as is), validated; ValidationError names the field. */
export function checkFilters(input: Pick<MonitorInput, 'exclude' | 'lang'>): Partial<MonitorFilters> {
  try {
    return {
      ...(input.exclude !== undefined ? { exclude: parsePostTypes(input.exclude) } : {}),
      ...(input.lang !== undefined ? { lang: parseLangs(input.lang) } : {}),
    };
  } catch (err) {
    if (err instanceof RuleError) throw new ValidationError(err.field, err.message);
    throw err;
  }
}

/**
 * An edit keeps the monitor's kind: a username monitor's username, a query monitor's query
 * (another kind is a new monitor).
 */
function checkEdit(
  m: MonitorRecord,
  edit: MonitorEdit,
): { target?: string | undefined; query?: string | undefined; keywords?: string[] | undefined } {
  const isQuery = m.query !== null;
  if (isQuery && edit.target !== undefined) {
    throw new ValidationError('target', 'this monitor watches a query; create a new monitor to watch a username');
  }
  if (!isQuery && edit.query !== undefined) {
    throw new ValidationError('query', 'this monitor watches a username; create a new monitor to watch a query');
  }
  const keywords = edit.keywords !== undefined ? checkKeywords(edit.keywords) : undefined;
  if (isQuery && keywords !== undefined && keywords.length > 0) {
    throw new ValidationError('keywords', 'a query monitor takes no keywords; write the words into its query');
  }
  return {
    target: edit.target !== undefined ? checkTarget(edit.target) : undefined,
    query: edit.query !== undefined ? checkQuery(edit.query) : undefined,
    keywords,
  };
}

/** The filter columns of a monitor row. */
function filterColumns(f: Partial<MonitorFilters>): { excludeTypes?: string[]; langs?: string[] } {
  return {
    ...(f.exclude !== undefined ? { excludeTypes: f.exclude } : {}),
    ...(f.lang !== undefined ? { langs: f.lang } : {}),
  };
}

export interface MonitorUseCases {
  /** newest first */
  list(accountId: string): Promise<MonitorView[]>;
  get(accountId: string, monitorId: string): Promise<MonitorView>;
  /** PlanLimitError at the plan's monitor limit; `secret` is set (once) when a webhook URL was given */
  create(
    accountId: string,
    input: MonitorInput,
  ): Promise<{ monitor: MonitorView; secret: string | null; warnings: string[] }>;
  /** only the fields given change */
  update(accountId: string, monitorId: string, edit: MonitorEdit): Promise<MonitorView>;
  pause(accountId: string, monitorId: string): Promise<MonitorView>;
  resume(accountId: string, monitorId: string): Promise<MonitorView>;
  /** deletes the monitor with its webhook, hits and delivery log */
  remove(accountId: string, monitorId: string): Promise<void>;
}

export interface WebhookUseCases {
  /**
   * Sets or replaces the URL; a new signing secret is made and returned once (a broken flag is
   * cleared). The delivery rules given are set; those left out stay (a new webhook: none, unordered).
   */
  set(accountId: string, monitorId: string, url: string, settings?: WebhookSettingsInput): Promise<WebhookWithSecret>;
  /** the webhook; ConflictError('no_webhook') without one */
  get(accountId: string, monitorId: string): Promise<WebhookView>;
  /** changes its delivery rules only (URL and secret stay); ConflictError('no_webhook') without a webhook */
  configure(accountId: string, monitorId: string, settings: WebhookSettingsInput): Promise<WebhookView>;
  /**
   * A new signing secret, returned once; ConflictError('no_webhook') without a webhook. By default
   * the old secret overlaps for `overlapSec` (default 24 h): webhook-signature carries both,
   * X-Service-Signature stays on the old one until useNewSecret or the overlap's end. `now: true`
   * drops the old secret at once (a leaked secret).
   */
  rotate(
    accountId: string,
    monitorId: string,
    opts?: { now?: boolean; overlapSec?: number },
  ): Promise<WebhookWithSecret>;
  /** ends an overlapped rotation now: the old secret signs nothing more */
  useNewSecret(accountId: string, monitorId: string): Promise<WebhookView>;
  remove(accountId: string, monitorId: string): Promise<void>;
  /** publishes monitor.test (every plan, Free included); ConflictError('no_webhook') without a webhook */
  sendTest(accountId: string, monitorId: string): Promise<Queued>;
  /**
   * Enables a webhook that endpoint health disabled (as a successful test webhook does): its
   * failure streak is cleared and the events held meanwhile go out, oldest first, before new ones.
   * Harmless on a healthy one; ConflictError('no_webhook') without a webhook.
   */
  enable(accountId: string, monitorId: string): Promise<WebhookView>;
}

export interface MonitorAdminUseCases {
  /** the account that owns a monitor (the CLI addresses monitors by id alone) */
  ownerOfMonitor(monitorId: string): Promise<string>;
}

const notFound = (monitorId: string) => new NotFoundError('monitor', `no monitor with id ${monitorId}`);

/** The account's monitor, or NotFound (also for another account's id or a malformed one). */
export async function loadMonitor(ctx: Ctx, accountId: string, monitorId: string): Promise<MonitorRecord> {
  const [owner, id] = monitorIds(accountId, monitorId);
  const m = await ctx.repos.monitors.find(owner, id);
  if (!m) throw notFound(monitorId);
  return m;
}

/** The account's monitor id, checked to exist (for the logs: no projection read), or NotFound. */
export async function ownMonitor(ctx: Ctx, accountId: string, monitorId: string): Promise<string> {
  const [owner, id] = monitorIds(accountId, monitorId);
  if (!(await ctx.repos.monitors.owns(owner, id))) throw notFound(monitorId);
  return id;
}

/** [accountId, monitorId], or NotFound when either is not a UUID */
function monitorIds(accountId: string, monitorId: string): [string, string] {
  const message = `no monitor with id ${monitorId}`;
  const id = idOrNotFound(monitorId, 'monitor', message);
  return [idOrNotFound(accountId, 'monitor', message), id];
}

function checkInterval(ctx: Ctx, raw: number | undefined, plan: PlanName): number | undefined {
  if (raw === undefined) return undefined;
  const min = ctx.opts.plans[plan].pollIntervalSec;
  if (!Number.isInteger(raw) || raw > MAX_INTERVAL_SEC) {
    throw new ValidationError('intervalSec', `must be a whole number of seconds up to ${MAX_INTERVAL_SEC}`);
  }
  if (raw < min) {
    const starter = ctx.opts.plans.starter.pollIntervalSec;
    const hint = plan === 'free' && starter < min ? ` (Starter checks every ${starter} s)` : '';
    throw new ValidationError('intervalSec', `must be at least ${min} seconds on the ${PLAN_LABEL[plan]} plan${hint}`);
  }
  return raw;
}

function limitMessage(ctx: Ctx, plan: PlanName, limit: number): string {
  const s = (n: number) => `${n} monitor${n === 1 ? '' : 's'}`;
  if (plan === 'free') {
    return (
      `the Free plan allows ${s(limit)}; delete one, or upgrade to Starter ` +
      `(${s(ctx.opts.monitorLimits.starter)}) — the 30-day Starter trial is on the Plan page`
    );
  }
  return `the Starter plan allows ${s(limit)}; delete a monitor to add another`;
}

export function monitorUseCases(ctx: Ctx): { monitors: MonitorUseCases; admin: MonitorAdminUseCases } {
  const repo = ctx.repos.monitors;
  const load = (accountId: string, monitorId: string) => loadMonitor(ctx, accountId, monitorId);

  async function setStatus(accountId: string, monitorId: string, isActive: boolean): Promise<MonitorView> {
    const m = await load(accountId, monitorId);
    if (m.isActive !== isActive) await repo.update(m.id, { isActive });
    return toMonitorView(await load(accountId, m.id));
  }

  const monitors: MonitorUseCases = {
    async list(accountId) {
      const account = await loadAccount(ctx, accountId);
      return (await repo.list(account.id)).map(toMonitorView);
    },

    async get(accountId, monitorId) {
      return toMonitorView(await load(accountId, monitorId));
    },

    async create(accountId, input) {
      const watched = checkWatched(input);
      const keywords = checkKeywords(input.keywords);
      const filters = checkFilters(input);
      const events = checkEvents(input.events, watched.query !== null);
      const settings = checkWebhookSettings(input.webhookSettings);
      const account = await loadAccount(ctx, accountId);
      if (input.webhookUrl !== undefined) requireVerified(ctx, account, 'save a webhook URL');
      const plan = planOf(ctx, account);
      const interval = checkInterval(ctx, input.intervalSec, plan) ?? ctx.opts.plans[plan].pollIntervalSec;
      const hook =
        input.webhookUrl !== undefined ? await checkWebhookUrl(input.webhookUrl, ctx.opts.webhookUrlCheck) : undefined;
      const id = randomUUID();
      const secret = hook ? generateWebhookSecret() : null;
      // before the transaction: a missing encryption key fails here, with nothing written
      const secretCiphertext = secret ? ctx.secretBox().encrypt(secret, id) : null;
      const limit = ctx.opts.monitorLimits[plan];
      const created = await repo.createWithinLimit(
        {
          id,
          accountId: account.id,
          ...watched,
          keywords,
          ...filterColumns(filters),
          ...(events ? { events } : {}),
          checkIntervalSec: interval,
          webhook: hook && secretCiphertext ? { url: hook.url, kind: hook.kind, secretCiphertext, ...settings } : null,
        },
        limit,
      );
      if (!created) throw new PlanLimitError(limitMessage(ctx, plan, limit), limit, plan);
      return { monitor: toMonitorView(await load(account.id, id)), secret, warnings: hook?.warnings ?? [] };
    },

    async update(accountId, monitorId, edit) {
      const m = await load(accountId, monitorId);
      const { target, query, keywords } = checkEdit(m, edit);
      const filters = checkFilters(edit);
      const events = checkEvents(edit.events, m.query !== null);
      const account = await loadAccount(ctx, accountId);
      const interval = checkInterval(ctx, edit.intervalSec, planOf(ctx, account));
      await repo.update(m.id, {
        ...(events ? { events } : {}),
        ...(target !== undefined ? { targetUsername: target } : {}),
        ...(query !== undefined ? { query } : {}),
        ...(keywords !== undefined ? { keywords } : {}),
        ...filterColumns(filters),
        ...(interval !== undefined ? { checkIntervalSec: interval } : {}),
      });
      return toMonitorView(await load(accountId, m.id));
    },

    pause: (accountId, monitorId) => setStatus(accountId, monitorId, false),
    resume: (accountId, monitorId) => setStatus(accountId, monitorId, true),

    async remove(accountId, monitorId) {
      const m = await load(accountId, monitorId);
      if (!(await repo.remove(m.accountId, m.id))) throw notFound(monitorId);
    },
  };

  const admin: MonitorAdminUseCases = {
    async ownerOfMonitor(monitorId) {
      const id = idOrNotFound(monitorId, 'monitor', `no monitor with id ${monitorId}`);
      const owner = await repo.ownerOf(id);
      if (owner === null) throw notFound(monitorId);
      return owner;
    },
  };

  return { monitors, admin };
}

export function webhookUseCases(ctx: Ctx): WebhookUseCases {
  const repo = ctx.repos.monitors;
  const load = (accountId: string, monitorId: string) => loadMonitor(ctx, accountId, monitorId);
  const encrypt = (secret: string, monitorId: string) => ctx.secretBox().encrypt(secret, monitorId);

  async function withWebhook(accountId: string, monitorId: string) {
    const m = await load(accountId, monitorId);
    if (!m.webhook) {
      throw new ConflictError('no_webhook', `monitor ${m.id} has no webhook; set its URL first`, 'webhookUrl');
    }
    return { ...m, webhook: m.webhook };
  }

  return {
    async set(accountId, monitorId, rawUrl, rawSettings) {
      // the monitor first: another account's id is NotFound whatever the URL
      const m = await load(accountId, monitorId);
      const settings = checkWebhookSettings(rawSettings);
      requireVerified(ctx, await loadAccount(ctx, accountId), 'save a webhook URL');
      const hook = await checkWebhookUrl(rawUrl, ctx.opts.webhookUrlCheck);
      const secret = generateWebhookSecret();
      await repo.setWebhook(
        m.id,
        { url: hook.url, kind: hook.kind, secretCiphertext: encrypt(secret, m.id), ...settings },
        ctx.now(),
      );
      const webhook = toWebhookView((await withWebhook(accountId, m.id)).webhook);
      return { webhook, secret, standardSecret: standardWebhookSecret(secret), warnings: hook.warnings };
    },

    async rotate(accountId, monitorId, opts = {}) {
      const overlapSec = opts.overlapSec ?? ROTATION_OVERLAP_SEC_DEFAULT;
      if (!Number.isInteger(overlapSec) || overlapSec < 60 || overlapSec > ROTATION_OVERLAP_SEC_MAX) {
        throw new ValidationError(
          'overlapSec',
          `must be a whole number of seconds from 60 to ${ROTATION_OVERLAP_SEC_MAX}`,
        );
      }
      const m = await withWebhook(accountId, monitorId);
      const secret = generateWebhookSecret();
      const now = ctx.now();
      const current = await repo.webhookSecret(m.id);
      await repo.rotateSecret(m.id, {
        secretCiphertext: encrypt(secret, m.id),
        rotatedAt: now,
        // a rotation during an overlap keeps the secret in force now (the customer's current one) as the old one
        previousSecretCiphertext: opts.now ? null : current,
        previousSecretUntil: opts.now ? null : new Date(now.getTime() + overlapSec * 1000),
      });
      const webhook = toWebhookView((await withWebhook(accountId, m.id)).webhook);
      return { webhook, secret, standardSecret: standardWebhookSecret(secret), warnings: [] };
    },

    async get(accountId, monitorId) {
      return toWebhookView((await withWebhook(accountId, monitorId)).webhook);
    },

    async configure(accountId, monitorId, rawSettings) {
      const m = await withWebhook(accountId, monitorId);
      const settings = checkWebhookSettings(rawSettings);
      if (Object.keys(settings).length > 0) await repo.configureWebhook(m.id, settings);
      return toWebhookView((await withWebhook(accountId, m.id)).webhook);
    },

    async useNewSecret(accountId, monitorId) {
      const m = await withWebhook(accountId, monitorId);
      await repo.dropPreviousSecret(m.id);
      return toWebhookView((await withWebhook(accountId, m.id)).webhook);
    },

    async remove(accountId, monitorId) {
      const m = await load(accountId, monitorId);
      await repo.removeWebhook(m.id);
    },

    async enable(accountId, monitorId) {
      const m = await withWebhook(accountId, monitorId);
      await repo.enableWebhook(m.id);
      return toWebhookView((await withWebhook(accountId, m.id)).webhook);
    },

    async sendTest(accountId, monitorId) {
      const m = await withWebhook(accountId, monitorId);
      const payload = {
        event: 'monitor.test' as const,
        monitor: monitorRef(m),
        test: true as const,
      };
      const messageId = await ctx.publish('monitor.test', payload, { accountId: m.accountId });
      // the dispatcher uses the message id as the test's X-Service-Delivery
      return { messageId, deliveryId: messageId };
    },
  };
}
