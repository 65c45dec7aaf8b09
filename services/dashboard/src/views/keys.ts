import type { ApiKeyView } from '@sts/usecases';
import { formatTime } from '../domain/format';
import { field, formError, type FieldErrors } from './forms';
import { html } from './html';
import { csrfField, layout, postButton, type PageContext } from './layout';
import { ACTIONS_COLUMN, tableHead } from './table';

export function keysPage(
  ctx: PageContext,
  keys: ApiKeyView[],
  apiUrl: string,
  form: { name?: string; scope?: string; errors?: FieldErrors } = {},
): string {
  const scope = form.scope === 'manage' ? 'manage' : 'read';
  const scopeError = form.errors?.scope;
  const live = keys.filter((k) => !k.revokedAt);
  const revoked = keys.filter((k) => k.revokedAt);
  return layout(
    ctx,
    'API keys',
    html`<section class="card" aria-labelledby="new-key-h">
        <h2 id="new-key-h">Create a key</h2>
        <form method="post" action="/keys" class="inline" novalidate>
          ${csrfField(ctx)} ${formError(form.errors)}
          ${field({ name: 'name', label: 'Name (optional)', value: form.name, hint: 'For example "production" or "laptop".', errors: form.errors })}
          <fieldset class="field${scopeError ? ' has-error' : ''}">
            <legend>Scope</legend>
            <label
              ><input type="radio" name="scope" value="read" ${scope === 'read' ? html`checked` : ''} /> Read: users,
              tweets, search, monitors and hits</label
            >
            <label
              ><input type="radio" name="scope" value="manage" ${scope === 'manage' ? html`checked` : ''} /> Manage:
              also create, change and delete monitors and webhooks, and redeliver</label
            >
            ${scopeError ? html`<p class="field-error" role="alert">${scopeError}</p>` : ''}
          </fieldset>
          <button type="submit" class="btn primary">Create key</button>
        </form>
        <p class="muted">The key is shown once, right after you create it. Only a hash is stored.</p>
      </section>
      <section class="card" aria-labelledby="keys-h">
        <h2 id="keys-h">Active keys</h2>
        ${
          live.length === 0
            ? html`<p>No active keys yet.</p>`
            : html`<div class="table-wrap">
                <table class="stack">
                  ${tableHead(['Name', 'Prefix', 'Scope', 'Created', 'Last used', ACTIONS_COLUMN])}
                  <tbody>
                    ${live.map(
                      (k) =>
                        html`<tr data-key-id="${k.id}">
                          <td data-label="Name">${k.name || html`<span class="muted">unnamed</span>`}</td>
                          <td data-label="Prefix"><code>${k.prefix}…</code></td>
                          <td data-label="Scope">${k.scope}</td>
                          <td data-label="Created">${formatTime(k.createdAt)}</td>
                          <td data-label="Last used">${formatTime(k.lastUsedAt)}</td>
                          <td data-label="">
                            ${postButton(ctx, {
                              action: `/keys/${k.id}/revoke`,
                              label: html`Revoke<span class="sr-only"> ${k.name || k.prefix}</span>`,
                              class: 'btn danger small',
                              confirm: `Revoke the key ${k.prefix}…? Calls with it stop working within seconds.`,
                            })}
                          </td>
                        </tr>`,
                    )}
                  </tbody>
                </table>
              </div>`
        }
        ${
          revoked.length
            ? html`<details>
                <summary>Revoked keys (${revoked.length})</summary>
                <ul>
                  ${revoked.map(
                    (k) => html`<li><code>${k.prefix}…</code> ${k.name} — revoked ${formatTime(k.revokedAt)}</li>`,
                  )}
                </ul>
              </details>`
            : ''
        }
      </section>
      <section class="card" aria-labelledby="use-h">
        <h2 id="use-h">Call the API</h2>
        <pre><code>curl -H "Authorization: Bearer $API_KEY" ${apiUrl}/api/v1/users/jack</code></pre>
      </section>`,
  );
}
