// The default import is node's own crypto module object, so a spy on it is seen by the code under test.
import crypto, { createHmac } from 'node:crypto';
import {
  CONTENT_TYPE,
  HEADER_DELIVERY,
  HEADER_EVENT,
  HEADER_SIGNATURE,
  HEADER_TIMESTAMP,
  USER_AGENT,
  WebhookVerificationError,
  sign,
  signedHeaders,
  verify,
  type HeadersInput,
  type VerifyInput,
  type WebhookVerificationReason,
} from './index';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const TS = 1_700_000_000;
const BODY = '{"event":"monitor.test","monitor":{"id":"mon_1","targetUsername":"jack","keywords":null},"test":true}';

/** Independent reference: HMAC-SHA256 over `${ts}.` + body bytes, with the secret's UTF-8 bytes as key. */
function reference(secret: string, ts: string | number, body: Buffer | string): string {
  const bytes = Buffer.concat([
    Buffer.from(`${ts}.`, 'utf8'),
    Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8'),
  ]);
  return 'sha256=' + createHmac('sha256', Buffer.from(secret, 'utf8')).update(bytes).digest('hex');
}

function headersFor(signature: string, timestamp: string | number = TS): Record<string, string> {
  return { 'x-service-timestamp': String(timestamp), 'x-service-signature': signature };
}

function check(overrides: Partial<VerifyInput> = {}): void {
  verify({ secret: SECRET, body: BODY, headers: headersFor(sign(SECRET, TS, BODY)), now: TS, ...overrides });
}

function reasonOf(fn: () => void): WebhookVerificationReason {
  try {
    fn();
  } catch (err) {
    if (err instanceof WebhookVerificationError) return err.reason;
    throw err;
  }
  throw new Error('expected a WebhookVerificationError, nothing was thrown');
}

describe('sign: fixed vectors', () => {
  it('matches a digest computed with openssl', () => {
    // printf '%s' '1700000000.{"event":"monitor.test","monitor":{"id":"mon_1","targetUsername":"jack","keywords":null},"test":true}' \
    //   | openssl dgst -sha256 -hmac 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'
    // (cross-checked with Python's hmac.new(secret, msg, hashlib.sha256).hexdigest())
    expect(sign(SECRET, TS, BODY)).toBe('sha256=18850141679d876e53a0351cd8b333461b7c51d833e543903b1281478974be82');
    expect(sign(SECRET, TS, Buffer.from(BODY))).toBe(
      'sha256=18850141679d876e53a0351cd8b333461b7c51d833e543903b1281478974be82',
    );
  });

  it('uses UTF-8 bytes of a non-ASCII secret and body (openssl vector)', () => {
    // printf '%s' '1700000000.{"text":"héllo 🌍 café"}' | openssl dgst -sha256 -hmac 'sëcret-🔑'   (UTF-8 locale)
    const expected = 'sha256=e86d790d7cbb566da8d4dd01aba1a089e67a9c1aa98ccddd8315e27214145639';
    expect(sign('sëcret-🔑', TS, '{"text":"héllo 🌍 café"}')).toBe(expected);
    expect(sign('sëcret-🔑', TS, Buffer.from('{"text":"héllo 🌍 café"}', 'utf8'))).toBe(expected);
  });

  it('signs exact bytes that are not valid UTF-8 (openssl vector)', () => {
    // printf '1700000000.\xff\xfe\x00\x80abc' | openssl dgst -sha256 -hmac 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'
    const body = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0x61, 0x62, 0x63]);
    expect(sign(SECRET, TS, body)).toBe('sha256=c64fe827170c9fe2b9e36825f8bfb712bed1d0ae95b4a66a49d35426215f8287');
    // Decoding to a string first would replace the bad bytes and change the signature.
    expect(sign(SECRET, TS, body.toString('utf8'))).not.toBe(sign(SECRET, TS, body));
  });

  it('matches a direct createHmac computation for assorted inputs', () => {
    const cases: [string, number, Uint8Array | string][] = [
      ['k', 0, ''],
      ['another secret with spaces', 1_234_567_890, '{"a":1}'],
      [SECRET, TS, Buffer.from(crypto.randomBytes(4096))],
      ['ключ', TS + 1, 'emoji 🎉 and CJK 漢字 and \u0000 NUL'],
      [SECRET, TS, new Uint8Array([1, 2, 3, 255])],
    ];
    for (const [secret, ts, body] of cases) {
      const asBuffer = typeof body === 'string' ? body : Buffer.from(body);
      expect(sign(secret, ts, body)).toBe(reference(secret, ts, asBuffer));
    }
  });

  it('produces sha256= followed by 64 lowercase hex characters', () => {
    expect(sign(SECRET, TS, BODY)).toMatch(/^sha256=[0-9a-f]{64}$/);
  });

  it('refuses programming errors with TypeError', () => {
    expect(() => sign('', TS, BODY)).toThrow(TypeError);
    expect(() => sign(SECRET, 1.5, BODY)).toThrow(/timestamp/);
    expect(() => sign(SECRET, -1, BODY)).toThrow(/timestamp/);
    expect(() => sign(SECRET, Number.NaN, BODY)).toThrow(/timestamp/);
    expect(() => sign(SECRET, Infinity, BODY)).toThrow(/timestamp/);
    expect(() => sign(SECRET, TS, { event: 'monitor.test' } as unknown as string)).toThrow(/raw request body/);
  });
});

