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

/** one box of a checkbox group */
export interface CheckBox {
  value: string;
  label: string;
  hint: string;
}

interface CheckboxGroupOptions {
  /** the checkboxes' field name (and the field a refusal names) */
  name: string;
  legend: string;
  testId: string;
  /** the hidden field that says the form carried the checkboxes (none ticked then means none) */
  shown: string;
  boxes: readonly CheckBox[];
  checked: readonly string[];
  errors?: FieldErrors | undefined;
}

/** A fieldset of checkboxes, ticked as `checked` says; a refusal of field `name` is shown inside it. */
export function checkboxGroup(o: CheckboxGroupOptions): SafeHtml {
  const error = o.errors?.[o.name];
  const id = `f-${o.name}`;
  return html`<fieldset
    class="field${error ? ' has-error' : ''}"
    data-testid="${o.testId}"
    ${error ? html`aria-describedby="${id}-error"` : ''}
  >
    <legend>${o.legend}</legend>
    <input type="hidden" name="${o.shown}" value="1" />
    ${o.boxes.map(
      (b) =>
        html`<p class="check">
          <input
            type="checkbox"
            id="${id}-${b.value}"
            name="${o.name}"
            value="${b.value}"
            aria-describedby="${id}-${b.value}-hint"
            ${flag('checked', o.checked.includes(b.value))}
          />
          <label for="${id}-${b.value}">${b.label}</label>
          <span class="hint" id="${id}-${b.value}-hint">${b.hint}</span>
        </p>`,
    )}
    ${error ? html`<p class="field-error" id="${id}-error" role="alert">${error}</p>` : ''}
  </fieldset>`;
}
