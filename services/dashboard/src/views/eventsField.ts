/** The monitor form's "what it sends" checkboxes: new posts and, for a username monitor, profile changes and deleted posts. */
import type { MonitorEventKind } from '@sts/usecases';
import { checkboxGroup, type CheckBox, type FieldErrors } from './forms';
import type { SafeHtml } from './html';

/** the hidden field that says the form carried the checkboxes (none ticked then means none, not "unchanged") */
export const EVENTS_SHOWN = 'eventsShown';

const BOXES: readonly (CheckBox & { value: MonitorEventKind })[] = [
  { value: 'posts', label: 'New posts', hint: 'monitor.hit: each post that matches.' },
  {
    value: 'profile',
    label: 'Profile changes',
    hint: 'monitor.profile_changed: the name, bio, avatar, verified badge or username changed. Username monitors only (a query watches no account).',
  },
  {
    value: 'deletes',
    label: 'Deleted posts',
    hint: 'monitor.post_deleted: the account deleted a post (with the hit sent for it, if any). Username monitors only.',
  },
];

/**
 * The checkboxes, ticked as `checked` says; `withProfile` false (a query monitor's edit) shows new
 * posts only. A refusal of the use-case (field `events`) is shown inside the group.
 */
export function eventsField(checked: readonly string[], withProfile: boolean, errors?: FieldErrors): SafeHtml {
  return checkboxGroup({
    name: 'events',
    legend: 'Events to send',
    testId: 'events',
    shown: EVENTS_SHOWN,
    // a query monitor watches no account: no profile, no deletions of its own
    boxes: BOXES.filter((b) => withProfile || b.value === 'posts'),
    checked,
    errors,
  });
}
