import { flag, html, type SafeHtml } from './html';

/** problems by field name, shown next to the field */
export type FieldErrors = Record<string, string>;

export interface FieldOptions {
  name: string;
  label: string;
  value?: string;
  type?: 'text' | 'email' | 'password' | 'url' | 'number' | 'datetime-local';
  hint?: string;
  required?: boolean;
  autocomplete?: string;
  errors?: FieldErrors;
  min?: number;
  max?: number;
}

export function field(o: FieldOptions): SafeHtml {
  const id = `f-${o.name}`;
  const error = o.errors?.[o.name];
  const describedBy = [o.hint ? `${id}-hint` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ');
  return html`<div class="field${error ? ' has-error' : ''}">
    <label for="${id}">${o.label}</label>
    ${o.hint ? html`<p class="hint" id="${id}-hint">${o.hint}</p>` : ''}
    <input
      id="${id}"
      name="${o.name}"
      type="${o.type ?? 'text'}"
      value="${o.value ?? ''}"
      ${flag('required', !!o.required)}${
        o.autocomplete ? html` autocomplete="${o.autocomplete}"` : ''
      }${o.min !== undefined ? html` min="${o.min}"` : ''}${o.max !== undefined ? html` max="${o.max}"` : ''}${
        describedBy ? html` aria-describedby="${describedBy}"` : ''
      }${error ? html` aria-invalid="true"` : ''}
    />
    ${error ? html`<p class="field-error" id="${id}-error">${error}</p>` : ''}
  </div>`;
}

/** the form-level problem (not tied to one field) */
export function formError(errors: FieldErrors | undefined): SafeHtml {
  const general = errors?._form;
  return general ? html`<p class="alert" role="alert">${general}</p>` : html``;
}
