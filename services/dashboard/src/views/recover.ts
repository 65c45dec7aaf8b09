import type { MonitorView, Recovered } from '@sts/usecases';
import { html, type SafeHtml } from './html';
import { checkboxGroup, field, formError, type CheckBox, type FieldErrors } from './forms';
import { csrfField, type PageContext } from './layout';

/** what the Recover form shows again after a refused submission */
export interface RecoverFormState {
  since?: string;
  until?: string;
  outcomes?: readonly string[];
  errors?: FieldErrors;
}

/** the hidden field that says the form carried the checkboxes (none ticked then means none, not the default) */
export const OUTCOMES_SHOWN = 'outcomesShown';

const OUTCOMES: readonly CheckBox[] = [
  { value: 'failed', label: 'Failed', hint: 'the endpoint answered with an error or did not answer' },
  {
    value: 'skipped',
    label: 'Skipped',
    hint: 'not sent: the plan, a broken or disabled endpoint, or dropped from a full hold',
  },
  { value: 'exhausted', label: 'Retries exhausted', hint: 'a retry schedule that ran out' },
];

/** "Redeliver what failed, was skipped or exhausted its retries between T and U" on the monitor's delivery log. */
export function recoverForm(ctx: PageContext, m: MonitorView, state: RecoverFormState = {}): SafeHtml {
  return html`<section class="card" aria-labelledby="recover-title">
    <h2 id="recover-title">Recover deliveries</h2>
    <form method="post" action="/monitors/${m.id}/deliveries/recover" novalidate>
      ${csrfField(ctx)}${formError(state.errors)}
      ${field({
        name: 'since',
        label: 'From (UTC)',
        type: 'datetime-local',
        value: state.since ?? '',
        hint: 'Every delivery with one of the outcomes below in this window, and not delivered since, is sent again with its original delivery id, oldest first: at most 1,000 at a time and within the account’s redelivery budget.',
        required: true,
        errors: state.errors,
      })}
      ${field({
        name: 'until',
        label: 'Until (UTC, optional)',
        type: 'datetime-local',
        value: state.until ?? '',
        hint: 'Empty: up to now.',
        errors: state.errors,
      })}
      ${checkboxGroup({
        name: 'outcomes',
        legend: 'Outcomes to redeliver',
        testId: 'recover-outcomes',
        shown: OUTCOMES_SHOWN,
        boxes: OUTCOMES,
        checked: state.outcomes ?? OUTCOMES.map((o) => o.value),
        errors: state.errors,
      })}
      <button type="submit" class="btn">Redeliver these deliveries</button>
    </form>
  </section>`;
}

/** the notice after a recovery: how many were queued, and how many are left for another click (and when) */
export function recoverNotice(r: Pick<Recovered, 'queued' | 'remaining' | 'retryAfterSec'>): string {
  if (r.queued === 0) return 'No deliveries to recover in that window: nothing queued.';
  const queued = `${r.queued} ${r.queued === 1 ? 'delivery' : 'deliveries'} queued for redelivery.`;
  if (r.remaining === 0) return queued;
  return r.retryAfterSec !== null
    ? `${queued} ${r.remaining} more did not fit in the account’s redelivery budget: submit again in ${r.retryAfterSec} s.`
    : `${queued} ${r.remaining} more: submit again to queue them.`;
}
