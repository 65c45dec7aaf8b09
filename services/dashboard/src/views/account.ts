/** The account page: the address and its verification, password change, notifications, sign out everywhere. */
import type { AccountView } from '@sts/usecases';
import { field, formError, type FieldErrors } from './forms';
import { flag, html } from './html';
import { csrfField, layout, type PageContext } from './layout';

export function accountPage(ctx: PageContext, account: AccountView, errors?: FieldErrors): string {
  const n = account.notifications;
  const box = (name: string, on: boolean, label: string) =>
    html`<p class="check">
      <input type="checkbox" id="notify-${name}" name="${name}" value="on" ${flag('checked', on)} />
      <label for="notify-${name}">${label}</label>
    </p>`;
  return layout(
    ctx,
    'Account',
    html`<section class="card" aria-labelledby="addr-h">
        <h2 id="addr-h">Email address</h2>
        <p>
          ${account.email} —
          ${account.emailVerifiedAt ? html`<strong>verified</strong>` : html`<strong>not verified yet</strong>`}
        </p>
      </section>
      <section class="card" aria-labelledby="pw-h">
        <h2 id="pw-h">Change password</h2>
        <form method="post" action="/account/password" novalidate>
          ${csrfField(ctx)} ${formError(errors)}
          ${field({
            name: 'currentPassword',
            label: 'Current password',
            type: 'password',
            required: true,
            autocomplete: 'current-password',
            errors,
          })}
          ${field({
            name: 'newPassword',
            label: 'New password',
            type: 'password',
            required: true,
            autocomplete: 'new-password',
            hint: 'At least 10 characters. Your other sessions are signed out.',
            errors,
          })}
          <button type="submit" class="btn primary">Change password</button>
        </form>
      </section>
      <section class="card" aria-labelledby="notify-h">
        <h2 id="notify-h">Email notifications</h2>
        <form method="post" action="/account/notifications">
          ${csrfField(ctx)}
          <fieldset>
            <legend>Email me when</legend>
            ${box('quota', n.quota, 'this month’s API calls reach 80 % and 100 % of the quota')}
            ${box('webhook', n.webhook, 'a monitor’s webhook fails 5 times in a row or is marked broken (at most daily)')}
            ${box('trial', n.trial, 'the Starter trial ends in 3 days, and when it has ended')}
          </fieldset>
          <button type="submit" class="btn">Save notifications</button>
        </form>
      </section>
      <section class="card" aria-labelledby="sess-h">
        <h2 id="sess-h">Sessions</h2>
        <form method="post" action="/account/signout-everywhere">
          ${csrfField(ctx)}
          <p>Signs out every browser signed in to this account, this one included.</p>
          <button type="submit" class="btn">Sign out everywhere</button>
        </form>
      </section>`,
  );
}
