/**
 * Webhook signing secrets at rest: AES-256-GCM with a key from the environment
 * (SECRETS_ENCRYPTION_KEY: 32 bytes as base64 or 64 hex digits). Stored form:
 * `v2.<key id>.<iv>.<tag>.<ciphertext>` (iv, tag, ciphertext base64url; the key id is the first 8
 * hex digits of SHA-256 of the key, so a ciphertext names the key it needs without revealing it).
 * The monitor id is bound in as associated data, so a ciphertext copied onto another monitor does
 * not decrypt.
 *
 * Rotation: a box holds the current key (encrypts) and old keys (SECRETS_ENCRYPTION_KEYS_OLD,
 * decrypt only). `v1.<iv>.<tag>.<ciphertext>` from before key ids is tried with every key.
 * `npm run cli -- secrets rotate` re-encrypts every stored secret under the current key; then the
 * old keys can be dropped.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';

export class SecretBoxError extends Error {
  override name = 'SecretBoxError';
}

export function parseEncryptionKey(value: string): Buffer {
  const v = value.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(v) ? Buffer.from(v, 'hex') : Buffer.from(v, 'base64');
  if (key.length !== 32)
    throw new SecretBoxError('SECRETS_ENCRYPTION_KEY must be 32 bytes, as base64 or 64 hex digits');
  return key;
}

export interface SecretBox {
  encrypt(plaintext: string, associatedData: string): string;
  decrypt(stored: string, associatedData: string): string;
  /** whether `stored` is encrypted under the current key already (nothing for `secrets rotate` to do) */
  isCurrent(stored: string): boolean;
}

/** AES-256-GCM with a 12-byte IV and a full 16-byte tag; decryption refuses anything else. */
export const IV_BYTES = 12;
export const TAG_BYTES = 16;

/** the key id written into a ciphertext: 8 hex digits of SHA-256 of the key */
export function encryptionKeyId(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8);
}

function open(key: Buffer, iv: Buffer, tag: Buffer, ct: Buffer, associatedData: string): string | null {
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(Buffer.from(associatedData, 'utf8'));
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(ct), decipher.final()]).toString('utf8');
  } catch {
    return null;
  }
}

export function createSecretBox(encryptionKey: string | Buffer, oldKeys: readonly (string | Buffer)[] = []): SecretBox {
  const asKey = (k: string | Buffer) => (typeof k === 'string' ? parseEncryptionKey(k) : k);
  const key = asKey(encryptionKey);
  const ring = [key, ...oldKeys.map(asKey)];
  if (ring.some((k) => k.length !== 32)) throw new SecretBoxError('encryption key must be 32 bytes');
  const byId = new Map(ring.map((k) => [encryptionKeyId(k), k] as const));
  const currentId = encryptionKeyId(key);
  return {
    encrypt(plaintext, associatedData) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
      cipher.setAAD(Buffer.from(associatedData, 'utf8'));
      const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return ['v2', currentId, ...[iv, cipher.getAuthTag(), ct].map((p) => p.toString('base64url'))].join('.');
    },
    decrypt(stored, associatedData) {
      const parts = stored.split('.');
      const v2 = parts.length === 5 && parts[0] === 'v2';
      if (!v2 && !(parts.length === 4 && parts[0] === 'v1')) throw new SecretBoxError('unknown secret format');
      const [iv, tag, ct] = parts.slice(-3).map((p) => Buffer.from(p, 'base64url')) as [Buffer, Buffer, Buffer];
      // a shortened tag would let a forger try 2^32 (or fewer) guesses instead of 2^128
      if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new SecretBoxError('unknown secret format');
      const candidates = v2 ? [byId.get(parts[1]!)].filter((k) => k !== undefined) : ring;
      if (v2 && candidates.length === 0) {
        throw new SecretBoxError(`secret is encrypted with key ${parts[1]}, which is not configured`);
      }
      for (const k of candidates) {
        const plain = open(k, iv, tag, ct, associatedData);
        if (plain !== null) return plain;
      }
      throw new SecretBoxError('secret does not decrypt with this key');
    },
    isCurrent(stored) {
      const parts = stored.split('.');
      return parts[0] === 'v2' && parts[1] === currentId;
    },
  };
}

/** A new webhook signing secret: `whsec_` + 32 random bytes, base64url. Its UTF-8 bytes are the HMAC key. */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

/**
 * SECRETS_ENCRYPTION_KEYS_OLD: a comma list of former keys (decrypt only), each 32 bytes as base64
 * or 64 hex digits; an empty entry (a stray comma) is an error.
 */
export function encryptionKeyListField() {
  return z
    .string()
    .transform((v) => v.split(',').map((s) => s.trim()))
    .pipe(z.array(encryptionKeyField().refine((v) => v !== '', { message: 'has an empty entry' })).min(1));
}

/** An environment field holding SECRETS_ENCRYPTION_KEY: 32 bytes as base64 or 64 hex digits. */
export function encryptionKeyField() {
  return z.string().refine(
    (v) => {
      try {
        parseEncryptionKey(v);
        return true;
      } catch {
        return false;
      }
    },
    { message: 'must be 32 bytes, as base64 or 64 hex digits' },
  );
}
