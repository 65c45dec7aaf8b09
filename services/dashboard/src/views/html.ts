/**
 * The one way pages are written: a tagged template that escapes every interpolated value unless
 * it is itself the result of `html` (a SafeHtml). Why hand-written rather than a template engine:
 * ~40 lines, no dependency, views are plain TypeScript functions the compiler checks (a renamed
 * field breaks the build, not the page), and escaping is the default — raw HTML can only come
 * from another `html` template, never from a string. Attribute values are always quoted in the
 * templates, and the escape covers & < > " ' ` so a value cannot leave its attribute.
 */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '`': '&#96;',
};

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"'`]/g, (c) => ESCAPES[c] ?? c);
}

export type HtmlValue = SafeHtml | string | number | boolean | null | undefined | readonly HtmlValue[];

function render(value: HtmlValue): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return (value as readonly HtmlValue[]).map(render).join('');
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): SafeHtml {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) out += render(values[i]) + (strings[i + 1] ?? '');
  return new SafeHtml(out);
}

/** An attribute that is present or absent (`disabled`, `hidden`, `checked`). */
export function flag(name: string, on: boolean): SafeHtml {
  return new SafeHtml(on ? ` ${name}` : '');
}
