/**
 * Monitor and webhook commands: create and manage monitors, set / test / rotate / remove webhooks,
 * read the delivery log and hit history and ask for a redelivery. The rules (plan limits, webhook
 * URL policy, secrets generated, stored encrypted with SECRETS_ENCRYPTION_KEY and printed exactly
 * once) live in @sts/usecases; these commands parse flags, call it and print. Commands that take a
 * monitor or attempt id act for the account that owns it. `webhook test` and `redeliver` publish
 * to RabbitMQ (AMQP_URL); the webhook-dispatcher sends.
 */
import {
  ConflictError,
  RECOVER_MAX,
  type DeliveryDetail,
  type MonitorView,
  type UseCases,
  type WebhookSettingsInput,
  type WebhookView,
  type WebhookWithSecret,
  RECOVER_OUTCOMES,
  type RecoverOutcome,
  type RecoverWindow,
} from '@sts/usecases';
import {
  CliUsageError,
  optionalInt,
  optionalString,
  requireUuid,
  type CliContext,
  type Command,
  type CommandResult,
  type OptionSpec,
  type OptionValues,
} from '../command';
import { call, useCases } from '../usecases';

/** The owner of a monitor, then the call on its behalf. */
async function forMonitor<T>(
  ctx: CliContext,
  monitorId: string,
  fn: (accountId: string) => Promise<T>,
  flags: Record<string, string> = {},
): Promise<T> {
  const uc = useCases(ctx);
  return call(
    async () => {
      const accountId = await uc.admin.ownerOfMonitor(monitorId);
      try {
        return await fn(accountId);
      } catch (err) {
        if (err instanceof ConflictError && err.reason === 'no_webhook') {
          throw new Error(`monitor ${monitorId} has no webhook; set one with "webhook set"`);
        }
        throw err;
      }
    },
    { flags },
  );
}

/**
 * A command on one monitor (`--monitor ID`), run for the account that owns it: `parse` reads the
 * other flags first (a usage error before anything is looked up), `act` calls the use-case,
 * `print` shapes the answer. `flags`: use-case field → flag, for validation errors.
 */
function monitorCommand<A, T>(c: {
  name: string;
  summary: string;
  usage: string;
  options?: OptionSpec;
  flags?: Record<string, string>;
  parse: (values: OptionValues) => A;
  act: (uc: UseCases, accountId: string, monitorId: string, args: A) => Promise<T>;
  print: (result: T, monitorId: string, args: A) => CommandResult;
}): Command {
  return {
    name: c.name,
    summary: c.summary,
    usage: c.usage,
    options: { monitor: { type: 'string' }, ...c.options },
    async run(ctx, values) {
      const monitorId = requireUuid(values, 'monitor', 'a monitor');
      const args = c.parse(values);
      const uc = useCases(ctx);
      const result = await forMonitor(ctx, monitorId, (a) => c.act(uc, a, monitorId, args), c.flags);
      return c.print(result, monitorId, args);
    },
  };
}

/** for commands that read no flag but --monitor */
const noFlags = (): void => undefined;

/** "  excluding replies, quotes  lang en, de" or "" */
function filtersText(m: MonitorView): string {
  const ex = m.filters.exclude.length ? `  excluding ${m.filters.exclude.join(', ')}` : '';
  return `${ex}${m.filters.lang.length ? `  lang ${m.filters.lang.join(', ')}` : ''}`;
}

/** what a monitor watches: "@alice" or "query: launch OR release" */
function watchedText(m: Pick<MonitorView, 'targetUsername' | 'query'>): string {
  return m.targetUsername !== null ? `@${m.targetUsername}` : `query: ${m.query ?? ''}`;
}

function monitorLine(m: MonitorView): string {
  const w = m.webhook;
  const health = w && w.health.state !== 'ok' ? ` (${w.health.state.toUpperCase()})` : '';
  const held = w && w.health.held > 0 ? `  held ${w.health.held}` : '';
  const hook = w ? `  webhook ${w.label}${w.isBroken ? ' (BROKEN)' : ''}${health}${held}` : '';
  return (
    `${m.id}  ${watchedText(m)}${m.keywords.length ? ` [${m.keywords.join(', ')}]` : ''}${filtersText(m)}  ${m.status}` +
    `  every ${m.intervalSec} s  hits ${m.hitCount}  last check ${m.lastCheckAt?.toISOString() ?? 'never'}` +
    `${m.lastError ? `  error: ${m.lastError}` : ''}${hook}${eventsText(m)}`
  );
}

