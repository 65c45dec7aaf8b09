import type { DeliveryView, HitView, MonitorView, Page } from '@sts/usecases';
import { formatTime } from '../domain/format';
import { html, type SafeHtml } from './html';
import { csrfField, layout, type PageContext } from './layout';
import { recoverForm, type RecoverFormState } from './recover';

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
  return html`<span class="badge ${d.outcome}">${label}</span>`;
}

/** The table rows only: the live refresh fetches this fragment and swaps it in. */
export function deliveryRows(ctx: PageContext, page: Page<DeliveryView>): SafeHtml {
  if (page.items.length === 0)
    return html`<p class="empty">No deliveries yet. Use Test webhook on the settings tab to send one.</p>`;
  return html`<div class="table-wrap">
    <table class="log stack">
      <thead>
        <tr>
          <th scope="col">Time</th>
          <th scope="col">Event</th>
          <th scope="col">Delivery id</th>
          <th scope="col">Status</th>
          <th scope="col">Latency</th>
          <th scope="col">Error / response</th>
          <th scope="col"><span class="sr-only">Actions</span></th>
        </tr>
      </thead>
      <tbody>
        ${page.items.map(
          (d) =>
            html`<tr data-delivery="${d.deliveryId}">
              <td data-label="Time">${formatTime(d.createdAt)}</td>
              <td data-label="Event"><code>${d.event}</code></td>
              <td data-label="Delivery id"><code class="wrap">${d.deliveryId}</code></td>
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
                <form method="post" action="/deliveries/${d.id}/redeliver">
                  ${csrfField(ctx)}<button type="submit" class="btn small">
                    Redeliver<span class="sr-only"> ${d.deliveryId}</span>
                  </button>
                </form>
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
      <thead>
        <tr>
          <th scope="col">Detected</th>
          <th scope="col">Author</th>
          <th scope="col">Post</th>
          <th scope="col">Posted</th>
        </tr>
      </thead>
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
  const title = kind === 'deliveries' ? `Delivery log · @${m.targetUsername}` : `Hit history · @${m.targetUsername}`;
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
