/**
 * A time of the delivery log's Recover form (from, until): the browser's datetime-local value
 * (`2026-11-24T10:00`, read as UTC: the form says so) or an ISO 8601 time with its zone
 * (`2026-11-24T10:00:00Z`, `...+01:00`), as the CLI's `--since` takes. Pure.
 */
const LOCAL = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?$/;
const ZONED = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i;

/** the time, or null when the text is neither form (or no real time) */
export function parseFormTime(text: string): Date | null {
  const t = text.trim();
  const local = LOCAL.test(t);
  if (!local && !ZONED.test(t)) return null;
  const d = new Date(local ? `${t}Z` : t);
  return Number.isNaN(d.getTime()) ? null : d;
}