/** "  events posts, profile  target SUSPENDED" for what differs from the defaults, else "" */
function eventsText(m: MonitorView): string {
  const events = m.events.join(',') === 'posts' ? '' : `  events ${m.events.join(', ')}`;
  return `${events}${m.targetStatus !== 'ok' ? `  target ${m.targetStatus.toUpperCase()}` : ''}`;
}

function monitorJson(m: MonitorView): Record<string, unknown> {
  return {
    id: m.id,
    target_username: m.targetUsername,
    query: m.query,
    keywords: m.keywords,
    filters: { exclude: m.filters.exclude, lang: m.filters.lang },
    status: m.status,
    events: m.events,
    target_status: m.targetStatus,
    target_status_at: m.targetStatusAt?.toISOString() ?? null,
    check_interval_sec: m.intervalSec,
    last_check_at: m.lastCheckAt?.toISOString() ?? null,
    last_error: m.lastError,
    hit_count: m.hitCount,
    webhook: m.webhook
      ? {
          url: m.webhook.shownUrl,
          kind: m.webhook.kind,
          is_broken: m.webhook.isBroken,
          broken_reason: m.webhook.brokenReason,
          health: m.webhook.health.state,
          consecutive_failures: m.webhook.health.consecutiveFailures,
          failing_since: m.webhook.health.failingSince?.toISOString() ?? null,
          disabled_at: m.webhook.health.disabledAt?.toISOString() ?? null,
          held_events: m.webhook.health.held,
          held_dropped: m.webhook.health.heldDropped,
        }
      : null,
    created_at: m.createdAt.toISOString(),
  };
}

/**
 * the flags that make up a monitor's rule: target (or --username) or query, keywords (with -word
 * exclusions), post types, languages
 */
const RULE_OPTIONS = {
  target: { type: 'string' },
  username: { type: 'string' },
  query: { type: 'string' },
  keywords: { type: 'string' },
  exclude: { type: 'string' },
  lang: { type: 'string' },
} as const;

const monitorCreate: Command = {
  name: 'monitor create',
  summary: 'create a monitor (optionally with a webhook; its signing secret is shown once)',
  usage:
    'usage: npm run cli -- monitor create --account ID (--target USERNAME | --query QUERY) [--keywords "a,b c,-d,-\\"e f\\""]\n' +
    '                                     [--exclude replies,reposts,quotes] [--lang en,de]\n' +
    '                                     [--events posts,profile,deletes] [--webhook-url https://...] [--interval SECONDS] [--json]\n' +
    '  --events: what the monitor sends, posts (monitor.hit, the default), profile\n' +
    "  (monitor.profile_changed: the account's name, bio, avatar, verified flag or username changed)\n" +
    '  and/or deletes (monitor.post_deleted: the account deleted a post; username monitors only).\n' +
    '  A keyword written -word or -"a phrase" excludes posts containing it; --exclude leaves out post\n' +
    '  types; --lang keeps only posts in those languages (a post without a language never matches).\n' +
    '  --query watches a search query instead of one account (docs/queries.md), e.g.\n' +
    '  --query \'"new release" OR launch -giveaway lang:en\'; --username is another name for --target.\n' +
    "  The account's plan limits how many monitors it may have (PLAN_FREE_MONITORS, PLAN_STARTER_MONITORS)\n" +
    "  and how short the interval may be (the plan's poll interval).",
  options: {
    account: { type: 'string' },
    ...RULE_OPTIONS,
    events: { type: 'string' },
    'webhook-url': { type: 'string' },
    interval: { type: 'string' },
  },
  async run(ctx, values) {
    const accountId = requireUuid(values, 'account', 'an account');
    const watched = watchedFlags(values);
    const keywords = optionalString(values, 'keywords');
    const intervalSec = optionalInt(values, 'interval', 10, 86_400);
    const webhookUrl = optionalString(values, 'webhook-url');
    const { monitor, secret, warnings } = await call(
      () =>
        useCases(ctx).monitors.create(accountId, {
          ...watched,
          keywords: keywords ?? null,
          ...ruleFlags(values),
          ...(intervalSec !== undefined ? { intervalSec } : {}),
          ...(webhookUrl !== undefined ? { webhookUrl } : {}),
        }),
      { flags: { intervalSec: 'interval', ...watchedFlagNames(watched) } },
    );
    const lines = [
      `monitor ${monitor.id} created: watching ${watchedText(monitor)}${
        monitor.keywords.length ? ` for ${monitor.keywords.join(', ')}` : ''
      }${filtersText(monitor)}`,
    ];
    if (monitor.webhook && secret) {
      lines.push(`webhook: ${monitor.webhook.shownUrl} (${monitor.webhook.kind})`);
      lines.push(`signing secret (shown once, store it now): ${secret}`);
      lines.push(...warnings.map((w) => `warning: ${w}`));
    }
    return {
      json: { id: monitor.id, ...(secret ? { secret } : {}), ...(warnings.length ? { warnings } : {}) },
      text: lines.join('\n'),
    };
  },
};

