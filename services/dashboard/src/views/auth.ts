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
      <p>No account yet? <a href="/signup">Sign up</a> — it is free.</p>
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
