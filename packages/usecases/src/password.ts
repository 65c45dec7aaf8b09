/**
 * Password hashing with node:crypto scrypt (argon2id would need a native build).
 * Stored form: `scrypt$<log2 N>$<r>$<p>$<salt base64url>$<hash base64url>` — the parameters
 * travel with the hash, so raising the cost later keeps old hashes verifiable (and
 * `needsRehash` says when to upgrade one at the next sign-in).
 *
 * Default cost: N = 2^15, r = 8, p = 1 (32 MiB, about 50–100 ms here). OWASP's first choice is
 * N = 2^17 (128 MiB); on this project's small shared machines that much memory per sign-in is a
 * denial-of-service lever, and sign-in attempts are throttled anyway, so 2^15 is the default;
 * the `scrypt` option of createUseCases can raise it.
 */
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';

export interface ScryptParams {
  logN: number;
  r: number;
  p: number;
}

export const DEFAULT_SCRYPT: ScryptParams = { logN: 15, r: 8, p: 1 };
const KEY_LENGTH = 32;
const SALT_BYTES = 16;

function scrypt(password: string, salt: Buffer, params: ScryptParams): Promise<Buffer> {
  const options: ScryptOptions = {
    N: 2 ** params.logN,
    r: params.r,
    p: params.p,
    // scrypt needs 128 * N * r bytes; leave head room over node's 32 MiB default
    maxmem: 256 * 2 ** params.logN * params.r,
  };
  return new Promise((resolve, reject) => {
    scryptCb(password.normalize('NFKC'), salt, KEY_LENGTH, options, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

export async function hashPassword(password: string, params: ScryptParams = DEFAULT_SCRYPT): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await scrypt(password, salt, params);
  return ['scrypt', params.logN, params.r, params.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

function parseHash(stored: string): { params: ScryptParams; salt: Buffer; key: Buffer } | null {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return null;
  const [logN, r, p] = parts.slice(1, 4).map(Number) as [number, number, number];
  if (![logN, r, p].every((n) => Number.isInteger(n) && n > 0) || logN > 22) return null;
  const salt = Buffer.from(parts[4]!, 'base64url');
  const key = Buffer.from(parts[5]!, 'base64url');
  if (salt.length === 0 || key.length === 0) return null;
  return { params: { logN, r, p }, salt, key };
}

/** True when `password` matches `stored`; a malformed `stored` never matches. Constant-time comparison. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parsed = parseHash(stored);
  if (!parsed) return false;
  const key = await scrypt(password, parsed.salt, parsed.params);
  return key.length === parsed.key.length && timingSafeEqual(key, parsed.key);
}

/** The stored hash was made with other parameters than `params`. */
export function needsRehash(stored: string, params: ScryptParams = DEFAULT_SCRYPT): boolean {
  const parsed = parseHash(stored);
  return !parsed || parsed.params.logN !== params.logN || parsed.params.r !== params.r || parsed.params.p !== params.p;
}
