/**
 * Webhook signing secrets at rest: AES-256-GCM with a key from the environment
 * (SECRETS_ENCRYPTION_KEY: 32 bytes as base64 or 64 hex digits). Stored form:
 * `v1.<iv>.<tag>.<ciphertext>`, each part base64url. The monitor id is bound in as associated
 * data, so a ciphertext copied onto another monitor does not decrypt.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
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
}

/** AES-256-GCM with a 12-byte IV and a full 16-byte tag; decryption refuses anything else. */
export const IV_BYTES = 12;
export const TAG_BYTES = 16;

export function createSecretBox(encryptionKey: string | Buffer): SecretBox {
  const key = typeof encryptionKey === 'string' ? parseEncryptionKey(encryptionKey) : encryptionKey;
  if (key.length !== 32) throw new SecretBoxError('encryption key must be 32 bytes');
  return {
    encrypt(plaintext, associatedData) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
      cipher.setAAD(Buffer.from(associatedData, 'utf8'));
      const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return ['v1', iv, cipher.getAuthTag(), ct]
        .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
        .join('.');
    },
    decrypt(stored, associatedData) {
      const parts = stored.split('.');
      if (parts.length !== 4 || parts[0] !== 'v1') throw new SecretBoxError('unknown secret format');
      const [iv, tag, ct] = parts.slice(1).map((p) => Buffer.from(p, 'base64url')) as [Buffer, Buffer, Buffer];
      // a shortened tag would let a forger try 2^32 (or fewer) guesses instead of 2^128
      if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new SecretBoxError('unknown secret format');
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
        decipher.setAAD(Buffer.from(associatedData, 'utf8'));
        decipher.setAuthTag(tag);
        return Buffer.concat([decipher.update(ct), decipher.final()]).toString('utf8');
      } catch {
        throw new SecretBoxError('secret does not decrypt with this key');
      }
    },
  };
}

/** A new webhook signing secret: `whsec_` + 32 random bytes, base64url. Its UTF-8 bytes are the HMAC key. */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
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
