/** The monitor form's "what it sends" checkboxes: new posts and, for a username monitor, profile changes and deleted posts. */
import type { MonitorEventKind } from '@sts/usecases';
import type { FieldErrors } from './forms';
import { flag, html, type SafeHtml } from './html';

/** the hidden field that says the form carried the checkboxes (none ticked then means none, not "unchanged") */
export const EVENTS_SHOWN = 'eventsShown';

const BOXES: readonly { kind: MonitorEventKind; label: string; hint: string }[] = [
  { kind: 'posts', label: 'New posts', hint: 'monitor.hit: each post that matches.' },
  {
    kind: 'profile',
    label: 'Profile changes',
    hint: 'monitor.profile_changed: the name, bio, avatar, verified badge or username changed. Username monitors only (a query watches no account).',
  },
  {
    kind: 'deletes',
    label: 'Deleted posts',
    hint: 'monitor.post_deleted: the account deleted a post (with the hit sent for it, if any). Username monitors only.',
  },
];

/**
 * The checkboxes, ticked as `checked` says; `withProfile` false (a query monitor's edit) shows new
 * posts only. A refusal of the use-case (field `events`) is shown inside the group.
 */
export function eventsField(checked: readonly string[], withProfile: boolean, errors?: FieldErrors): SafeHtml {
  const error = errors?.events;
  // a query monitor watches no account: no profile, no deletions of its own
  const boxes = BOXES.filter((b) => withProfile || b.kind === 'posts');
  return html`<fieldset
    class="field${error ? ' has-error' : ''}"
    data-testid="events"
    ${error ? html`aria-describedby="f-events-error"` : ''}
  >
    <legend>Events to send</legend>
    <input type="hidden" name="${EVENTS_SHOWN}" value="1" />
    ${boxes.map(
      (b) =>
        html`<p class="check">
          <input
            type="checkbox"
            id="f-events-${b.kind}"
            name="events"
            value="${b.kind}"
            aria-describedby="f-events-${b.kind}-hint"
            ${flag('checked', checked.includes(b.kind))}
          />
          <label for="f-events-${b.kind}">${b.label}</label>
          <span class="hint" id="f-events-${b.kind}-hint">${b.hint}</span>
        </p>`,
    )}
    ${error ? html`<p class="field-error" id="f-events-error" role="alert">${error}</p>` : ''}
  </fieldset>`;
}
