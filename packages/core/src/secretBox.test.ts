/** Issue 20, abuse item 8: decryption requires the full 16-byte GCM tag and a 12-byte IV. */
import { randomBytes } from 'node:crypto';
import { createSecretBox, SecretBoxError } from './secretBox';

describe('secret box tag and IV lengths', () => {
  const box = createSecretBox(randomBytes(32));
  const stored = box.encrypt('whsec_secret', 'monitor-1');
  const [v, iv, tag, ct] = stored.split('.') as [string, string, string, string];
  const b = (s: string) => Buffer.from(s, 'base64url');

  it('round-trips a secret', () => {
    expect(box.decrypt(stored, 'monitor-1')).toBe('whsec_secret');
    expect(b(iv)).toHaveLength(12);
    expect(b(tag)).toHaveLength(16);
  });

  it.each([1, 4, 8, 12, 15])('refuses a tag truncated to %i bytes', (n) => {
    const short = [v, iv, b(tag).subarray(0, n).toString('base64url'), ct].join('.');
    expect(() => box.decrypt(short, 'monitor-1')).toThrow(SecretBoxError);
  });

  it.each([8, 16])('refuses a %i-byte IV', (n) => {
    const other = [v, randomBytes(n).toString('base64url'), tag, ct].join('.');
    expect(() => box.decrypt(other, 'monitor-1')).toThrow(SecretBoxError);
  });
});
