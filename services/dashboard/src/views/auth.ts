import { field, formError, type FieldErrors } from './forms';
import { html, type HtmlValue, type SafeHtml } from './html';
import { csrfField, layout, type PageContext } from './layout';

/** A page of one small form: the CSRF field and the form's error first, the submit button after its fields. */
function formPage(
  ctx: PageContext,
  o: { title: string; action: string; submit: string; errors: FieldErrors | undefined },
  fields: HtmlValue,
  after: HtmlValue = '',
): string {
  return layout(
    ctx,
    o.title,
    html`<form method="post" action="${o.action}" class="card narrow" novalidate>
      ${csrfField(ctx)} ${formError(o.errors)} ${fields}
      <button type="submit" class="btn primary">${o.submit}</button>
      ${after}
    </form>`,
  );
}

function emailField(value: string | undefined, errors: FieldErrors | undefined): SafeHtml {
  return field({ name: 'email', label: 'Email', type: 'email', value, required: true, autocomplete: 'email', errors });
}

/** `autocomplete`: new-password where one is chosen, current-password where one is asked for */
function passwordField(
  o: { label: string; autocomplete: 'new-password' | 'current-password'; hint?: string },
  errors: FieldErrors | undefined,
): SafeHtml {
  return field({ name: 'password', type: 'password', required: true, ...o, errors });
}

export function signUpPage(ctx: PageContext, values: { email?: string } = {}, errors?: FieldErrors): string {
  return formPage(
    ctx,
    { title: 'Create your account', action: '/signup', submit: 'Sign up', errors },
    [
      emailField(values.email, errors),
      passwordField({ label: 'Password', autocomplete: 'new-password', hint: 'At least 10 characters.' }, errors),
    ],
    html`<p>New accounts start on the Free plan. Already have one? <a href="/signin">Sign in</a>.</p>`,
  );
}

export function signInPage(ctx: PageContext, values: { email?: string } = {}, errors?: FieldErrors): string {
  return formPage(
    ctx,
    { title: 'Sign in', action: '/signin', submit: 'Sign in', errors },
    [emailField(values.email, errors), passwordField({ label: 'Password', autocomplete: 'current-password' }, errors)],
    html`<p>No account yet? <a href="/signup">Sign up</a> — it is free. <a href="/reset">Forgot your password?</a></p>`,
  );
}

export function errorPage(ctx: PageContext, status: number, title: string, message: string): string {
  return layout(
    ctx,
    title,
    html`<div class="card">
      <p>${message}</p>
      <p class="muted">Status ${status}.</p>
      <p><a href="/">Back to the overview</a></p>
    </div>`,
  );
}

/** The answer to every sign-up, whether or not the address had an account (no enumeration). */
export function checkEmailPage(ctx: PageContext, what: 'signup' | 'reset'): string {
  return layout(
    ctx,
    'Check your email',
    html`<div class="card narrow" role="status">
      ${
        what === 'signup'
          ? html`<p>
              We sent a message to the address you entered. A new account gets a link to verify the address; if the
              address already has an account, the message says how to sign in or reset the password.
            </p>`
          : html`<p>
              If an account uses that address, we sent it a link to choose a new password. The link works once, for 30
              minutes.
            </p>`
      }
      <p><a href="/signin">Go to sign in</a></p>
    </div>`,
  );
}

export function resetRequestPage(ctx: PageContext, errors?: FieldErrors): string {
  return formPage(
    ctx,
    { title: 'Reset your password', action: '/reset', submit: 'Email me a reset link', errors },
    emailField(undefined, errors),
  );
}

/**
 * The verification link's page: a button that POSTs the token. Following the link (a GET, which a
 * mail scanner does too) changes nothing.
 */
export function verifyConfirmPage(ctx: PageContext, token: string): string {
  return formPage(
    ctx,
    { title: 'Verify your email address', action: '/verify', submit: 'Verify my email address', errors: undefined },
    html`<input type="hidden" name="token" value="${token}" />
      <p>
        Confirm that this address is yours: it lets the account create API keys, save webhook URLs and start the trial.
      </p>`,
  );
}

export function resetConfirmPage(ctx: PageContext, token: string, errors?: FieldErrors): string {
  return formPage(
    ctx,
    { title: 'Choose a new password', action: '/reset/confirm', submit: 'Set the new password', errors },
    [
      html`<input type="hidden" name="token" value="${token}" />`,
      passwordField(
        {
          label: 'New password',
          autocomplete: 'new-password',
          hint: 'At least 10 characters. Every session of your account is signed out.',
        },
        errors,
      ),
    ],
  );
}
