import type {
  MonitorCoverage,
  MonitorView,
  Overview,
  PayloadPreview,
  Preview,
  WebhookHealthView,
  WebhookView,
} from '@sts/usecases';
import { coverageSection } from './coverage';
import { eventsField } from './eventsField';
import { targetStatusBadge, targetStatusNotice } from './targetStatus';
import { formatInterval, formatTime } from '../domain/format';
import { field, formError, type FieldErrors } from './forms';
import { flag, html, type SafeHtml } from './html';
import { csrfField, layout, postButton, type PageContext } from './layout';
import { tableHead } from './table';

export interface MonitorFormValues {
  target?: string;
  query?: string;
  keywords?: string;
  exclude?: string;
  lang?: string;
  intervalSec?: string;
  webhookUrl?: string;
  /** the ticked event kinds; undefined: the form did not carry the checkboxes */
  events?: string[];
}

export type MonitorFormMode = { kind: 'new' } | { kind: 'edit'; monitor: MonitorView };

/** What a monitor watches, for titles and lists: "@alice" or "Query: launch OR release". */
export function watched(m: Pick<MonitorView, 'targetUsername' | 'query'>): string {
  return m.targetUsername !== null ? `@${m.targetUsername}` : `Query: ${m.query ?? ''}`;
}

/** "new posts and profile changes" */
function eventsText(m: MonitorView): string {
  const label = { posts: 'new posts', profile: 'profile changes', deletes: 'deleted posts' } as const;
  return m.events.map((e) => label[e]).join(' and ');
}

/** "replies and quotes left out · en, de" or nothing */
function rulesText(m: MonitorView): string {
  const parts = [];
  if (m.filters.exclude.length) parts.push(`${m.filters.exclude.join(' and ')} left out`);
  if (m.filters.lang.length) parts.push(`languages ${m.filters.lang.join(', ')}`);
  return parts.length ? parts.join(' · ') : 'every post type, any language';
}