/**
 * --target (or --username) or --query: exactly one (a usage error, exit 2, otherwise). Both
 * spellings of the username at once are refused too.
 */
function watchedFlags(values: OptionValues): { target: string } | { query: string } {
  const target = optionalString(values, 'target');
  const username = optionalString(values, 'username');
  const query = optionalString(values, 'query');
  if (target !== undefined && username !== undefined) {
    throw new CliUsageError('--target and --username are the same flag; give one');
  }
  const user = target ?? username;
  if (user !== undefined && query !== undefined) {
    throw new CliUsageError(
      '--username (--target) and --query are mutually exclusive: a monitor watches one or the other',
    );
  }
  if (query !== undefined) return { query };
  if (user === undefined || user.trim() === '') {
    throw new CliUsageError('--target USERNAME (or --username) or --query QUERY is required');
  }
  return { target: user.trim() };
}

/** the flag a refused username or query is reported under */
function watchedFlagNames(w: { target: string } | { query: string }): Record<string, string> {
  return 'query' in w ? { query: 'query' } : { target: 'target' };
}

/** --exclude, --lang and --events as given (absent: unchanged on update, the defaults on create). */
function ruleFlags(values: OptionValues): { exclude?: string; lang?: string; events?: string } {
  const exclude = optionalString(values, 'exclude');
  const lang = optionalString(values, 'lang');
  const events = optionalString(values, 'events');
  return {
    ...(exclude !== undefined ? { exclude } : {}),
    ...(lang !== undefined ? { lang } : {}),
    ...(events !== undefined ? { events } : {}),
  };
}

const monitorPreview: Command = {
  name: 'monitor preview',
  summary: "of the target's last 50 posts, which would fire (nothing is saved; costs no API quota)",
  usage:
    'usage: npm run cli -- monitor preview --account ID (--target U | --query Q) [--keywords "a,-b"] [--exclude replies,reposts,quotes]\n' +
    '                                      [--lang en,de] [--json]\n' +
    '  Each post is marked matched or not, with the reason (keyword, type, language, exclusion). One\n' +
    '  upstream read per target at most, cached briefly in Redis. --json prints a list of posts, each\n' +
    '  {"id", "text", "created_at", "lang", "referenced_tweets", "matched", "reason", "code"}.',
  options: {
    account: { type: 'string' },
    ...RULE_OPTIONS,
  },
  async run(ctx, values) {
    const accountId = requireUuid(values, 'account', 'an account');
    const watched = watchedFlags(values);
    const keywords = optionalString(values, 'keywords');
    const p = await call(
      () => useCases(ctx).monitors.preview(accountId, { ...watched, keywords: keywords ?? null, ...ruleFlags(values) }),
      { flags: watchedFlagNames(watched) },
    );
    const json = p.posts.map((x) => ({
      id: x.id,
      text: x.text,
      created_at: x.createdAt.toISOString(),
      lang: x.lang,
      referenced_tweets: x.referencedTweets ?? [],
      matched: x.matched,
      reason: x.reason,
      code: x.code,
    }));
    const fired = p.posts.filter((x) => x.matched).length;
    const lines = [
      p.query !== null
        ? `of ${p.posts.length} recent posts found for the query, ${fired} would have fired:`
        : `of @${p.target}'s last ${p.posts.length} posts, ${fired} would have fired:`,
      ...p.posts.map(
        (x) => `${x.matched ? 'MATCH ' : '  -   '} ${x.id}  ${x.text.replace(/\s+/g, ' ').slice(0, 60)}  (${x.reason})`,
      ),
    ];
    return { json, text: lines.join('\n') };
  },
};

