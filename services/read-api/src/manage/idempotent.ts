/**
 * Idempotency-Key on the management POSTs: the first call with a key acts and its answer is kept
 * 24 h; the same key with the same request (method, path, query and body, compared as canonical
 * JSON) gets that answer again without acting (`Idempotent-Replayed: true`); the same key with
 * another request is 422 IDEMPOTENCY_KEY_REUSED. Answers that a retry should act on again (429,
 * 5xx) are not kept: the key is given up.
 */
import { createHash } from 'node:crypto';
import { ApiError, toErrorResponse } from '@sts/common';
import type { IdempotencyStore } from '../adapters/idempotency';
import { toApiError } from '../http/errors';
import type { HandlerResult } from '../http/router';

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** what makes two requests "the same" for a key */
export function fingerprint(method: string, url: string, body: unknown): string {
  return createHash('sha256')
    .update(`${method} ${url}\n${canonical(body)}`)
    .digest('hex');
}

const keptStatus = (status: number) => status < 500 && status !== 429;

export async function idempotent(
  store: IdempotencyStore,
  call: { accountId: string; key: string; fingerprint: string; requestId: string },
  run: () => Promise<HandlerResult>,
): Promise<HandlerResult> {
  const { accountId, key } = call;
  const claim = await store.claim(accountId, key, call.fingerprint);
  switch (claim.kind) {
    case 'replay':
      return {
        status: claim.answer.status,
        body: undefined,
        json: claim.answer.json,
        headers: { 'idempotent-replayed': 'true' },
      };
    case 'mismatch':
      throw new ApiError(
        422,
        'IDEMPOTENCY_KEY_REUSED',
        'this Idempotency-Key was used for another request in the last 24 hours; send a new key for a new request',
        { param: 'Idempotency-Key' },
      );
    case 'unreadable':
      throw new ApiError(
        422,
        'IDEMPOTENCY_KEY_REUSED',
        'the answer kept for this Idempotency-Key can no longer be read (the encryption key changed); send a new key',
        { param: 'Idempotency-Key' },
      );
    case 'in_progress':
      throw new ApiError(
        409,
        'IDEMPOTENCY_KEY_IN_USE',
        'a request with this Idempotency-Key is still being processed; retry in a moment',
        { param: 'Idempotency-Key' },
        { 'Retry-After': '1' },
      );
    case 'claimed':
      break;
  }
  let result: HandlerResult;
  try {
    result = await run();
  } catch (err) {
    const apiError = toApiError(err);
    if (apiError && keptStatus(apiError.status)) {
      const { status, body } = toErrorResponse(apiError, call.requestId);
      await store.complete(accountId, key, call.fingerprint, { status, json: JSON.stringify(body) });
    } else await store.release(accountId, key).catch(() => undefined);
    throw err;
  }
  const json = result.json ?? JSON.stringify(result.body);
  await store.complete(accountId, key, call.fingerprint, { status: result.status, json });
  return { ...result, json };
}
