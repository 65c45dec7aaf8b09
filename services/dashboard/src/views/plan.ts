import type { Overview, PlanFacts } from '@sts/usecases';
import { formatDay, formatInterval, formatNumber } from '../domain/format';
import { html, type SafeHtml } from './html';
import { layout, postButton, type PageContext } from './layout';

function column(name: string, f: PlanFacts, current: boolean, extra: SafeHtml | string): SafeHtml {
  return html`<section class="card plan${current ? ' current' : ''}" aria-labelledby="plan-${f.name}">
    <h2 id="plan-${f.name}">${name}${current ? html` <span class="badge active">your plan</span>` : ''}</h2>
    <ul>
      <li>${formatNumber(f.monthlyQuota)} API calls a month</li>
      <li>${formatNumber(f.perMinute)} calls a minute</li>
      <li>
        ${f.maxMonitors} monitor${f.maxMonitors === 1 ? '' : 's'}, checked every ${formatInterval(f.pollIntervalSec)}
      </li>
      <li>
        ${f.liveWebhooks ? 'Live webhook delivery of every hit' : 'Webhook test pings only; hits are not delivered live'}
      </li>
      <li>Hit history of ${formatNumber(f.hitsDays)} days, delivery log of ${formatNumber(f.deliveryLogDays)} days</li>
    </ul>
    ${extra}
  </section>`;
}

export function planPage(ctx: PageContext, o: Overview, facts: { free: PlanFacts; starter: PlanFacts }): string {
  const onStarter = o.account.effectivePlan === 'starter';
  let trial: SafeHtml;
  if (o.trial.offered) {
    trial = postButton(ctx, {
      action: '/plan/trial',
      label: `Start the ${o.trial.days}-day Starter trial`,
      class: 'btn primary',
    });
  } else if (o.trial.state === 'active') {
    trial = html`<p>Trial active until <strong>${formatDay(o.trial.endsAt)}</strong>.</p>`;
  } else if (o.trial.state === 'ended') {
    trial = html`<p>Your trial ended on ${formatDay(o.trial.endsAt)}; the trial is once per account.</p>`;
  } else {
    trial = html``;
  }
  return layout(
    ctx,
    'Plan',
    html`<div class="grid two">
        ${column('Free', facts.free, !onStarter, '')} ${column('Starter', facts.starter, onStarter, trial)}
      </div>
      <p class="muted">
        No card is taken or charged in this version: the trial simply switches the account to Starter for
        ${o.trial.days} days, once per account. Paid upgrades are not sold here yet.
      </p>`,
  );
}