const monitorUpdate = monitorCommand({
  name: 'monitor update',
  summary: "change a monitor's target, keywords, rules or interval (only the flags given change)",
  usage:
    'usage: npm run cli -- monitor update --monitor ID [--target USERNAME | --query QUERY] [--keywords "a,-b"]\n' +
    '                                     [--exclude replies,reposts,quotes] [--lang en,de] [--events posts,profile,deletes]\n' +
    '                                     [--interval SECONDS] [--json]\n' +
    '  An empty value clears a list: --keywords "" (every post), --exclude "" (all types), --lang "" (any language).',
  options: { ...RULE_OPTIONS, events: { type: 'string' }, interval: { type: 'string' } },
  flags: { intervalSec: 'interval' },
  parse: (values) => {
    const target = optionalString(values, 'target') ?? optionalString(values, 'username');
    const query = optionalString(values, 'query');
    const keywords = optionalString(values, 'keywords');
    const intervalSec = optionalInt(values, 'interval', 10, 86_400);
    return {
      ...(target !== undefined ? { target } : {}),
      ...(query !== undefined ? { query } : {}),
      ...(keywords !== undefined ? { keywords } : {}),
      ...ruleFlags(values),
      ...(intervalSec !== undefined ? { intervalSec } : {}),
    };
  },
  act: (uc, a, monitorId, changes) => uc.monitors.update(a, monitorId, changes),
  print: (m) => ({ json: monitorJson(m), text: `monitor updated: ${monitorLine(m)}` }),
});

const monitorList: Command = {
  name: 'monitor list',
  summary: "an account's monitors with status, last check, last error, hit count and webhook",
  usage: 'usage: npm run cli -- monitor list --account ID [--json]',
  options: { account: { type: 'string' } },
  async run(ctx, values) {
    const accountId = requireUuid(values, 'account', 'an account');
    const monitors = await call(() => useCases(ctx).monitors.list(accountId));
    return {
      json: { data: monitors.map(monitorJson) },
      text: monitors.length ? monitors.map(monitorLine).join('\n') : `no monitors for account ${accountId}`,
    };
  },
};

function statusCommand(name: 'pause' | 'resume'): Command {
  return monitorCommand({
    name: `monitor ${name}`,
    summary: name === 'pause' ? 'pause a monitor (it still counts against the plan limit)' : 'resume a paused monitor',
    usage: `usage: npm run cli -- monitor ${name} --monitor ID [--json]`,
    parse: noFlags,
    act: (uc, a, monitorId) => uc.monitors[name](a, monitorId),
    print: (m) => ({ json: monitorJson(m), text: monitorLine(m) }),
  });
}

const monitorDelete = monitorCommand({
  name: 'monitor delete',
  summary: 'delete a monitor with its webhook, hits and delivery log',
  usage: 'usage: npm run cli -- monitor delete --monitor ID [--json]',
  parse: noFlags,
  act: (uc, a, monitorId) => uc.monitors.remove(a, monitorId),
  print: (_, monitorId) => ({ json: { id: monitorId, deleted: true }, text: `monitor ${monitorId} deleted` }),
});

/** what `webhook set` was asked for: a URL (with a new secret), or the delivery rules alone */
type WebhookSetArgs = { url: string | undefined; settings: WebhookSettingsInput };
type WebhookSetResult = { kind: 'set'; set: WebhookWithSecret } | { kind: 'configured'; webhook: WebhookView };

