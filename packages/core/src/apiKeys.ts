/**
 * API keys: `sts_live_` + 30 random base62 characters + a 6-character base62 CRC32 checksum of
 * those 30. A malformed key (wrong shape or checksum) is refused without a lookup. Keys are
 * stored as SHA-256 hex only; the display prefix (`sts_live_` + the first 8 random characters)
 * identifies a key in lists and logs.
 */
import { createHash, randomInt } from 'node:crypto';

export const API_KEY_PREFIX = 'sts_live_';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const BODY_LEN = 30;
const CHECK_LEN = 6;
const KEY_RE = new RegExp(`^${API_KEY_PREFIX}([0-9A-Za-z]{${BODY_LEN}})([0-9A-Za-z]{${CHECK_LEN}})$`);
export const API_KEY_LENGTH = API_KEY_PREFIX.length + BODY_LEN + CHECK_LEN;
export const DISPLAY_PREFIX_LENGTH = API_KEY_PREFIX.length + 8;

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32(text: string): number {
  let c = 0xffffffff;
  for (let i = 0; i < text.length; i++) c = CRC_TABLE[(c ^ text.charCodeAt(i)) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function base62(n: number, width: number): string {
  let out = '';
  let v = n;
  for (let i = 0; i < width; i++) {
    out = BASE62[v % 62]! + out;
    v = Math.floor(v / 62);
  }
  return out;
}

function checksum(body: string): string {
  return base62(crc32(body), CHECK_LEN);
}

export interface NewApiKey {
  /** the full key: shown once, never stored */
  key: string;
  /** what is shown in lists: `sts_live_` + 8 characters */
  prefix: string;
  /** SHA-256 hex of the key: what is stored */
  hash: string;
}

export function generateApiKey(): NewApiKey {
  let body = '';
  for (let i = 0; i < BODY_LEN; i++) body += BASE62[randomInt(62)];
  const key = `${API_KEY_PREFIX}${body}${checksum(body)}`;
  return { key, prefix: displayPrefix(key), hash: hashApiKey(key) };
}

/** True when the key has the right shape and checksum (no lookup needed to refuse it otherwise). */
export function isWellFormedApiKey(key: string): boolean {
  if (key.length !== API_KEY_LENGTH) return false;
  const m = KEY_RE.exec(key);
  return m !== null && checksum(m[1]!) === m[2];
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

export function displayPrefix(key: string): string {
  return key.slice(0, DISPLAY_PREFIX_LENGTH);
}

/**
 * What a key may do: `read` (the default, what every key made before scopes is) calls the read
 * endpoints; `manage` also creates, changes and deletes monitors and webhooks and redelivers.
 */
export const API_KEY_SCOPES = ['read', 'manage'] as const;
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];

export function isApiKeyScope(value: unknown): value is ApiKeyScope {
  return value === 'read' || value === 'manage';
}