describe('signedHeaders', () => {
  it('returns every header a sender must send, with the exact names and values', () => {
    const headers = signedHeaders({
      secret: SECRET,
      event: 'monitor.test',
      deliveryId: 'dlv_123',
      body: BODY,
      timestamp: TS,
    });
    expect(headers).toEqual({
      'Content-Type': 'application/json',
      'User-Agent': 'Service-Webhook/1.0',
      'X-Service-Event': 'monitor.test',
      'X-Service-Timestamp': '1700000000',
      'X-Service-Signature': 'sha256=18850141679d876e53a0351cd8b333461b7c51d833e543903b1281478974be82',
      'X-Service-Delivery': 'dlv_123',
      // Standard Webhooks, besides the X-Service-* headers (standard.test.ts verifies them with the standardwebhooks package)
      'webhook-id': 'dlv_123',
      'webhook-timestamp': '1700000000',
      'webhook-signature': expect.stringMatching(/^v1,[A-Za-z0-9+/]{43}=$/),
    });
    expect(Object.keys(headers).sort()).toEqual(
      [
        'Content-Type',
        'User-Agent',
        HEADER_EVENT,
        HEADER_TIMESTAMP,
        HEADER_SIGNATURE,
        HEADER_DELIVERY,
        'webhook-id',
        'webhook-timestamp',
        'webhook-signature',
      ].sort(),
    );
    expect(headers['Content-Type']).toBe(CONTENT_TYPE);
    expect(headers['User-Agent']).toBe(USER_AGENT);
  });

  it('defaults the timestamp to the current Unix second, and the result verifies', () => {
    const before = Math.floor(Date.now() / 1000);
    const headers = signedHeaders({ secret: SECRET, event: 'monitor.hit', deliveryId: 'd-1', body: BODY });
    const after = Math.floor(Date.now() / 1000);
    const ts = Number(headers['X-Service-Timestamp']);
    expect(headers['X-Service-Timestamp']).toMatch(/^\d+$/);
    expect(ts).toBeGreaterThanOrEqual(before);
    expect(ts).toBeLessThanOrEqual(after);
    expect(() => verify({ secret: SECRET, body: BODY, headers })).not.toThrow();
  });

  it('refuses unknown events and delivery ids that are not header-safe', () => {
    const base = { secret: SECRET, body: BODY, timestamp: TS };
    expect(() => signedHeaders({ ...base, event: 'monitor.other' as 'monitor.hit', deliveryId: 'd' })).toThrow(/event/);
    expect(() => signedHeaders({ ...base, event: 'monitor.hit', deliveryId: '' })).toThrow(/deliveryId/);
    expect(() => signedHeaders({ ...base, event: 'monitor.hit', deliveryId: 'a\r\nX-Evil: 1' })).toThrow(/deliveryId/);
    expect(() => signedHeaders({ ...base, event: 'monitor.hit', deliveryId: 'has space' })).toThrow(/deliveryId/);
    expect(() => signedHeaders({ ...base, secret: '', event: 'monitor.hit', deliveryId: 'd' })).toThrow(/secret/);
  });
});