function parseWebhookSet(values: OptionValues): WebhookSetArgs {
  const url = optionalString(values, 'url');
  const settings = { retryPolicy: optionalString(values, 'retry'), ordering: optionalString(values, 'ordering') };
  if (url === undefined && settings.retryPolicy === undefined && settings.ordering === undefined)
    throw new CliUsageError('give --url, --retry or --ordering');
  return { url, settings };
}

function webhookSetOutput(r: WebhookSetResult, monitorId: string): CommandResult {
  const webhook = r.kind === 'set' ? r.set.webhook : r.webhook;
  const rules = `retry ${webhook.retryPolicy}, ordering ${webhook.ordering}`;
  const json = {
    monitor_id: monitorId,
    url: webhook.shownUrl,
    kind: webhook.kind,
    retry_policy: webhook.retryPolicy,
    ordering: webhook.ordering,
  };
  if (r.kind === 'configured')
    return { json, text: `webhook of monitor ${monitorId}: ${webhook.shownUrl} (${webhook.kind}; ${rules})` };
  const { secret, warnings } = r.set;
  return {
    json: { ...json, secret, ...(warnings.length ? { warnings } : {}) },
    text: [
      `webhook of monitor ${monitorId}: ${webhook.shownUrl} (${webhook.kind}; ${rules})`,
      `signing secret (shown once, store it now): ${secret}`,
      ...warnings.map((w) => `warning: ${w}`),
    ].join('\n'),
  };
}

const webhookSet = monitorCommand({
  name: 'webhook set',
  summary: "set a monitor's webhook URL (a new signing secret is shown once) and its delivery rules",
  usage:
    'usage: npm run cli -- webhook set --monitor ID [--url https://...] [--retry standard|none] [--ordering fifo|unordered] [--json]\n' +
    '  --url sets or replaces the URL and makes a new signing secret; without it only the rules given change.\n' +
    '  --retry standard: a failed delivery is tried again after 5 s, 30 s, 2 min, 10 min, 30 min, 2 h, 6 h, 12 h.\n' +
    '  --ordering fifo: the next event goes only after the previous one succeeded or its retries ran out.',
  options: { url: { type: 'string' }, retry: { type: 'string' }, ordering: { type: 'string' } },
  flags: { webhookUrl: 'url', retryPolicy: 'retry', ordering: 'ordering' },
  parse: parseWebhookSet,
  act: async (uc, a, monitorId, { url, settings }): Promise<WebhookSetResult> =>
    url === undefined
      ? { kind: 'configured', webhook: await uc.webhooks.configure(a, monitorId, settings) }
      : { kind: 'set', set: await uc.webhooks.set(a, monitorId, url, settings) },
  print: webhookSetOutput,
});

const webhookRotate = monitorCommand({
  name: 'webhook rotate',
  summary: "replace a monitor's webhook signing secret (the new one is shown once); the old one overlaps 24 h",
  usage:
    'usage: npm run cli -- webhook rotate --monitor ID [--now] [--json]\n' +
    '  By default the old secret overlaps for 24 h: webhook-signature carries signatures by both, and\n' +
    '  X-Service-Signature stays on the old one until "webhook use-new-secret" or the overlap ends.\n' +
    '  --now drops the old secret at once (a leaked secret).',
  options: { now: { type: 'boolean' } },
  parse: (values) => ({ now: values.now === true }),
  act: (uc, a, monitorId, o) => uc.webhooks.rotate(a, monitorId, o),
  print: ({ webhook, secret, standardSecret }, monitorId) => {
    const until = webhook.previousSecretUntil?.toISOString() ?? null;
    return {
      json: {
        monitor_id: monitorId,
        secret,
        standard_secret: standardSecret,
        rotated_at: webhook.secretRotatedAt?.toISOString() ?? null,
        previous_secret_until: until,
      },
      text: [
        until
          ? `signing secret of monitor ${monitorId} rotated; X-Service-Signature stays on the old secret until ${until} (or "webhook use-new-secret"), webhook-signature carries both`
          : `signing secret of monitor ${monitorId} rotated now; the old secret signs nothing more`,
        `signing secret (shown once, store it now): ${secret}`,
        `the same for Standard Webhooks libraries: ${standardSecret}`,
      ].join('\n'),
    };
  },
});

