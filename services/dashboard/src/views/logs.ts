import type { DeliveryDetail, DeliveryView, HeaderPair, HitView, MonitorView, Page } from '@sts/usecases';
import { formatTime } from '../domain/format';
import { html, type SafeHtml } from './html';
import { layout, postButton, type PageContext } from './layout';
import { recoverForm, type RecoverFormState } from './recover';
import { ACTIONS_COLUMN, tableHead } from './table';
import { watched } from './monitors';

function subnav(m: MonitorView, current: 'deliveries' | 'hits'): SafeHtml {
  const cur = (k: string) => (k === current ? html` aria-current="page"` : '');
  return html`<nav class="subnav" aria-label="Monitor">
    <a href="/monitors/${m.id}">Settings</a>
    <a href="/monitors/${m.id}/deliveries" ${cur('deliveries')}>Delivery log</a>
    <a href="/monitors/${m.id}/hits" ${cur('hits')}>Hit history</a>
  </nav>`;
}

function pager(base: string, page: Page<unknown>, paged: boolean): SafeHtml {
  return html`<nav class="pager" aria-label="Pages">
    ${paged ? html`<a href="${base}">Newest</a>` : ''}
    ${page.nextCursor ? html`<a href="${base}?cursor=${encodeURIComponent(page.nextCursor)}" rel="next">Older</a>` : ''}
  </nav>`;
}

function outcome(d: DeliveryView): SafeHtml {
  const label = d.statusCode !== null ? String(d.statusCode) : d.outcome === 'skipped' ? 'skipped' : 'no answer';
  const badge = d.outcome === 'exhausted' ? 'failed' : d.outcome;
  return html`<span class="badge ${badge}">${label}</span>${retryNote(d)}`;
}

/** a retried delivery's attempt number, when its next attempt is due, or the end of its schedule */
function retryNote(d: DeliveryView): SafeHtml | string {
  const parts = [
    d.attempt !== null && d.attempt > 1 ? `attempt ${d.attempt}` : '',
    d.nextAttemptAt ? `next attempt ${formatTime(d.nextAttemptAt)}` : '',
    d.held ? 'next attempt held until the webhook is enabled' : '',
    d.outcome === 'exhausted' ? 'retries exhausted' : '',
  ].filter(Boolean);
  return parts.length ? html` <span class="muted" data-testid="retry-note">${parts.join(' · ')}</span>` : '';
}

/** The table rows only: the live refresh fetches this fragment and swaps it in. */
export function deliveryRows(ctx: PageContext, page: Page<DeliveryView>): SafeHtml {
  if (page.items.length === 0)
    return html`<p class="empty">No deliveries yet. Use Test webhook on the settings tab to send one.</p>`;
  return html`<div class="table-wrap">
    <table class="log stack">
      ${tableHead(['Time', 'Event', 'Delivery id', 'Status', 'Latency', 'Error / response', ACTIONS_COLUMN])}
      <tbody>
        ${page.items.map(
          (d) =>
            html`<tr data-delivery="${d.deliveryId}">
              <td data-label="Time">${formatTime(d.createdAt)}</td>
              <td data-label="Event"><code>${d.event}</code></td>
              <td data-label="Delivery id">
                <a href="/deliveries/${d.id}" class="wrap"
                  ><code>${d.deliveryId}</code><span class="sr-only"> attempt details</span></a
                >
              </td>
              <td data-label="Status">${outcome(d)}</td>
              <td data-label="Latency">${d.latencyMs !== null ? `${d.latencyMs} ms` : '—'}</td>
              <td data-label="Error / response" class="wrap">
                <div>
                  ${d.error ? html`<span class="error-text">${d.error}</span>` : ''}${
                    d.responseSnippet ? html`<code class="snippet">${d.responseSnippet}</code>` : d.error ? '' : '—'
                  }
                </div>
              </td>
              <td data-label="">
                ${postButton(ctx, {
                  action: `/deliveries/${d.id}/redeliver`,
                  label: html`Redeliver<span class="sr-only"> ${d.deliveryId}</span>`,
                  class: 'btn small',
                })}
              </td>
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}

export function hitRows(page: Page<HitView>): SafeHtml {
  if (page.items.length === 0)
    return html`<p class="empty">No hits yet. New posts of the target that match the keywords show up here.</p>`;
  return html`<div class="table-wrap">
    <table class="log stack">
      ${tableHead(['Detected', 'Author', 'Post', 'Posted'])}
      <tbody>
        ${page.items.map(
          (h) =>
            html`<tr data-hit="${h.tweetId}">
              <td data-label="Detected">${formatTime(h.detectedAt)}</td>
              <td data-label="Author">@${h.authorUsername}</td>
              <td data-label="Post" class="wrap"><a href="${h.postUrl}" rel="noopener noreferrer">${h.text}</a></td>
              <td data-label="Posted">${formatTime(h.tweetCreatedAt)}</td>
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}

