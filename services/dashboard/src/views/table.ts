import { html, type HtmlValue, type SafeHtml } from './html';

/** The heading of a table's action column: read by screen readers, not shown. */
export const ACTIONS_COLUMN = html`<span class="sr-only">Actions</span>`;

/** A table's head: one row with a column heading (`<th scope="col">`) per entry. */
export function tableHead(columns: readonly HtmlValue[]): SafeHtml {
  return html`<thead>
    <tr>
      ${columns.map((c) => html`<th scope="col">${c}</th>`)}
    </tr>
  </thead>`;
}
