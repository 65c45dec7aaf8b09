import { randomUUID } from 'node:crypto';
import { createCursorCodec } from './streamCursor';

describe('stream cursor', () => {
  const codec = createCursorCodec('secret-for-tests');
  const account = randomUUID();
  const hitId = randomUUID();

  it('round-trips a commit-order position for its account only', () => {
    const pos = { xid: 18_446_744_073_709_551_615n, hitId };
    const cursor = codec.encode(account, pos);
    expect(cursor).toMatch(/^h2\.18446744073709551615\./);
    expect(codec.decode(account, cursor)).toEqual(pos);
    expect(codec.decode(randomUUID(), cursor)).toBeNull();
    expect(createCursorCodec('another secret').decode(account, cursor)).toBeNull();
  });

  it('refuses forged, malformed, out-of-range and former-version cursors', () => {
    const cursor = codec.encode(account, { xid: 1234n, hitId });
    const mac = cursor.split('.')[3]!;
    expect(codec.decode(account, cursor.replace('h2.1234.', 'h2.1235.'))).toBeNull();
    expect(codec.decode(account, `h1.1234.${hitId}.${mac}`)).toBeNull();
    expect(codec.decode(account, `h2.18446744073709551616.${hitId}.${mac}`)).toBeNull();
    expect(codec.decode(account, `h2.-1.${hitId}.${mac}`)).toBeNull();
    expect(codec.decode(account, 'garbage')).toBeNull();
  });
});
