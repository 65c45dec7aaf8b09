/** The query of GET /api/v1/stream: `monitor=<uuid>` (repeatable, at most MAX_MONITORS), nothing else. */
import { InvalidRequestError } from '@sts/common';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_MONITORS = 50;

/** the monitor ids asked for (null: every monitor of the account); throws INVALID_REQUEST naming the parameter */
export function parseStreamQuery(target: string): string[] | null {
  const q = target.indexOf('?');
  if (q === -1) return null;
  let params: URLSearchParams;
  try {
    params = new URLSearchParams(target.slice(q + 1));
  } catch {
    throw new InvalidRequestError('the query string cannot be read');
  }
  const ids = new Set<string>();
  for (const [name, value] of params) {
    if (name !== 'monitor')
      throw new InvalidRequestError(
        `unknown query parameter "${name.slice(0, 40)}" (only "monitor")`,
        name.slice(0, 40),
      );
    if (!UUID.test(value)) throw new InvalidRequestError('monitor must be a monitor id (a UUID)', 'monitor');
    ids.add(value.toLowerCase());
  }
  if (ids.size > MAX_MONITORS) throw new InvalidRequestError(`at most ${MAX_MONITORS} monitor parameters`, 'monitor');
  return ids.size === 0 ? null : [...ids];
}
