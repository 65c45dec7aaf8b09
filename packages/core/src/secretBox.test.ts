/** Decryption requires the full 16-byte GCM tag and a 12-byte IV. */
import { createCipheriv, randomBytes } from 'node:crypto';
import { createSecretBox, encryptionKeyId, encryptionKeyListField, SecretBoxError } from './secretBox';

describe('secret box tag and IV lengths', () => {
  const box = createSecretBox(randomBytes(32));
  const stored = box.encrypt('whsec_secret', 'monitor-1');
  const [v, kid, iv, tag, ct] = stored.split('.') as [string, string, string, string, string];
  const b = (s: string) => Buffer.from(s, 'base64url');

  it('round-trips a secret', () => {
    expect(box.decrypt(stored, 'monitor-1')).toBe('whsec_secret');
    expect(b(iv)).toHaveLength(12);
    expect(b(tag)).toHaveLength(16);
  });

  it.each([1, 4, 8, 12, 15])('refuses a tag truncated to %i bytes', (n) => {
    const short = [v, kid, iv, b(tag).subarray(0, n).toString('base64url'), ct].join('.');
    expect(() => box.decrypt(short, 'monitor-1')).toThrow(SecretBoxError);
  });

  it.each([8, 16])('refuses a %i-byte IV', (n) => {
    const other = [v, kid, randomBytes(n).toString('base64url'), tag, ct].join('.');
    expect(() => box.decrypt(other, 'monitor-1')).toThrow(SecretBoxError);
  });
});

/** A key id in the ciphertext; old keys decrypt, the current one encrypts; v1 still decrypts. */
describe('secret box key rotation', () => {
  const oldKey = randomBytes(32);
  const newKey = randomBytes(32);
  /** the format before key ids: `v1.<iv>.<tag>.<ct>` */
  const v1 = (key: Buffer, plaintext: string, ad: string) => {
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', key, iv, { authTagLength: 16 });
    c.setAAD(Buffer.from(ad));
    const ct = Buffer.concat([c.update(plaintext, 'utf8'), c.final()]);
    return ['v1', iv, c.getAuthTag(), ct].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.');
  };

  it('writes the key id; a box with the old key among its old keys decrypts, the new key encrypts', () => {
    const before = createSecretBox(oldKey).encrypt('whsec_a', 'm-1');
    expect(before.split('.').slice(0, 2)).toEqual(['v2', encryptionKeyId(oldKey)]);
    const ring = createSecretBox(newKey.toString('base64'), [oldKey.toString('hex')]);
    expect(ring.decrypt(before, 'm-1')).toBe('whsec_a');
    expect(ring.isCurrent(before)).toBe(false);
    const after = ring.encrypt('whsec_a', 'm-1');
    expect(after.split('.')[1]).toBe(encryptionKeyId(newKey));
    expect(ring.isCurrent(after)).toBe(true);
    // without the old key: refused, naming the key id it needs (not the key)
    expect(() => createSecretBox(newKey).decrypt(before, 'm-1')).toThrow(
      new RegExp(`encrypted with key ${encryptionKeyId(oldKey)}`),
    );
  });

  it('old ciphertexts without a key id (v1) still decrypt, under the current or an old key', () => {
    expect(createSecretBox(oldKey).decrypt(v1(oldKey, 'whsec_b', 'm-2'), 'm-2')).toBe('whsec_b');
    const ring = createSecretBox(newKey, [oldKey]);
    expect(ring.decrypt(v1(oldKey, 'whsec_b', 'm-2'), 'm-2')).toBe('whsec_b');
    expect(ring.isCurrent(v1(newKey, 'whsec_b', 'm-2'))).toBe(false);
    expect(() => ring.decrypt(v1(randomBytes(32), 'whsec_b', 'm-2'), 'm-2')).toThrow(SecretBoxError);
  });

  it('SECRETS_ENCRYPTION_KEYS_OLD: every entry a key, no empty entry', () => {
    const k = oldKey.toString('base64');
    expect(encryptionKeyListField().parse(`${k}, ${newKey.toString('hex')}`)).toHaveLength(2);
    for (const bad of [`${k},`, `${k},,${k}`, `${k},short`, '']) {
      expect(encryptionKeyListField().safeParse(bad).success).toBe(false);
    }
  });
});
