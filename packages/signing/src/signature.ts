/**
 * Webhook signing and verification, docs/webhooks.md "Signing and verifying":
 * signature = "sha256=" + hex(HMAC-SHA256(key = UTF-8 bytes of the secret, message = "{timestamp}.{raw body bytes}")).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { WebhookVerificationError } from './errors';

export const HEADER_EVENT = 'X-Service-Event';
export const HEADER_TIMESTAMP = 'X-Service-Timestamp';
export const HEADER_SIGNATURE = 'X-Service-Signature';
export const HEADER_DELIVERY = 'X-Service-Delivery';
/** The event's number among its monitor's events (the body's `sequence`), native webhooks only. */
export const HEADER_SEQUENCE = 'X-Service-Sequence';
export const HEADER_USER_AGENT = 'User-Agent';
export const HEADER_CONTENT_TYPE = 'Content-Type';

/** Standard Webhooks (standardwebhooks.com) headers, sent besides the X-Service-* headers (docs/webhooks.md) on every delivery. */
export const HEADER_WEBHOOK_ID = 'webhook-id';
export const HEADER_WEBHOOK_TIMESTAMP = 'webhook-timestamp';
export const HEADER_WEBHOOK_SIGNATURE = 'webhook-signature';
/** The prefix of a secret in the form the Standard Webhooks libraries take. */
export const STANDARD_SECRET_PREFIX = 'whsec_';

export const USER_AGENT = 'Service-Webhook/1.0';
export const CONTENT_TYPE = 'application/json';
export const SIGNATURE_PREFIX = 'sha256=';
/** Largest accepted |receiver clock - X-Service-Timestamp|, in seconds. */
export const DEFAULT_TOLERANCE_SEC = 300;

export const WEBHOOK_EVENTS = [
  'monitor.hit',
  'monitor.test',
  'monitor.profile_changed',
  'monitor.target_unavailable',
] as const;
export type WebhookEventName = (typeof WEBHOOK_EVENTS)[number];

/** The exact request body bytes; a string stands for its UTF-8 bytes. */
export type RawBody = Buffer | Uint8Array | string;

/** One or more secrets; several are accepted while a secret is being rotated. */
export type SecretInput = string | readonly string[];

/** Node's IncomingHttpHeaders, or any plain object of header name → value(s). Names are matched case-insensitively. */
export type HeadersInput = Readonly<Record<string, string | readonly string[] | undefined>>;

/** Every header a sender sends with a delivery (the return value of `signedHeaders`). */
export type SignedWebhookHeaders = {
  'Content-Type': string;
  'User-Agent': string;
  'X-Service-Event': string;
  'X-Service-Timestamp': string;
  'X-Service-Signature': string;
  'X-Service-Delivery': string;
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
  /** present when the input names a sequence */
  'X-Service-Sequence'?: string;
};

export interface SignedHeadersInput {
  secret: string;
  event: WebhookEventName;
  /** Unique id of the delivery; the same id on a redelivery of the same hit. */
  deliveryId: string;
  /** The exact bytes that will be sent as the request body. */
  body: RawBody;
  /** Unix time in whole seconds; defaults to now. */
  timestamp?: number;
  /**
   * The secrets `webhook-signature` carries a signature by, in order (default `[secret]`). During
   * an overlapped rotation: the new secret and the old one, while X-Service-Signature (`secret`)
   * stays on the old one until the switch.
   */
  standardSecrets?: readonly string[];
  /** The event's sequence number (the body's `sequence`): sent as X-Service-Sequence when given. */
  sequence?: number | undefined;
}

export interface VerifyInput {
  secret: SecretInput;
  /** The raw request body, before any JSON parsing. */
  body: RawBody;
  headers: HeadersInput;
  /** Default 300 (docs/webhooks.md "Signing and verifying"). */
  toleranceSec?: number;
  /** The receiver's current time: Unix seconds (same unit as the header) or a Date. Defaults to the clock. */
  now?: number | Date;
}

const SIGNATURE_HEX_LENGTH = 64;
const SIGNATURE_LENGTH = SIGNATURE_PREFIX.length + SIGNATURE_HEX_LENGTH;
const SIGNATURE_RE = /^sha256=[0-9a-fA-F]{64}$/;
// Unix seconds as decimal digits (an optional fraction is tolerated); rules out "", "1e9", "0x10", "Infinity", "-5".
const TIMESTAMP_RE = /^\d{1,15}(?:\.\d{1,9})?$/;
// A header value a sender may put on the wire as is: visible ASCII, no spaces, no CR/LF.
const TOKEN_RE = /^[\x21-\x7e]{1,200}$/;