describe('verify', () => {
  it('accepts a valid delivery, with the body as a string or as the same bytes', () => {
    expect(() => check()).not.toThrow();
    expect(() => check({ body: Buffer.from(BODY, 'utf8') })).not.toThrow();
    expect(() => check({ body: new Uint8Array(Buffer.from(BODY, 'utf8')) })).not.toThrow();
  });

  it('accepts the headers signedHeaders produced (canonical casing)', () => {
    const headers = signedHeaders({ secret: SECRET, event: 'monitor.hit', deliveryId: 'x', body: BODY, timestamp: TS });
    expect(() => verify({ secret: SECRET, body: BODY, headers, now: TS })).not.toThrow();
  });

  it('rejects a tampered body, timestamp, signature or a wrong secret', () => {
    const sig = sign(SECRET, TS, BODY);
    expect(reasonOf(() => check({ body: BODY.replace('jack', 'jacl') }))).toBe('SIGNATURE_MISMATCH');
    expect(reasonOf(() => check({ body: BODY + ' ' }))).toBe('SIGNATURE_MISMATCH');
    expect(reasonOf(() => check({ headers: headersFor(sig, TS + 1) }))).toBe('SIGNATURE_MISMATCH');
    const flipped = sig.slice(0, -1) + (sig.endsWith('0') ? '1' : '0');
    expect(reasonOf(() => check({ headers: headersFor(flipped) }))).toBe('SIGNATURE_MISMATCH');
    expect(reasonOf(() => check({ secret: SECRET + 'x' }))).toBe('SIGNATURE_MISMATCH');
    // The signature of the same body at another timestamp does not carry over.
    expect(reasonOf(() => check({ headers: headersFor(sign(SECRET, TS - 1, BODY)) }))).toBe('SIGNATURE_MISMATCH');
  });

  it('signs the timestamp header text exactly as received', () => {
    // A sender that wrote "01700000000" signed that text; a verifier that re-formatted the number would fail.
    const text = '01700000000';
    const sig = reference(SECRET, text, BODY);
    expect(() => check({ headers: headersFor(sig, text) })).not.toThrow();
    expect(reasonOf(() => check({ headers: headersFor(sig, TS) }))).toBe('SIGNATURE_MISMATCH');
  });

  it('throws WebhookVerificationError with a clear message and the INVALID_SIGNATURE code', () => {
    let caught: unknown;
    try {
      check({ body: 'tampered' });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(WebhookVerificationError);
    expect(caught).toBeInstanceOf(Error);
    const err = caught as WebhookVerificationError;
    expect(err.name).toBe('WebhookVerificationError');
    expect(err.code).toBe('INVALID_SIGNATURE');
    expect(err.message).toBe('Signature mismatch');
  });

  describe('timestamp tolerance (300 s both ways)', () => {
    const sig = sign(SECRET, TS, BODY);
    const at = (now: number | Date, toleranceSec?: number) => () =>
      verify({ secret: SECRET, body: BODY, headers: headersFor(sig), now, toleranceSec });

    it('accepts 299 s and exactly 300 s of skew in either direction', () => {
      expect(at(TS + 299)).not.toThrow();
      expect(at(TS - 299)).not.toThrow();
      expect(at(TS + 300)).not.toThrow();
      expect(at(TS - 300)).not.toThrow();
    });

    it('rejects 301 s of skew: too old when the receiver is ahead, too new when behind', () => {
      expect(reasonOf(at(TS + 301))).toBe('TIMESTAMP_TOO_OLD');
      expect(reasonOf(at(TS - 301))).toBe('TIMESTAMP_TOO_NEW');
      expect(at(TS + 301)).toThrow('Timestamp too old: 301 s before now (tolerance 300 s)');
      expect(at(TS - 301)).toThrow('Timestamp too new: 301 s ahead of now (tolerance 300 s)');
      expect(reasonOf(at(TS + 300.5))).toBe('TIMESTAMP_TOO_OLD');
    });

    it('checks the timestamp even when the signature is valid (no replay of old deliveries)', () => {
      expect(reasonOf(at(TS + 86_400))).toBe('TIMESTAMP_TOO_OLD');
    });

    it('accepts now as a Date and honours a custom tolerance', () => {
      expect(at(new Date((TS + 299) * 1000))).not.toThrow();
      expect(reasonOf(at(new Date((TS + 301) * 1000)))).toBe('TIMESTAMP_TOO_OLD');
      expect(at(TS + 10, 10)).not.toThrow();
      expect(reasonOf(at(TS + 11, 10))).toBe('TIMESTAMP_TOO_OLD');
      expect(reasonOf(at(TS - 11, 10))).toBe('TIMESTAMP_TOO_NEW');
    });

    it('uses the real clock when now is not given', () => {
      const nowTs = Math.floor(Date.now() / 1000);
      const headers = headersFor(sign(SECRET, nowTs, BODY), nowTs);
      expect(() => verify({ secret: SECRET, body: BODY, headers })).not.toThrow();
      const old = nowTs - 3600;
      const stale = headersFor(sign(SECRET, old, BODY), old);
      expect(reasonOf(() => verify({ secret: SECRET, body: BODY, headers: stale }))).toBe('TIMESTAMP_TOO_OLD');
    });
  });

  it('rejects timestamps that are not a finite decimal number of seconds', () => {
    for (const bad of [
      'abc',
      '1e9',
      '0x10',
      'NaN',
      'Infinity',
      '-1700000000',
      '1700000000abc',
      '17 00',
      '9'.repeat(400),
    ]) {
      const sig = reference(SECRET, bad, BODY); // correctly signed, so only the timestamp check can refuse it
      expect({ bad, reason: reasonOf(() => check({ headers: headersFor(sig, bad) })) }).toEqual({
        bad,
        reason: 'INVALID_TIMESTAMP',
      });
    }
    expect(() => check({ headers: headersFor(sign(SECRET, TS, BODY), 'abc') })).toThrow(
      'Invalid X-Service-Timestamp header: expected Unix time in seconds',
    );
  });

  it('rejects signatures of the wrong shape before comparing', () => {
    const hex = sign(SECRET, TS, BODY).slice('sha256='.length);
    const bad = [
      'sha256=' + hex.slice(0, 63), // 63 hex chars
      'sha256=' + hex + 'a', // 65 hex chars
      'sha256=' + hex.slice(0, 62) + 'zz', // right length, not hex
      'sha256=' + hex.slice(0, 32), // half length
      hex, // no prefix
      'sha1=' + hex,
      'SHA256=' + hex,
      'sha256:' + hex,
      `sha256=${hex}, sha256=${hex}`, // node joins repeated headers with ", "
      'sha256=',
    ];
    for (const signature of bad) {
      expect({ signature, reason: reasonOf(() => check({ headers: headersFor(signature) })) }).toEqual({
        signature,
        reason: 'MALFORMED_SIGNATURE',
      });
    }
    expect(() => check({ headers: headersFor('sha256=abc') })).toThrow(
      'Malformed X-Service-Signature header: expected sha256= followed by 64 hex characters',
    );
  });

  it('compares with crypto.timingSafeEqual, and only for well-formed signatures', () => {
    const spy = jest.spyOn(crypto, 'timingSafeEqual');
    try {
      check();
      expect(spy).toHaveBeenCalledTimes(1);
      expect(reasonOf(() => check({ body: 'x' }))).toBe('SIGNATURE_MISMATCH');
      expect(spy).toHaveBeenCalledTimes(2);
      spy.mockClear();
      expect(reasonOf(() => check({ headers: headersFor('sha256=' + 'g'.repeat(64)) }))).toBe('MALFORMED_SIGNATURE');
      expect(spy).not.toHaveBeenCalled();
    } finally {
      spy.mockRestore();
    }
  });

  it('accepts upper-case hex digits (the digest bytes are compared)', () => {
    const sig = sign(SECRET, TS, BODY);
    expect(() => check({ headers: headersFor('sha256=' + sig.slice(7).toUpperCase()) })).not.toThrow();
  });

  it('verifies Unicode bodies, and non-UTF-8 bodies on their exact bytes', () => {
    const unicode = '{"text":"héllo 🌍 café — 漢字 \\u0000","n":1}';
    expect(() => check({ body: unicode, headers: headersFor(sign(SECRET, TS, unicode)) })).not.toThrow();
    expect(() =>
      check({ body: Buffer.from(unicode, 'utf8'), headers: headersFor(reference(SECRET, TS, unicode)) }),
    ).not.toThrow();

    const binary = Buffer.from([0x7b, 0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, 0x7d]); // invalid UTF-8 sequences
    const sig = reference(SECRET, TS, binary);
    expect(() => check({ body: binary, headers: headersFor(sig) })).not.toThrow();
    // The same bytes round-tripped through a string are different bytes and must not verify.
    expect(reasonOf(() => check({ body: binary.toString('utf8'), headers: headersFor(sig) }))).toBe(
      'SIGNATURE_MISMATCH',
    );
    const flipped = Buffer.from(binary);
    flipped[1] = 0xfd;
    expect(reasonOf(() => check({ body: flipped, headers: headersFor(sig) }))).toBe('SIGNATURE_MISMATCH');
  });

  it('names the missing header', () => {
    const sig = sign(SECRET, TS, BODY);
    expect(() => check({ headers: { 'x-service-timestamp': String(TS) } })).toThrow(
      'Missing X-Service-Signature header',
    );
    expect(() => check({ headers: { 'x-service-signature': sig } })).toThrow('Missing X-Service-Timestamp header');
    expect(reasonOf(() => check({ headers: {} }))).toBe('MISSING_HEADER');
    expect(reasonOf(() => check({ headers: { ...headersFor(sig), 'x-service-signature': '' } }))).toBe(
      'MISSING_HEADER',
    );
    expect(reasonOf(() => check({ headers: { ...headersFor(sig), 'x-service-timestamp': '   ' } }))).toBe(
      'MISSING_HEADER',
    );
    expect(reasonOf(() => check({ headers: { ...headersFor(sig), 'x-service-signature': [] } }))).toBe(
      'MISSING_HEADER',
    );
    expect(reasonOf(() => check({ headers: { ...headersFor(sig), 'x-service-signature': undefined } }))).toBe(
      'MISSING_HEADER',
    );
  });

  it('looks headers up case-insensitively and accepts string | string[] values', () => {
    const sig = sign(SECRET, TS, BODY);
    const variants: HeadersInput[] = [
      { 'x-service-timestamp': String(TS), 'x-service-signature': sig },
      { 'X-Service-Timestamp': String(TS), 'X-Service-Signature': sig },
      { 'X-SERVICE-TIMESTAMP': String(TS), 'X-SERVICE-SIGNATURE': sig },
      { 'x-SeRvIcE-tImEsTaMp': String(TS), 'X-service-signature': sig },
      { 'x-service-timestamp': [String(TS)], 'x-service-signature': [sig] },
      { 'x-service-timestamp': ` ${TS} `, 'x-service-signature': ` ${sig}\t` }, // surrounding whitespace is not part of a value
      {
        'content-type': 'application/json',
        'x-service-timestamp': String(TS),
        'x-service-signature': sig,
        'x-other': ['a', 'b'],
      },
    ];
    for (const headers of variants) {
      expect(() => check({ headers })).not.toThrow();
    }
  });

  it('refuses a header given more than once', () => {
    const sig = sign(SECRET, TS, BODY);
    expect(
      reasonOf(() => check({ headers: { 'x-service-timestamp': String(TS), 'x-service-signature': [sig, sig] } })),
    ).toBe('DUPLICATE_HEADER');
    expect(() =>
      check({ headers: { 'x-service-timestamp': String(TS), 'x-service-signature': sig, 'X-Service-Signature': sig } }),
    ).toThrow('Multiple X-Service-Signature headers');
    expect(
      reasonOf(() =>
        check({ headers: { 'x-service-timestamp': [String(TS), String(TS)], 'x-service-signature': sig } }),
      ),
    ).toBe('DUPLICATE_HEADER');
  });

  it('accepts any of several secrets during a rotation', () => {
    const oldSecret = 'whsec_old';
    const newSecret = 'whsec_new';
    const signedWithOld = headersFor(sign(oldSecret, TS, BODY));
    const signedWithNew = headersFor(sign(newSecret, TS, BODY));
    expect(() => check({ secret: [newSecret, oldSecret], headers: signedWithOld })).not.toThrow();
    expect(() => check({ secret: [newSecret, oldSecret], headers: signedWithNew })).not.toThrow();
    expect(reasonOf(() => check({ secret: [newSecret, 'whsec_other'], headers: signedWithOld }))).toBe(
      'SIGNATURE_MISMATCH',
    );
  });

  it('refuses programming errors with TypeError rather than a verification failure', () => {
    expect(() => check({ secret: '' })).toThrow(TypeError);
    expect(() => check({ secret: [] })).toThrow(TypeError);
    expect(() => check({ secret: [SECRET, ''] })).toThrow(TypeError);
    expect(() => check({ body: JSON.parse(BODY) as string })).toThrow(/raw request body/);
    expect(() => check({ toleranceSec: -1 })).toThrow(/toleranceSec/);
    expect(() => check({ toleranceSec: Number.NaN })).toThrow(/toleranceSec/);
    expect(() => check({ now: Number.NaN })).toThrow(/now/);
    expect(() => check({ now: new Date('invalid') })).toThrow(/now/);
  });
});
