/** The monitor page's Coverage section: covered-until, how the watched account reaches it (pushed or polled), the gaps of the last 30 days as a timeline and a table, the latency figures. */
import type { CoverageGap, MonitorCoverage } from '@sts/usecases';
import { formatLatency, gapSpan, TIMELINE_DAYS } from '../domain/coverage';
import { formatTime } from '../domain/format';
import { html, type SafeHtml } from './html';
import { tableHead } from './table';

const REASONS: Record<CoverageGap['reason'], string> = {
  stream_down: 'Stream down',
  budget_refused: 'Read budget refused',
  source_error: 'Source error',
};

function gapState(g: CoverageGap): string {
  if (g.filledAt) return `filled ${formatTime(g.filledAt)}`;
  return g.to ? 'not filled yet' : 'still open';
}

/** decorative bars (aria-hidden): the table below says the same for screen readers */
function timeline(gaps: CoverageGap[], now: Date): SafeHtml {
  const spans = gaps.flatMap((g) => {
    const s = gapSpan(g, now);
    return s ? [{ g, s }] : [];
  });
  return html`<figure class="timeline">
    <svg viewBox="0 0 1000 24" preserveAspectRatio="none" aria-hidden="true" focusable="false">
      <rect class="timeline-covered" x="0" y="0" width="1000" height="24"></rect>
      ${spans.map(
        ({ g, s }) =>
          html`<rect
            class="${s.filled ? 'timeline-filled' : 'timeline-gap'}"
            x="${s.x}"
            y="0"
            width="${s.width}"
            height="24"
          >
            <title>${REASONS[g.reason]}, ${formatTime(g.from)} – ${g.to ? formatTime(g.to) : 'now'}</title>
          </rect>`,
      )}
    </svg>
    <figcaption class="muted">
      <span>${formatTime(new Date(now.getTime() - TIMELINE_DAYS * 86_400_000))}</span>
      <span
        >${spans.length} gap${spans.length === 1 ? '' : 's'} in the last ${TIMELINE_DAYS} days (red: not filled, amber:
        filled by a backfill)</span
      >
      <span>now</span>
    </figcaption>
  </figure>`;
}

function gapTable(gaps: CoverageGap[]): SafeHtml {
  if (gaps.length === 0) return html`<p data-testid="coverage-no-gaps">No gaps in the last ${TIMELINE_DAYS} days.</p>`;
  return html`<div class="table-wrap">
    <table class="stack" data-testid="coverage-gaps">
      <caption class="sr-only">
        Gaps of the last ${TIMELINE_DAYS} days, newest first
      </caption>
      ${tableHead(['From', 'To', 'Reason', 'Filled'])}
      <tbody>
        ${gaps.map(
          (g) =>
            html`<tr data-reason="${g.reason}">
              <td data-label="From">${formatTime(g.from)}</td>
              <td data-label="To">${g.to ? formatTime(g.to) : 'still open'}</td>
              <td data-label="Reason">${REASONS[g.reason]}</td>
              <td data-label="Filled">${gapState(g)}</td>
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}

function latencyTable(l: MonitorCoverage['latency']): SafeHtml {
  const rows = [
    ['Post → detected', 'detected', l.last24h.detected, l.last7d.detected],
    ['Detected → delivered', 'delivered', l.last24h.delivered, l.last7d.delivered],
  ] as const;
  return html`<div class="table-wrap">
    <table class="stack" data-testid="coverage-latency">
      <caption class="sr-only">
        Latency percentiles
      </caption>
      ${tableHead(['Measure', 'p50 (24 h)', 'p95 (24 h)', 'p50 (7 days)', 'p95 (7 days)', 'Samples (7 days)'])}
      <tbody>
        ${rows.map(
          ([label, key, day, week]) =>
            html`<tr data-latency="${key}">
              <th scope="row">${label}</th>
              <td data-label="p50 (24 h)">${formatLatency(day.p50Ms)}</td>
              <td data-label="p95 (24 h)">${formatLatency(day.p95Ms)}</td>
              <td data-label="p50 (7 days)">${formatLatency(week.p50Ms)}</td>
              <td data-label="p95 (7 days)">${formatLatency(week.p95Ms)}</td>
              <td data-label="Samples (7 days)">${week.count}</td>
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}

/** what each pushed X Activity API event type brings, in the monitor's words */
function pushedKinds(types: readonly string[]): string {
  const kinds = [
    types.some((t) => t.startsWith('profile.update.')) && 'profile changes',
    types.includes('post.delete') && 'deleted posts',
    types.includes('post.create') && 'posts',
  ].filter((k): k is string => typeof k === 'string');
  return kinds.join(', ');
}

/** a username monitor's account: pushed by the X Activity API (what, confirmed when) or polled; nothing for a query monitor */
function intakeLine(i: MonitorCoverage['intake']): SafeHtml | null {
  if (!i) return null;
  if (i.path === 'polled')
    return html`<p data-testid="coverage-intake" data-path="polled">
      Account: <strong>polled</strong>
      <span class="muted">(its profile is looked up at the plan's interval)</span>
    </p>`;
  return html`<p data-testid="coverage-intake" data-path="pushed" title="${i.eventTypes.join(', ')}">
    Account: <strong>pushed by the X Activity API</strong> for ${pushedKinds(i.eventTypes)}
    <span class="muted">(within seconds; confirmed ${i.confirmedAt ? formatTime(i.confirmedAt) : '—'})</span>
  </p>`;
}

export function coverageSection(c: MonitorCoverage, now: Date): SafeHtml {
  return html`<section class="card" aria-labelledby="cov-h" data-testid="coverage">
    <h2 id="cov-h">Coverage</h2>
    <p data-testid="covered-until">
      Covered until: <strong>${c.coveredUntil ? formatTime(c.coveredUntil) : 'not read yet'}</strong>
      <span class="muted">(every post of the target up to this time has been seen)</span>
    </p>
    ${intakeLine(c.intake)} ${timeline(c.gaps, now)} ${gapTable(c.gaps)}
    <h3>Speed</h3>
    ${latencyTable(c.latency)}
  </section>`;
}
