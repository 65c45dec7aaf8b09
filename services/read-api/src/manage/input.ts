/**
 * The management endpoints' input: strict JSON bodies (zod schemas of @sts/api-contract: an
 * unknown field, a wrong type or an over-long value is a 400 naming the field, before anything is
 * read or written) and the Idempotency-Key header.
 */
import { IDEMPOTENCY_KEY_MAX_LENGTH } from '@sts/api-contract';
import { InvalidRequestError } from '@sts/common';
import type { z } from 'zod';

/** the first problem of a body, as a 400 whose `param` names the field (dotted: `filters.lang`) */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new InvalidRequestError('the request body must be a JSON object', 'body');
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const at = issue.path.map(String).join('.');
  if (issue.code === 'unrecognized_keys') {
    const name = [at, issue.keys[0]].filter(Boolean).join('.');
    throw new InvalidRequestError(`unknown field "${name.slice(0, 100)}"`, name.slice(0, 100));
  }
  const param = at || 'body';
  throw new InvalidRequestError(`${param}: ${describeIssue(issue)}`, param);
}

function describeIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === 'invalid_type')
    return issue.input === undefined ? 'is required' : `must be ${article(issue.expected)}`;
  if (issue.code === 'too_big') {
    const max = String(issue.maximum);
    if (issue.origin === 'string') return `must be at most ${max} characters`;
    return issue.origin === 'array' ? `must have at most ${max} entries` : `must be at most ${max}`;
  }
  if (issue.code === 'too_small') return `must be at least ${String(issue.minimum)}`;
  if (issue.code === 'invalid_value') return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
  if (issue.code === 'invalid_format' && issue.format === 'datetime')
    return 'must be an ISO 8601 time such as 2026-11-24T10:00:00Z';
  return issue.message;
}

function article(type: string): string {
  if (type === 'int') return 'a whole number';
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

/** visible ASCII only (RFC 9110 token-ish): what clients put in practice (UUIDs, ULIDs, hashes) */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]+$/;

/** the Idempotency-Key header, undefined when absent; 400 when empty, too long or not visible ASCII */
export function parseIdempotencyKey(raw: string | string[] | undefined): string | undefined {
  if (raw === undefined) return undefined;
  if (Array.isArray(raw)) throw new InvalidRequestError('send one Idempotency-Key header', 'Idempotency-Key');
  if (raw.length === 0 || raw.length > IDEMPOTENCY_KEY_MAX_LENGTH || !IDEMPOTENCY_KEY.test(raw))
    throw new InvalidRequestError(
      `Idempotency-Key must be 1 to ${IDEMPOTENCY_KEY_MAX_LENGTH} visible ASCII characters (a UUID is a good choice)`,
      'Idempotency-Key',
    );
  return raw;
}