/** "Of @target's last 50 posts, these would have fired": each post matched or not, and why. */
function previewSection(p: Preview): SafeHtml {
  const fired = p.posts.filter((x) => x.matched).length;
  return html`<section class="card" aria-labelledby="pv-h" data-testid="preview">
    <h2 id="pv-h">
      Preview:
      ${
        p.query !== null
          ? `of ${p.posts.length} recent posts found for the query, ${fired} would have fired`
          : `of @${p.target ?? ''}'s last ${p.posts.length} posts, ${fired} would have fired`
      }
    </h2>
    <div class="table-wrap">
      <table class="stack">
        ${tableHead(['Post', 'Would fire', 'Why'])}
        <tbody>
          ${p.posts.map(
            (x) =>
              html`<tr data-matched="${x.matched ? 'true' : 'false'}">
                <td data-label="Post">${x.text}</td>
                <td data-label="Would fire">${x.matched ? 'Yes' : 'No'}</td>
                <td data-label="Why">${x.reason}</td>
              </tr>`,
          )}
        </tbody>
      </table>
    </div>
  </section>`;
}

function status(m: MonitorView): SafeHtml {
  return html`<span class="badge ${m.status}">${m.status === 'active' ? 'Active' : 'Paused'}</span>`;
}

/** the list's hint that a monitor's endpoint is failing or disabled (the monitor page says why) */
function healthBadge(m: MonitorView): SafeHtml | string {
  const state = m.webhook?.health.state;
  if (!state || state === 'ok') return '';
  return html` <span class="badge failed" data-testid="webhook-health-badge"
    >${state === 'disabled' ? 'Webhook disabled' : 'Webhook failing'}</span
  >`;
}

function keywords(m: MonitorView): SafeHtml {
  return m.keywords.length ? html`${m.keywords.join(', ')}` : html`<span class="muted">every post</span>`;
}

function limitMessage(limits: Overview['monitors'], plan: string): SafeHtml {
  return html`<p class="alert" role="status" data-testid="monitor-limit">
    You are using ${limits.count} of ${limits.limit} monitor${limits.limit === 1 ? '' : 's'} on the ${plan} plan.
    ${plan === 'Free' ? html`<a href="/plan">Start the Starter trial</a> for more monitors and live webhooks.` : html`Delete or reuse a monitor to add another.`}
  </p>`;
}

export function monitorsPage(
  ctx: PageContext,
  monitors: MonitorView[],
  limits: Overview['monitors'],
  plan: string,
): string {
  const full = limits.count >= limits.limit;
  return layout(
    ctx,
    'Monitors',
    html`${full ? limitMessage(limits, plan) : html`<p><a class="btn primary" href="/monitors/new">New monitor</a></p>`}
    ${
      monitors.length === 0
        ? html`<div class="card">
            <p>
              No monitors yet. A monitor watches one account's posts for keywords and sends each match (a hit) to your
              webhook.
            </p>
          </div>`
        : html`<div class="table-wrap">
            <table class="stack">
              ${tableHead(['Target', 'Keywords', 'Status', 'Last check', 'Last error', 'Hits'])}
              <tbody>
                ${monitors.map(
                  (m) =>
                    html`<tr>
                      <td data-label="Target"><a href="/monitors/${m.id}">${watched(m)}</a>${targetStatusBadge(m)}</td>
                      <td data-label="Keywords">${keywords(m)}</td>
                      <td data-label="Status">${status(m)}${healthBadge(m)}</td>
                      <td data-label="Last check">${formatTime(m.lastCheckAt)}</td>
                      <td data-label="Last error">
                        ${m.lastError ? html`<span class="error-text">${m.lastError}</span>` : '—'}
                      </td>
                      <td data-label="Hits">${m.hitCount}</td>
                    </tr>`,
                )}
              </tbody>
            </table>
          </div>`
    }`,
  );
}

/**
 * A new monitor watches an account or a search query (one of the two); an edit keeps the kind,
 * so it shows only the monitor's own field.
 */
function watchedFields(mode: MonitorFormMode, values: MonitorFormValues, errors: FieldErrors | undefined) {
  const isQuery = mode.kind === 'edit' && mode.monitor.query !== null;
  const target = field({
    name: 'target',
    label: mode.kind === 'new' ? 'Account to watch' : 'Account watched',
    value: values.target,
    hint:
      mode.kind === 'new'
        ? 'A username, with or without @. Or leave it empty and watch a search query below.'
        : 'A username, with or without @.',
    errors,
  });
  const query = field({
    name: 'query',
    label: mode.kind === 'new' ? 'Or a search query to watch' : 'Search query watched',
    value: values.query,
    hint: 'Words, "phrases", OR, (parentheses), -exclusion, from:, lang:, is:reply|retweet|quote. At most 512 characters.',
    errors,
  });
  if (mode.kind === 'new') return html`${target} ${query}`;
  return isQuery ? query : target;
}

export function monitorFormPage(
  ctx: PageContext,
  mode: MonitorFormMode,
  values: MonitorFormValues,
  errors: FieldErrors | undefined,
  minIntervalSec: number,
  preview?: Preview,
): string {
  const isNew = mode.kind === 'new';
  const action = isNew ? '/monitors' : `/monitors/${mode.monitor.id}`;
  return layout(
    ctx,
    isNew ? 'New monitor' : `Edit ${watched(mode.monitor)}`,
    html`<form method="post" action="${action}" class="card narrow" novalidate>
        ${csrfField(ctx)} ${formError(errors)} ${watchedFields(mode, values, errors)}
        ${field({ name: 'keywords', label: 'Keywords (optional)', value: values.keywords, hint: 'Comma-separated; "quoted phrases" allowed. -word or -"a phrase" leaves out posts containing it. Empty: every post.', errors })}
        ${field({ name: 'exclude', label: 'Leave out post types (optional)', value: values.exclude, hint: 'Any of: replies, reposts, quotes. Empty: all fire.', errors })}
        ${field({ name: 'lang', label: 'Languages (optional)', value: values.lang, hint: 'Language codes such as en, de. A post without a language never matches. Empty: any language.', errors })}
        ${eventsField(values.events ?? ['posts'], isNew || mode.monitor.query === null, errors)}
        ${field({
          name: 'intervalSec',
          label: 'Check every (seconds)',
          type: 'number',
          value: values.intervalSec,
          min: minIntervalSec,
          max: 86400,
          hint: `Your plan allows every ${formatInterval(minIntervalSec)} at the most. Empty: that.`,
          errors,
        })}
        ${
          isNew
            ? field({
                name: 'webhookUrl',
                label: 'Webhook URL (optional)',
                type: 'url',
                value: values.webhookUrl,
                hint: 'HTTPS on a public address. Discord and Slack webhook URLs work too.',
                errors,
              })
            : ''
        }
        <div class="actions">
          <button type="submit" class="btn primary">${isNew ? 'Create monitor' : 'Save changes'}</button>
          <button type="submit" class="btn" name="action" value="preview">Preview</button>
          <a href="${isNew ? '/monitors' : `/monitors/${mode.monitor.id}`}">Cancel</a>
        </div>
      </form>
      ${preview ? previewSection(preview) : ''}`,
  );
}

const VERIFY_SNIPPET = `import { verify, WebhookVerificationError } from '@sts/signing';