function logPage(
  ctx: PageContext,
  m: MonitorView,
  kind: 'deliveries' | 'hits',
  rows: SafeHtml,
  page: Page<unknown>,
  paged: boolean,
  liveMs: number,
  extra: SafeHtml | '' = '',
): string {
  const base = `/monitors/${m.id}/${kind}`;
  const title = kind === 'deliveries' ? `Delivery log · ${watched(m)}` : `Hit history · ${watched(m)}`;
  return layout(
    ctx,
    title,
    html`${subnav(m, kind)}
      <section class="card">
        <p class="muted">
          Newest
          first.${paged ? ' Older page; not refreshed.' : html` <span data-live-status>Refreshes while this page is open.</span>`}
        </p>
        <div id="live" aria-live="polite" ${paged ? '' : html` data-live-src="${base}?fragment=1"`}>${rows}</div>
        ${pager(base, page, paged)}
      </section>
      ${extra}`,
    { liveMs: paged ? undefined : liveMs },
  );
}

export function deliveriesPage(
  ctx: PageContext,
  m: MonitorView,
  page: Page<DeliveryView>,
  paged: boolean,
  liveMs: number,
  recover: RecoverFormState = {},
): string {
  return logPage(ctx, m, 'deliveries', deliveryRows(ctx, page), page, paged, liveMs, recoverForm(ctx, m, recover));
}

export function hitsPage(
  ctx: PageContext,
  m: MonitorView,
  page: Page<HitView>,
  paged: boolean,
  liveMs: number,
): string {
  return logPage(ctx, m, 'hits', hitRows(page), page, paged, liveMs);
}

function headerTable(caption: string, part: string, pairs: HeaderPair[]): SafeHtml {
  if (pairs.length === 0) return html`<p class="muted">${caption}: none.</p>`;
  return html`<div class="table-wrap">
    <table class="headers" data-part="${part}">
      <caption>
        ${caption}
      </caption>
      ${tableHead(['Name', 'Value'])}
      <tbody>
        ${pairs.map(
          ([n, v]) =>
            html`<tr>
              <td><code>${n}</code></td>
              <td><code class="wrap">${v}</code></td>
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}

/**
 * The response body as text when it is UTF-8 (as received), else base64 saying so. A character
 * the 4 KiB cut split is left out (stream decoding holds its first bytes back) and said so.
 */
function responseBody(body: Buffer): SafeHtml {
  if (body.length === 0) return html`<p class="muted">Empty body.</p>`;
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(body, { stream: true });
    const split = Buffer.byteLength(text) < body.length;
    return html`<pre
        class="body"
        data-part="response-body"
        tabindex="0"
        aria-label="Response body"
      ><code>${text}</code></pre>
      ${split ? html`<p class="muted">The 4 KiB cut split the last character; its first bytes are not shown.</p>` : ''}`;
  } catch {
    return html`<p class="muted">Not UTF-8 text; shown as base64.</p>
      <pre
        class="body"
        data-part="response-body-base64"
        tabindex="0"
        aria-label="Response body, base64"
      ><code>${body.toString('base64')}</code></pre>`;
  }
}

/** Attempt detail: the request as sent (URL, headers, exact body) and the response (status, headers, first 4 KiB). */
export function attemptPage(ctx: PageContext, m: MonitorView, d: DeliveryDetail): string {
  const req = d.request;
  const res = d.response;
  return layout(
    ctx,
    `Delivery attempt · ${watched(m)}`,
    html`${subnav(m, 'deliveries')}
      <section class="card" aria-labelledby="sent">
        <h2 id="sent">Request as sent</h2>
        <p>
          ${formatTime(d.createdAt)} · <code>${d.event}</code> · delivery <code class="wrap">${d.deliveryId}</code> ·
          ${outcome(d)}${d.latencyMs !== null ? ` · ${d.latencyMs} ms` : ''}
        </p>
        ${d.error ? html`<p class="error-text">${d.error}</p>` : ''}
        ${
          req
            ? html`<p>POST <code class="wrap" data-part="url">${req.url}</code></p>
                ${headerTable('Request headers', 'request-headers', req.headers)}
                <h3>Body</h3>
                <pre
                  class="body"
                  data-part="request-body"
                  tabindex="0"
                  aria-label="Request body"
                ><code>${req.body}</code></pre>`
            : html`<p class="muted">Nothing was sent${d.outcome === 'skipped' ? ' (skipped)' : ''}.</p>`
        }
      </section>
      <section class="card" aria-labelledby="answer">
        <h2 id="answer">Response</h2>
        ${
          res
            ? html`<p>Status <strong data-part="status">${String(res.status)}</strong></p>
                ${headerTable('Response headers', 'response-headers', res.headers)}
                <h3>Body (first 4 KiB)</h3>
                ${responseBody(res.body)}`
            : html`<p class="muted">No answer.</p>`
        }
        ${postButton(ctx, { action: `/deliveries/${d.id}/redeliver`, label: 'Redeliver' })}
      </section>`,
  );
}