const webhookUseNewSecret = monitorCommand({
  name: 'webhook use-new-secret',
  summary: 'end an overlapped rotation now: every signature uses the new secret',
  usage: 'usage: npm run cli -- webhook use-new-secret --monitor ID [--json]',
  parse: noFlags,
  act: (uc, a, monitorId) => uc.webhooks.useNewSecret(a, monitorId),
  print: (_, monitorId) => ({
    json: { monitor_id: monitorId, previous_secret_until: null },
    text: `monitor ${monitorId}: deliveries are signed with the new secret only`,
  }),
});

const webhookRemove = monitorCommand({
  name: 'webhook remove',
  summary: "remove a monitor's webhook (hits are still recorded)",
  usage: 'usage: npm run cli -- webhook remove --monitor ID [--json]',
  parse: noFlags,
  act: (uc, a, monitorId) => uc.webhooks.remove(a, monitorId),
  print: (_, monitorId) => ({
    json: { monitor_id: monitorId, removed: true },
    text: `webhook of monitor ${monitorId} removed`,
  }),
});

const webhookEnable = monitorCommand({
  name: 'webhook enable',
  summary: 'enable a webhook that endpoint health disabled: the events held meanwhile go out first, oldest first',
  usage: 'usage: npm run cli -- webhook enable --monitor ID [--json]',
  parse: noFlags,
  act: (uc, a, monitorId) => uc.webhooks.enable(a, monitorId),
  print: (w, monitorId) => ({
    json: { monitor_id: monitorId, health: w.health.state, held_events: w.health.held },
    text:
      `webhook of monitor ${monitorId} enabled` +
      (w.health.held > 0 ? `; ${w.health.held} held events go out first, oldest first` : ''),
  }),
});

const webhookTest = monitorCommand({
  name: 'webhook test',
  summary: 'send a test ping (monitor.test) to the monitor’s webhook, on every plan',
  usage: 'usage: npm run cli -- webhook test --monitor ID [--json]',
  parse: noFlags,
  act: (uc, a, monitorId) => uc.webhooks.sendTest(a, monitorId),
  print: (q, monitorId) => ({
    json: { message_id: q.messageId, delivery_id: q.deliveryId, monitor_id: monitorId },
    text: `test ping queued: message ${q.messageId} (X-Service-Delivery); see "deliveries --monitor ${monitorId}"`,
  }),
});

/** --limit and --cursor: one page of a list, newest first */
const PAGE_OPTIONS = { limit: { type: 'string' }, cursor: { type: 'string' } } as const;

function page(values: OptionValues): { limit: number; cursor?: string } {
  const limit = optionalInt(values, 'limit', 1, 500) ?? 20;
  const cursor = optionalString(values, 'cursor');
  return cursor !== undefined ? { limit, cursor } : { limit };
}

/** a page of a list: JSON with its count and the next cursor; one line per item, then where the older ones are */
function pageResult(
  data: Record<string, unknown>[],
  lines: string[],
  nextCursor: string | null,
  none: string,
): CommandResult {
  const text = nextCursor ? [...lines, `(older: --cursor ${nextCursor})`] : lines;
  return {
    json: { data, meta: { count: data.length }, next_cursor: nextCursor },
    text: data.length ? text.join('\n') : none,
  };
}