// rawBody: the exact bytes received (before JSON.parse)
try {
  verify({ secret: process.env.WEBHOOK_SECRET, body: rawBody, headers: req.headers });
} catch (err) {
  if (err instanceof WebhookVerificationError) return res.status(401).end();
  throw err;
}
const event = JSON.parse(rawBody.toString('utf8'));`;

/** the events held while disabled: how many, what becomes of them, and how many a bound dropped */
function heldNotice(h: WebhookHealthView): SafeHtml | string {
  if (h.held === 0 && h.heldDropped === 0) return '';
  const dropped =
    h.heldDropped > 0
      ? html` ${h.heldDropped} older ones were dropped (the hold is bounded) and are logged as skipped: Recover sends
        them again.`
      : '';
  const what =
    h.state === 'disabled'
      ? 'they go out, oldest first and before new ones, once the webhook is enabled again.'
      : 'they are going out now, oldest first, before new ones.';
  return html`<p class="notice" data-testid="webhook-held" data-held="${String(h.held)}">
    <strong>${h.held.toLocaleString('en-US')} held events</strong>: ${what}${dropped}
  </p>`;
}

/** "failing" / "disabled" and why, with the time the failures began (the dispatcher keeps the state) */
function webhookHealthNotice(h: WebhookHealthView): SafeHtml | string {
  if (h.state === 'disabled') {
    return html`<p class="alert" data-testid="webhook-health" data-state="disabled">
        <strong>Disabled</strong>: every delivery since ${formatTime(h.failingSince)} failed (${h.consecutiveFailures}
        in a row), so live deliveries stopped on ${formatTime(h.disabledAt)}. New events are held (for a few days, up to
        a bounded number) and hits are listed under Hit history. Fix the endpoint, then use <em>Test webhook</em> (a
        successful test enables it) or <em>Enable webhook</em>.
      </p>
      ${heldNotice(h)}`;
  }
  if (h.state === 'failing') {
    return html`<p class="alert" data-testid="webhook-health" data-state="failing">
      <strong>Failing</strong>: the last ${h.consecutiveFailures} deliveries failed, since
      ${formatTime(h.failingSince)}. See the delivery log for the answers. After 3 days of only failures live deliveries
      are held until it is enabled again.
    </p>`;
  }
  return heldNotice(h);
}

/** a select of fixed choices, with its error */
function choice(o: {
  name: string;
  label: string;
  value: string;
  options: readonly (readonly [string, string])[];
  hint: string;
  errors: FieldErrors | undefined;
}): SafeHtml {
  const id = `f-${o.name}`;
  const error = o.errors?.[o.name];
  return html`<div class="field${error ? ' has-error' : ''}">
    <label for="${id}">${o.label}</label>
    <p class="hint" id="${id}-hint">${o.hint}</p>
    <select id="${id}" name="${o.name}" aria-describedby="${id}-hint">
      ${o.options.map(([v, label]) => html`<option value="${v}" ${flag('selected', v === o.value)}>${label}</option>`)}
    </select>
    ${error ? html`<p class="field-error" id="${id}-error">${error}</p>` : ''}
  </div>`;
}

/** the webhook's delivery rules: retry schedule and ordering */
function deliveryRulesForm(ctx: PageContext, m: MonitorView, w: WebhookView, errors?: FieldErrors): SafeHtml {
  return html`<form method="post" action="/monitors/${m.id}/webhook/rules" novalidate data-testid="delivery-rules">
    ${csrfField(ctx)}
    ${choice({
      name: 'retryPolicy',
      label: 'Retries',
      value: w.retryPolicy,
      options: [
        ['none', 'None: one attempt'],
        ['standard', 'Standard: 8 more attempts over about 21 hours'],
      ],
      hint: 'Standard tries a failed delivery again after 5 s, 30 s, 2 min, 10 min, 30 min, 2 h, 6 h and 12 h, with the same webhook-id.',
      errors,
    })}
    ${choice({
      name: 'ordering',
      label: 'Order',
      value: w.ordering,
      options: [
        ['unordered', 'Unordered: events go as they come'],
        ['fifo', 'In order: the next event waits for the previous one'],
      ],
      hint: 'In order: an event goes only after the previous one was delivered or its retries ran out.',
      errors,
    })}
    <button type="submit" class="btn">Save delivery rules</button>
  </form>`;
}

function webhookSection(
  ctx: PageContext,
  m: MonitorView,
  liveWebhooks: boolean,
  errors?: FieldErrors,
  url?: string,
): SafeHtml {
  const w = m.webhook;
  return html`<section class="card" aria-labelledby="wh-h">
    <h2 id="wh-h">Webhook</h2>
    ${
      w
        ? html`<p>
              <span class="badge kind">${w.label}</span>
              <code class="wrap" data-testid="webhook-url">${w.shownUrl}</code>
            </p>
            ${w.isBroken ? html`<p class="alert">Deliveries are paused for this URL: ${w.brokenReason ?? 'it failed'}. Save the URL again to retry.</p>` : ''}
            ${webhookHealthNotice(w.health)}
            <p class="muted">
              Signing secret last set ${formatTime(w.secretRotatedAt ?? w.createdAt)}. It is shown only when it is made.
            </p>
            ${
              w.previousSecretUntil
                ? html`<p class="notice" data-testid="rotation">
                    Rotation in progress: until ${formatTime(w.previousSecretUntil)} X-Service-Signature uses the old
                    secret and webhook-signature carries both.
                  </p>`
                : ''
            }`
        : html`<p>No webhook yet. Hits are still recorded and listed under Hit history.</p>`
    }
    ${
      liveWebhooks
        ? ''
        : html`<p class="notice" data-testid="free-rule">
            On the Free plan hits are recorded but <strong>not delivered live</strong>; you can save a URL and send test
            pings. <a href="/plan">Start the Starter trial</a> for live delivery.
          </p>`
    }
    <form method="post" action="/monitors/${m.id}/webhook" novalidate>
      ${csrfField(ctx)} ${formError(errors)}
      ${field({ name: 'webhookUrl', label: w ? 'Replace the URL' : 'Webhook URL', type: 'url', value: url ?? '', required: true, hint: 'HTTPS on a public address. Saving makes a new signing secret.', errors })}
      <button type="submit" class="btn">Save URL</button>
    </form>
    ${w ? deliveryRulesForm(ctx, m, w, errors) : ''}
    ${
      w
        ? html`<div class="actions">
              ${postButton(ctx, { action: `/monitors/${m.id}/webhook/test`, label: 'Test webhook' })}
              ${
                w.health.state === 'disabled'
                  ? postButton(ctx, { action: `/monitors/${m.id}/webhook/enable`, label: 'Enable webhook' })
                  : ''
              }
              ${postButton(ctx, { action: `/monitors/${m.id}/webhook/rotate`, label: 'Rotate secret' })}
              ${postButton(ctx, {
                action: `/monitors/${m.id}/webhook/rotate`,
                label: 'Rotate now',
                class: 'btn danger',
                confirm: 'Rotate the signing secret now? The old one stops working at once.',
                hidden: { now: '1' },
              })}
              ${
                w.previousSecretUntil
                  ? postButton(ctx, {
                      action: `/monitors/${m.id}/webhook/use-new-secret`,
                      label: 'Use the new secret now',
                    })
                  : ''
              }
              ${postButton(ctx, {
                action: `/monitors/${m.id}/webhook/delete`,
                label: 'Remove webhook',
                class: 'btn danger',
                confirm: 'Remove the webhook? Hits are still recorded.',
              })}
            </div>
            <details>
              <summary>Verify the signature (Node, packages/signing)</summary>
              <pre><code>${VERIFY_SNIPPET}</code></pre>
              <p class="muted">
                The signature is HMAC-SHA256 over <code>{X-Service-Timestamp}.{raw body}</code> with the whole secret as
                key, sent as <code>X-Service-Signature: sha256=…</code>. Reject timestamps older than 5 minutes. Every
                delivery also carries Standard Webhooks headers (<code>webhook-id</code>,
                <code>webhook-timestamp</code>, <code>webhook-signature</code>): verify them with a
                <code>standardwebhooks</code> library and the Standard Webhooks form of the secret, shown with it.
              </p>
            </details>`
        : ''
    }
  </section>`;
}

export function monitorPage(
  ctx: PageContext,
  m: MonitorView,
  liveWebhooks: boolean,
  webhookForm: { url?: string; errors?: FieldErrors } = {},
  payloads?: PayloadPreview,
  coverage?: { record: MonitorCoverage; now: Date },
): string {
  return layout(
    ctx,
    watched(m),
    html`<nav class="subnav" aria-label="Monitor">
        <a href="/monitors/${m.id}" aria-current="page">Settings</a>
        <a href="/monitors/${m.id}/deliveries">Delivery log</a>
        <a href="/monitors/${m.id}/hits">Hit history</a>
      </nav>
      <section class="card" aria-labelledby="mon-h">
        <h2 id="mon-h">Monitor</h2>
        <dl class="facts">
          <dt>${m.query !== null ? 'Query' : 'Account'}</dt>
          <dd data-testid="watched">
            ${m.query !== null ? html`<code>${m.query}</code>` : `@${m.targetUsername ?? ''}`}${targetStatusBadge(m)}
          </dd>
          <dt>Status</dt>
          <dd>${status(m)}</dd>
          <dt>Keywords</dt>
          <dd>${keywords(m)}</dd>
          <dt>Rules</dt>
          <dd>${rulesText(m)}</dd>
          <dt>Sends</dt>
          <dd data-testid="events-sent">${eventsText(m)}</dd>
          <dt>Checked every</dt>
          <dd>${formatInterval(m.intervalSec)}</dd>
          <dt>Last check</dt>
          <dd>${formatTime(m.lastCheckAt)}</dd>
          <dt>Last error</dt>
          <dd>${m.lastError ?? '—'}</dd>
          <dt>Hits</dt>
          <dd>${m.hitCount}</dd>
        </dl>
        ${targetStatusNotice(m)}
        <div class="actions">
          <a class="btn" href="/monitors/${m.id}/edit">Edit</a>
          ${postButton(ctx, {
            action: `/monitors/${m.id}/${m.status === 'active' ? 'pause' : 'resume'}`,
            label: m.status === 'active' ? 'Pause' : 'Resume',
          })}
          ${postButton(ctx, {
            action: `/monitors/${m.id}/delete`,
            label: 'Delete',
            class: 'btn danger',
            confirm: `Delete the monitor of ${watched(m)}, its webhook, hits and delivery log?`,
          })}
        </div>
      </section>
      ${coverage ? coverageSection(coverage.record, coverage.now) : ''}
      ${webhookSection(ctx, m, liveWebhooks, webhookForm.errors, webhookForm.url)}
      ${payloads ? payloadSection(payloads) : ''}`,
  );
}

const FORMATS = [
  ['native', 'Native (your endpoint)'],
  ['discord', 'Discord'],
  ['slack', 'Slack'],
] as const;

/** The exact body each format would receive for a sample hit (built by the dispatcher's own builders). */
function payloadSection(p: PayloadPreview): SafeHtml {
  const what =
    p.sample === 'latest-hit'
      ? `this monitor's latest hit (post ${p.payload.tweet.id})`
      : 'an example post by the target (no hit yet)';
  return html`<section class="card" aria-labelledby="payload-h">
    <h2 id="payload-h">Payload preview</h2>
    <p class="muted">
      The exact body each format would receive for ${what}, byte for byte as the dispatcher sends it (compact JSON).
      Headers and signature are added per delivery.
    </p>
    ${FORMATS.map(
      ([kind, label]) =>
        html`<h3 id="payload-${kind}">${label}${p.kind === kind ? ' · this webhook' : ''}</h3>
          <pre
            class="body"
            data-payload="${kind}"
            tabindex="0"
            aria-labelledby="payload-${kind}"
          ><code>${p.bodies[kind]}</code></pre>`,
    )}
  </section>`;
}