function assertSecret(secret: unknown): asserts secret is string {
  if (typeof secret !== 'string' || secret.length === 0) {
    throw new TypeError('webhook secret must be a non-empty string');
  }
}

function assertBody(body: unknown): asserts body is RawBody {
  if (typeof body !== 'string' && !(body instanceof Uint8Array)) {
    throw new TypeError('body must be the raw request body (Buffer or string), taken before JSON parsing');
  }
}

function digest(secret: string, timestampText: string, body: RawBody): Buffer {
  // A string key is used as its UTF-8 bytes; the body goes in unchanged (no copy, no re-encoding of Buffers).
  const hmac = createHmac('sha256', secret);
  hmac.update(`${timestampText}.`);
  if (typeof body === 'string') hmac.update(body, 'utf8');
  else hmac.update(body);
  return hmac.digest();
}

/**
 * The X-Service-Signature value for a body sent at `timestamp` (Unix seconds, integer): `sha256=<64 hex>`.
 */
export function sign(secret: string, timestamp: number, body: RawBody): string {
  assertSecret(secret);
  assertBody(body);
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw new TypeError('timestamp must be a non-negative integer (Unix time in seconds)');
  }
  return SIGNATURE_PREFIX + digest(secret, String(timestamp), body).toString('hex');
}

/**
 * The secret as the Standard Webhooks libraries take it: `whsec_` + base64 of the key bytes. Our
 * key bytes are the secret's UTF-8 bytes (the X-Service-Signature HMAC key), so both signatures use one key.
 */
export function standardWebhookSecret(secret: string): string {
  assertSecret(secret);
  return STANDARD_SECRET_PREFIX + Buffer.from(secret, 'utf8').toString('base64');
}

/**
 * One Standard Webhooks signature: `v1,` + base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}")),
 * the key being the secret's UTF-8 bytes.
 */
export function standardSignature(secret: string, id: string, timestamp: number, body: RawBody): string {
  assertSecret(secret);
  assertBody(body);
  const hmac = createHmac('sha256', secret);
  hmac.update(`${id}.${timestamp}.`);
  if (typeof body === 'string') hmac.update(body, 'utf8');
  else hmac.update(body);
  return `v1,${hmac.digest('base64')}`;
}

/**
 * Every header a sender must put on a delivery: Content-Type, User-Agent, X-Service-Event,
 * X-Service-Timestamp, X-Service-Signature and X-Service-Delivery (docs/webhooks.md), and the Standard
 * Webhooks trio webhook-id (= X-Service-Delivery), webhook-timestamp (= X-Service-Timestamp) and
 * webhook-signature (one `v1,<base64>` per secret, space-separated); X-Service-Sequence when the
 * input names the event's sequence.
 */
export function signedHeaders(input: SignedHeadersInput): SignedWebhookHeaders {
  const { secret, event, deliveryId, body } = input;
  const timestamp = input.timestamp ?? Math.floor(Date.now() / 1000);
  if (!(WEBHOOK_EVENTS as readonly string[]).includes(event)) {
    throw new TypeError(`event must be one of ${WEBHOOK_EVENTS.join(', ')}`);
  }
  if (typeof deliveryId !== 'string' || !TOKEN_RE.test(deliveryId)) {
    throw new TypeError('deliveryId must be 1-200 visible ASCII characters (no spaces or line breaks)');
  }
  if (input.sequence !== undefined && !(Number.isSafeInteger(input.sequence) && input.sequence > 0)) {
    throw new TypeError('sequence must be a positive integer');
  }
  const signature = sign(secret, timestamp, body);
  const standard = (input.standardSecrets ?? [secret]).map((k) => standardSignature(k, deliveryId, timestamp, body));
  return {
    'Content-Type': CONTENT_TYPE,
    'User-Agent': USER_AGENT,
    'X-Service-Event': event,
    'X-Service-Timestamp': String(timestamp),
    'X-Service-Signature': signature,
    'X-Service-Delivery': deliveryId,
    'webhook-id': deliveryId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': standard.join(' '),
    ...(input.sequence !== undefined ? { [HEADER_SEQUENCE]: String(input.sequence) } : {}),
  };
}

