import { field, formError, type FieldErrors } from './forms';
import { html } from './html';
import { csrfField, layout, type PageContext } from './layout';

export function signUpPage(ctx: PageContext, values: { email?: string } = {}, errors?: FieldErrors): string {
  return layout(
    ctx,
    'Create your account',
    html`<form method="post" action="/signup" class="card narrow" novalidate>
      ${csrfField(ctx)} ${formError(errors)}
      ${field({ name: 'email', label: 'Email', type: 'email', value: values.email, required: true, autocomplete: 'email', errors })}
      ${field({
        name: 'password',
        label: 'Password',
        type: 'password',
        required: true,
        autocomplete: 'new-password',
        hint: 'At least 10 characters.',
        errors,
      })}
      <button type="submit" class="btn primary">Sign up</button>
      <p>New accounts start on the Free plan. Already have one? <a href="/signin">Sign in</a>.</p>
    </form>`,
  );
}

export function signInPage(ctx: PageContext, values: { email?: string } = {}, errors?: FieldErrors): string {
  return layout(
    ctx,
    'Sign in',
    html`<form method="post" action="/signin" class="card narrow" novalidate>
      ${csrfField(ctx)} ${formError(errors)}
      ${field({ name: 'email', label: 'Email', type: 'email', value: values.email, required: true, autocomplete: 'email', errors })}
      ${field({ name: 'password', label: 'Password', type: 'password', required: true, autocomplete: 'current-password', errors })}
      <button type="submit" class="btn primary">Sign in</button>
      <p>No account yet? <a href="/signup">Sign up</a> — it is free. <a href="/reset">Forgot your password?</a></p>
    </form>`,
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
  return layout(
    ctx,
    'Reset your password',
    html`<form method="post" action="/reset" class="card narrow" novalidate>
      ${csrfField(ctx)} ${formError(errors)}
      ${field({ name: 'email', label: 'Email', type: 'email', required: true, autocomplete: 'email', errors })}
      <button type="submit" class="btn primary">Email me a reset link</button>
    </form>`,
  );
}

export function resetConfirmPage(ctx: PageContext, token: string, errors?: FieldErrors): string {
  return layout(
    ctx,
    'Choose a new password',
    html`<form method="post" action="/reset/confirm" class="card narrow" novalidate>
      ${csrfField(ctx)} ${formError(errors)}
      <input type="hidden" name="token" value="${token}" />
      ${field({
        name: 'password',
        label: 'New password',
        type: 'password',
        required: true,
        autocomplete: 'new-password',
        hint: 'At least 10 characters. Every session of your account is signed out.',
        errors,
      })}
      <button type="submit" class="btn primary">Set the new password</button>
    </form>`,
  );
}
