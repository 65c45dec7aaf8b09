import type { Overview } from '@sts/usecases';
import { barChart } from '../domain/chart';
import { formatDay, formatNumber, formatTime, percent } from '../domain/format';
import { html, type SafeHtml } from './html';
import { layout, type PageContext } from './layout';
import { tableHead } from './table';

const PLAN_NAME = { free: 'Free', starter: 'Starter' } as const;

/** The month's calls per day, drawn on the server; the table under it is the accessible text. */
export function usageChart(daily: Overview['daily']): SafeHtml {
  const c = barChart(daily);
  const pad = { left: 44, bottom: 20, top: 8 };
  const w = c.width + pad.left;
  const h = c.height + pad.bottom + pad.top;
  const summary = `${formatNumber(c.total)} calls this month${
    c.busiest ? `; busiest day ${c.busiest.day} with ${formatNumber(c.busiest.used)}` : ''
  }.`;
  return html`<figure class="chart">
      <svg viewBox="0 0 ${w} ${h}" role="img" aria-labelledby="chart-title chart-desc">
        <title id="chart-title">API calls per day this month</title>
        <desc id="chart-desc">${summary}</desc>
        <g transform="translate(${pad.left} ${pad.top})">
          <line class="gridline" x1="0" x2="${c.width}" y1="0" y2="0"></line>
          <line class="gridline" x1="0" x2="${c.width}" y1="${c.height / 2}" y2="${c.height / 2}"></line>
          <line class="axis" x1="0" x2="${c.width}" y1="${c.height}" y2="${c.height}"></line>
          <text class="label" x="-6" y="4" text-anchor="end">${formatNumber(c.top)}</text>
          <text class="label" x="-6" y="${c.height + 4}" text-anchor="end">0</text>
          ${c.bars.map(
            (b) =>
              html`<rect
                class="bar"
                x="${b.x.toFixed(1)}"
                y="${b.y.toFixed(1)}"
                width="${b.width.toFixed(1)}"
                height="${b.height.toFixed(1)}"
                ><title>${b.day}: ${formatNumber(b.used)} calls</title></rect
              >`,
          )}
          ${c.bars
            .filter((_, i) => i === 0 || (i + 1) % 5 === 0)
            .map(
              (b) =>
                html`<text class="label" x="${(b.x + b.width / 2).toFixed(1)}" y="${c.height + 16}" text-anchor="middle"
                  >${b.day.slice(8)}</text
                >`,
            )}
        </g>
      </svg>
      <figcaption>${summary}</figcaption>
    </figure>
    <details>
      <summary>Calls per day as a table</summary>
      <table class="compact">
        <caption class="sr-only">
          API calls per day this month
        </caption>
        ${tableHead(['Day', 'Calls'])}
        <tbody>
          ${daily.map(
            (d) =>
              html`<tr>
                <td>${d.day}</td>
                <td>${formatNumber(d.used)}</td>
              </tr>`,
          )}
        </tbody>
      </table>
    </details>`;
}

/**
 * What the account has: the stored plan and since when, or the running trial with its start and
 * end. The trial is offered only where starting it changes something (a Free account that never
 * had it); a Starter account is not offered a trial of Starter.
 */
export function planStatus(o: Pick<Overview, 'account' | 'trial'>): SafeHtml {
  const { account: a, trial: t } = o;
  if (a.plan === 'starter') return html`On Starter since <strong>${formatDay(a.planSince)}</strong>.`;
  if (t.state === 'active')
    return html`Starter trial since ${formatDay(t.startedAt)}, until <strong>${formatDay(t.endsAt)}</strong>; then Free.`;
  const since = html`On Free since ${formatDay(a.planSince)}.`;
  if (t.state === 'ended') return html`${since} Your Starter trial ended on ${formatDay(t.endsAt)}.`;
  if (t.offered) return html`${since} A ${t.days}-day Starter trial is available. <a href="/plan">Start it</a>.`;
  return since;
}

export function overviewPage(ctx: PageContext, o: Overview): string {
  const u = o.usage;
  const pct = percent(u.used, u.quota);
  return layout(
    ctx,
    'Overview',
    html`<div class="grid">
        <section class="card" aria-labelledby="plan-h">
          <h2 id="plan-h">Plan</h2>
          <p class="big" data-testid="plan">${PLAN_NAME[o.account.effectivePlan]}</p>
          <p data-testid="plan-status">${planStatus(o)}</p>
          <p><a href="/plan">Compare plans</a></p>
        </section>
        <section class="card" aria-labelledby="usage-h">
          <h2 id="usage-h">This month (${u.period})</h2>
          <p class="big">
            <span data-testid="usage-used">${formatNumber(u.used)}</span>
            <span class="muted">of ${formatNumber(u.quota)} calls</span>
          </p>
          <progress
            max="${Math.max(u.quota, 1)}"
            value="${Math.min(u.used, u.quota)}"
            aria-label="Monthly quota used: ${pct}%"
          >
            ${pct}%
          </progress>
          <p>
            ${formatNumber(u.remaining)} left · at most ${formatNumber(u.perMinute)} calls per minute · resets
            ${formatTime(u.resetsAt)}
          </p>
        </section>
        <section class="card" aria-labelledby="mon-h">
          <h2 id="mon-h">Monitors</h2>
          <p class="big">${o.monitors.count} <span class="muted">of ${o.monitors.limit}</span></p>
          <p><a href="/monitors">Manage monitors</a></p>
        </section>
      </div>
      <section class="card" aria-labelledby="chart-h">
        <h2 id="chart-h">Calls per day</h2>
        ${usageChart(o.daily)}
        <p class="muted">
          Usage is written by the gateways about once a second, so this page trails the live counters by a moment.
        </p>
      </section>`,
  );
}