/**
 * The single value of a header, looked up case-insensitively. Several values (an array, or the same name
 * in different cases) are refused: a delivery carries each header once.
 */
function headerValue(headers: HeadersInput, name: string): string {
  const lower = name.toLowerCase();
  let found: unknown;
  let count = 0;
  for (const key of Object.keys(headers)) {
    if (key.length !== lower.length || key.toLowerCase() !== lower) continue;
    const raw = headers[key];
    if (raw === undefined) continue;
    const values: readonly unknown[] = Array.isArray(raw) ? raw : [raw];
    for (const value of values) {
      count += 1;
      found = value;
    }
  }
  if (count > 1) throw new WebhookVerificationError(`Multiple ${name} headers`, 'DUPLICATE_HEADER');
  const value = typeof found === 'string' ? found.trim() : '';
  if (value === '') throw new WebhookVerificationError(`Missing ${name} header`, 'MISSING_HEADER');
  return value;
}

function secretList(secret: SecretInput): readonly string[] {
  const list: readonly unknown[] = typeof secret === 'string' ? [secret] : Array.isArray(secret) ? secret : [];
  if (list.length === 0) throw new TypeError('webhook secret must be a non-empty string');
  for (const s of list) assertSecret(s);
  return list as readonly string[];
}

function nowSeconds(now: number | Date | undefined): number {
  if (now === undefined) return Date.now() / 1000;
  const sec = now instanceof Date ? now.getTime() / 1000 : now;
  if (typeof sec !== 'number' || !Number.isFinite(sec)) throw new TypeError('now must be Unix seconds or a valid Date');
  return sec;
}

function seconds(n: number): string {
  return String(Math.round(n * 1000) / 1000);
}

/**
 * Verifies a delivery on its raw body. Returns normally when the signature is valid and the timestamp is
 * within `toleranceSec` of now (either direction); otherwise throws WebhookVerificationError.
 */
export function verify(input: VerifyInput): void {
  const { body, headers } = input;
  const secrets = secretList(input.secret);
  assertBody(body);
  const toleranceSec = input.toleranceSec ?? DEFAULT_TOLERANCE_SEC;
  if (typeof toleranceSec !== 'number' || !Number.isFinite(toleranceSec) || toleranceSec < 0) {
    throw new TypeError('toleranceSec must be a non-negative number of seconds');
  }
  if (headers === null || typeof headers !== 'object') throw new TypeError('headers must be an object');

  const timestampText = headerValue(headers, HEADER_TIMESTAMP);
  const signature = headerValue(headers, HEADER_SIGNATURE);

  const timestamp = Number(timestampText);
  if (!TIMESTAMP_RE.test(timestampText) || !Number.isFinite(timestamp)) {
    throw new WebhookVerificationError(
      `Invalid ${HEADER_TIMESTAMP} header: expected Unix time in seconds`,
      'INVALID_TIMESTAMP',
    );
  }
  const skew = nowSeconds(input.now) - timestamp;
  if (skew > toleranceSec) {
    throw new WebhookVerificationError(
      `Timestamp too old: ${seconds(skew)} s before now (tolerance ${toleranceSec} s)`,
      'TIMESTAMP_TOO_OLD',
    );
  }
  if (skew < -toleranceSec) {
    throw new WebhookVerificationError(
      `Timestamp too new: ${seconds(-skew)} s ahead of now (tolerance ${toleranceSec} s)`,
      'TIMESTAMP_TOO_NEW',
    );
  }

  // The shape check looks only at the sender's value, never at the expected digest, so refusing early leaks nothing.
  if (signature.length !== SIGNATURE_LENGTH || !SIGNATURE_RE.test(signature)) {
    throw new WebhookVerificationError(
      `Malformed ${HEADER_SIGNATURE} header: expected ${SIGNATURE_PREFIX} followed by ${SIGNATURE_HEX_LENGTH} hex characters`,
      'MALFORMED_SIGNATURE',
    );
  }
  const given = Buffer.from(signature.slice(SIGNATURE_PREFIX.length), 'hex');
  let match = false;
  for (const secret of secrets) {
    // Every secret is tried (no early exit); each comparison is constant-time over 32 bytes.
    if (timingSafeEqual(digest(secret, timestampText, body), given)) match = true;
  }
  if (!match) throw new WebhookVerificationError('Signature mismatch', 'SIGNATURE_MISMATCH');
}
