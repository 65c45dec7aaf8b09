import type { MonitorView } from '@sts/usecases';
import { html, type SafeHtml } from './html';
import { field, formError, type FieldErrors } from './forms';
import { csrfField, type PageContext } from './layout';

/** what the Recover form shows again after a refused submission */
export interface RecoverFormState {
  failedSince?: string;
  errors?: FieldErrors;
}

/** "Redeliver every failed delivery since T" on the monitor's delivery log. */
export function recoverForm(ctx: PageContext, m: MonitorView, state: RecoverFormState = {}): SafeHtml {
  return html`<section class="card" aria-labelledby="recover-title">
    <h2 id="recover-title">Recover failed deliveries</h2>
    <form method="post" action="/monitors/${m.id}/deliveries/recover" novalidate>
      ${csrfField(ctx)}${formError(state.errors)}
      ${field({
        name: 'failedSince',
        label: 'Failed since (UTC)',
        type: 'datetime-local',
        value: state.failedSince ?? '',
        hint: 'Every hit delivery that failed since then and has not been delivered since is sent again with its original delivery id, at most 1,000 at a time.',
        required: true,
        errors: state.errors,
      })}
      <button type="submit" class="btn">Redeliver every failed delivery since then</button>
    </form>
  </section>`;
}

/** the notice after a recovery: how many were queued, and how many are left for another click */
export function recoverNotice(r: { queued: number; remaining: number }): string {
  if (r.queued === 0) return 'No failed deliveries since then: nothing queued.';
  const queued = `${r.queued} ${r.queued === 1 ? 'delivery' : 'deliveries'} queued for redelivery.`;
  return r.remaining > 0 ? `${queued} ${r.remaining} more failed since then: submit again to queue them.` : queued;
}
