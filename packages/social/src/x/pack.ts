/**
 * Packing watched usernames into X query groups: `from:a OR from:b ...`, each at most `maxLength`
 * characters (search/recent: X_QUERY_MAX_LENGTH, default 512 → about 20 targets a query;
 * filtered-stream rules: X_RULE_MAX_LENGTH, default 1,024). Pure: the same input gives the same
 * groups, in input order, usernames deduplicated case-insensitively.
 */
import { isValidUsername } from '@sts/core';

export interface QueryGroup {
  /** `from:a OR from:b ...` */
  query: string;
  /** the usernames of the query, as given */
  usernames: string[];
}

const OR = ' OR ';
/** the longest single clause: `from:` + a 15-character username */
export const MIN_QUERY_LENGTH = 'from:'.length + 15;

export function packFromQueries(usernames: readonly string[], maxLength: number): QueryGroup[] {
  if (!Number.isInteger(maxLength) || maxLength < MIN_QUERY_LENGTH) {
    throw new RangeError(`maxLength must be an integer of at least ${MIN_QUERY_LENGTH}`);
  }
  const seen = new Set<string>();
  const groups: QueryGroup[] = [];
  let current: QueryGroup | null = null;
  for (const name of usernames) {
    if (!isValidUsername(name)) throw new RangeError(`not an X username: "${name}"`);
    const lower = name.toLowerCase();
    if (seen.has(lower)) continue;
    seen.add(lower);
    const clause = `from:${name}`;
    if (current && current.query.length + OR.length + clause.length <= maxLength) {
      current.query += OR + clause;
      current.usernames.push(name);
    } else {
      current = { query: clause, usernames: [name] };
      groups.push(current);
    }
  }
  return groups;
}
