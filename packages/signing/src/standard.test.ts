/**
 * Standard Webhooks headers beside the X-Service-* headers of docs/webhooks.md: the official `standardwebhooks` package
 * verifies what signedHeaders writes, with the secret in its `whsec_` form; the X-Service-* headers are
 * unchanged; during a rotation webhook-signature carries a signature by each secret.
 */
import { Webhook, WebhookVerificationError as StdError } from 'standardwebhooks';
import { sign, signedHeaders, standardSignature, standardWebhookSecret, verify } from './index';

const body = Buffer.from('{"event":"monitor.hit","text":"héllo 🚀"}', 'utf8');
const now = Math.floor(Date.now() / 1000);

describe('Standard Webhooks headers', () => {
  it('the standardwebhooks package verifies a delivery with the whsec_ form of the secret', () => {
    const secret = 'whs_0123456789abcdefghijklmnopqrstuv';
    const h = signedHeaders({ secret, event: 'monitor.hit', deliveryId: 'dlv_1', body, timestamp: now });
    expect(h['webhook-id']).toBe('dlv_1');
    expect(h['webhook-id']).toBe(h['X-Service-Delivery']);
    expect(h['webhook-timestamp']).toBe(String(now));
    expect(h['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(standardWebhookSecret(secret)).toMatch(/^whsec_/);
    const wh = new Webhook(standardWebhookSecret(secret));
    expect(wh.verify(body, h)).toEqual(JSON.parse(body.toString('utf8')));
    // the package's own signature is the one we send
    expect(wh.sign('dlv_1', new Date(now * 1000), body)).toBe(h['webhook-signature']);
    // another secret, another body or another id fails
    expect(() => new Webhook(standardWebhookSecret('other-secret')).verify(body, h)).toThrow(StdError);
    expect(() => wh.verify(Buffer.from('{}'), h)).toThrow(StdError);
    expect(() => wh.verify(body, { ...h, 'webhook-id': 'dlv_2' })).toThrow(StdError);
  });

  it('the X-Service-* headers are exactly as before', () => {
    const secret = 'spec-secret';
    const h = signedHeaders({ secret, event: 'monitor.test', deliveryId: 'd', body, timestamp: now });
    expect(h['X-Service-Signature']).toBe(sign(secret, now, body));
    expect(h['X-Service-Timestamp']).toBe(String(now));
    expect(() => verify({ secret, body, headers: h })).not.toThrow();
  });

  it('during a rotation webhook-signature carries both; X-Service-Signature the one given', () => {
    const [oldSecret, newSecret] = ['old-secret-value', 'new-secret-value'];
    const h = signedHeaders({
      secret: oldSecret,
      standardSecrets: [newSecret, oldSecret],
      event: 'monitor.hit',
      deliveryId: 'd1',
      body,
      timestamp: now,
    });
    expect(h['webhook-signature'].split(' ')).toEqual([
      standardSignature(newSecret, 'd1', now, body),
      standardSignature(oldSecret, 'd1', now, body),
    ]);
    expect(new Webhook(standardWebhookSecret(newSecret)).verify(body, h)).toBeTruthy();
    expect(new Webhook(standardWebhookSecret(oldSecret)).verify(body, h)).toBeTruthy();
    expect(() => verify({ secret: oldSecret, body, headers: h })).not.toThrow();
    expect(() => verify({ secret: newSecret, body, headers: h })).toThrow();
  });
});