const deliveries = monitorCommand({
  name: 'deliveries',
  summary: "a monitor's webhook delivery attempts, newest first",
  usage:
    'usage: npm run cli -- deliveries --monitor ID [--limit N (1-500, default 20)] [--cursor C] [--detail] [--json]',
  options: { ...PAGE_OPTIONS, detail: { type: 'boolean' } },
  parse: (values) => ({ page: page(values), detail: values.detail === true }),
  act: async (uc, a, monitorId, o) => {
    const list = await uc.deliveries.list(a, monitorId, o.page);
    // --detail: each attempt's request as sent and response (one look-up per attempt, at most --limit)
    const more = [];
    if (o.detail) for (const r of list.items) more.push(attemptDetailJson(await uc.deliveries.detail(a, r.id)));
    return { result: list, details: more };
  },
  print: ({ result, details }, monitorId, o) => {
    const data = result.items.map((r, i) => ({
      id: r.id,
      event: r.event,
      delivery_id: r.deliveryId,
      hit_id: r.hitId,
      outcome: r.outcome,
      attempt: r.attempt,
      next_attempt_at: r.nextAttemptAt?.toISOString() ?? null,
      held: r.held,
      status_code: r.statusCode,
      latency_ms: r.latencyMs,
      error: r.error,
      url: r.url,
      response_snippet: r.responseSnippet,
      created_at: r.createdAt.toISOString(),
      ...(o.detail ? details[i] : {}),
    }));
    const lines = data.map(
      (d) =>
        `${d.created_at}  ${d.outcome.padEnd(9)} ${String(d.status_code ?? '-').padStart(3)} ${String(
          d.latency_ms ?? '-',
        ).padStart(6)} ms  ${d.event.padEnd(12)} attempt ${d.id}  delivery ${d.delivery_id}${
          d.attempt !== null ? `  #${d.attempt}` : ''
        }${d.next_attempt_at ? `  next attempt ${d.next_attempt_at}` : ''}${
          d.held ? '  next attempt held until the webhook is enabled' : ''
        }${d.error ? `  error: ${d.error}` : ''}`,
    );
    return pageResult(data, lines, result.nextCursor, `no delivery attempts for monitor ${monitorId}`);
  },
});

/** attempt detail as JSON: the request as sent, the response with its first 4 KiB as base64 (and as text when UTF-8) */
function attemptDetailJson(d: DeliveryDetail) {
  let text: string | null = null;
  if (d.response) {
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(d.response.body);
    } catch {
      text = null;
    }
  }
  return {
    request: d.request,
    response: d.response && {
      status: d.response.status,
      headers: d.response.headers,
      body_base64: d.response.body.toString('base64'),
      body_text: text,
    },
  };
}

const hits = monitorCommand({
  name: 'hits',
  summary: "a monitor's hits, newest first, with links to the posts",
  usage: 'usage: npm run cli -- hits --monitor ID [--limit N (1-500, default 20)] [--cursor C] [--json]',
  options: PAGE_OPTIONS,
  parse: page,
  act: (uc, a, monitorId, p) => uc.hits.list(a, monitorId, p),
  print: (result, monitorId) => {
    const data = result.items.map((h) => ({
      id: h.id,
      tweet_id: h.tweetId,
      text: h.text,
      author_username: h.authorUsername,
      tweet_created_at: h.tweetCreatedAt.toISOString(),
      detected_at: h.detectedAt.toISOString(),
      post_url: h.postUrl,
    }));
    const lines = data.map((h) => `${h.detected_at}  @${h.author_username}  ${h.post_url}  ${h.text.slice(0, 80)}`);
    return pageResult(data, lines, result.nextCursor, `no hits for monitor ${monitorId}`);
  },
});

const redeliver: Command = {
  name: 'redeliver',
  summary:
    'send a logged delivery again, or every failed, skipped or exhausted one of a monitor in a time window (same X-Service-Delivery)',
  usage:
    'usage: npm run cli -- redeliver --attempt ID [--json]\n' +
    '       npm run cli -- redeliver --monitor ID --since 2026-11-24T10:00:00Z [--until T]\n' +
    '                                [--outcome failed,skipped,exhausted] [--json]\n' +
    '       npm run cli -- redeliver --monitor ID --failed-since T [--json]   (= --since T --outcome failed)\n' +
    '  --since: every delivery with an attempt of the outcomes (default all three) between --since and\n' +
    '  --until (default now) whose latest attempt still has one of them, oldest first, at most\n' +
    `  ${RECOVER_MAX} per run and the account's redelivery budget (run again for the rest), paced like any redelivery.`,
  options: {
    attempt: { type: 'string' },
    monitor: { type: 'string' },
    'failed-since': { type: 'string' },
    since: { type: 'string' },
    until: { type: 'string' },
    outcome: { type: 'string', multiple: true },
  },
  async run(ctx, values) {
    if (values.monitor !== undefined || values['failed-since'] !== undefined || values.since !== undefined)
      return recoverWindow(ctx, values);
    const attemptId = requireUuid(values, 'attempt', 'a delivery attempt');
    const uc = useCases(ctx);
    const q = await call(async () => uc.deliveries.redeliver(await uc.admin.ownerOfDelivery(attemptId), attemptId));
    return {
      json: { message_id: q.messageId, attempt_id: attemptId, delivery_id: q.deliveryId },
      text: `redelivery queued: message ${q.messageId}; delivery ${q.deliveryId} of monitor ${q.monitorId} will be sent again`,
    };
  },
};

const ZONED_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/;

/** an ISO 8601 time with a zone, or a usage error naming the flag */
function timeFlag(values: OptionValues, name: string): Date | undefined {
  const raw = optionalString(values, name);
  if (raw === undefined) return undefined;
  const t = ZONED_TIME.test(raw.trim()) ? new Date(raw.trim()) : null;
  if (!t || Number.isNaN(t.getTime())) {
    throw new CliUsageError(`--${name} must be an ISO 8601 time with a zone, such as 2026-11-24T10:00:00Z`);
  }
  return t;
}

/** --outcome, repeated or comma-separated; the use-case names an unknown one */
function outcomesFlag(values: OptionValues): RecoverOutcome[] | undefined {
  const raw = values.outcome;
  if (raw === undefined) return undefined;
  const list = (Array.isArray(raw) ? raw : [raw]).flatMap((v) => String(v).split(','));
  return list.map((o) => o.trim()).filter(Boolean) as RecoverOutcome[];
}

/** the window of `redeliver --monitor`: --since (or the older --failed-since, failed only), --until, --outcome */
function windowFlags(values: OptionValues): { window: RecoverWindow; flags: Record<string, string> } {
  const legacy = values['failed-since'] !== undefined;
  if (legacy && (values.since !== undefined || values.outcome !== undefined)) {
    throw new CliUsageError('--failed-since is --since with --outcome failed: give one or the other');
  }
  const since = timeFlag(values, legacy ? 'failed-since' : 'since');
  if (!since) throw new CliUsageError('--since is required with --monitor');
  const window = {
    since,
    until: timeFlag(values, 'until'),
    outcomes: legacy ? ['failed' as const] : outcomesFlag(values),
  };
  return { window, flags: { since: legacy ? 'failed-since' : 'since', until: 'until', outcomes: 'outcome' } };
}

async function recoverWindow(ctx: CliContext, values: OptionValues): Promise<CommandResult> {
  const monitorId = requireUuid(values, 'monitor', 'a monitor');
  const { window, flags } = windowFlags(values);
  const r = await forMonitor(ctx, monitorId, (a) => useCases(ctx).deliveries.recover(a, monitorId, window), flags);
  const what = (window.outcomes ?? RECOVER_OUTCOMES).join(', ');
  const until = window.until ? ` until ${window.until.toISOString()}` : '';
  const more =
    r.remaining === 0
      ? ''
      : r.retryAfterSec !== null
        ? `; ${r.remaining} more wait: the redelivery budget grants more in ${r.retryAfterSec} s, run the command again then`
        : `; ${r.remaining} more wait: run the command again`;
  return {
    json: {
      monitor_id: monitorId,
      queued: r.queued,
      remaining: r.remaining,
      delivery_ids: r.deliveryIds,
      retry_after: r.retryAfterSec,
    },
    text: `${r.queued} deliver${r.queued === 1 ? 'y' : 'ies'} (${what}) since ${window.since.toISOString()}${until} queued again${more}`,
  };
}

export const monitorCommands: Command[] = [
  monitorCreate,
  monitorUpdate,
  monitorPreview,
  monitorList,
  statusCommand('pause'),
  statusCommand('resume'),
  monitorDelete,
  webhookSet,
  webhookTest,
  webhookEnable,
  webhookRotate,
  webhookUseNewSecret,
  webhookRemove,
  deliveries,
  hits,
  redeliver,
];
