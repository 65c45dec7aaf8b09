/**
 * POST /api/v1/monitors/{id}/recover (docs/webhooks.md, delivery rule 12) with hostile input, end
 * to end through the real gateway and read-api processes on PostgreSQL: a window reaching before
 * the delivery log's retention, an `until` before `since`, dates that are not ISO 8601 times or
 * not real ones, unknown, repeated or too many outcomes, unknown fields and a body over the
 * limit. Each is a 400 (413 for the size) naming the field, and nothing is queued: the monitor's
 * failed delivery is still recoverable afterwards. Every answer is checked against the served
 * OpenAPI document.
 */
import { createSecretBox } from '@sts/core';
import { createMonitor, startApiStack, type ApiStack, type MonitorFixture } from '@sts/testing';
import type { openApiDocument } from './http/openapi';
import { validate } from '../test/schemaCheck';

type Doc = typeof openApiDocument;
const TEMPLATE = '/api/v1/monitors/{id}/recover';
const DAY = 86_400_000;

let stack: ApiStack;
let doc: Doc;
let manageKey: string;
let monitor: MonitorFixture;

interface Answer {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers of several shapes
  body: any;
}

async function recover(body: unknown, raw?: string): Promise<Answer> {
  const r = await fetch(`${stack.url}/api/v1/monitors/${monitor.id}/recover`, {
    method: 'POST',
    headers: { authorization: `Bearer ${manageKey}`, 'content-type': 'application/json' },
    body: raw ?? JSON.stringify(body),
  });
  const answer: unknown = await r.json();
  const op = (doc.paths as unknown as Record<string, { post: { responses: Record<string, unknown> } }>)[TEMPLATE]!.post;
  const spec = (op.responses[String(r.status)] ?? op.responses.default) as
    { content: { 'application/json': { schema: unknown } } } | undefined;
  expect([r.status, spec === undefined]).toEqual([r.status, false]);
  expect([r.status, validate(spec!.content['application/json'].schema, answer, doc)]).toEqual([r.status, []]);
  return { status: r.status, body: answer };
}

const ago = (ms: number) => new Date(Date.now() - ms).toISOString();

beforeAll(async () => {
  stack = await startApiStack();
  doc = (await (await fetch(`${stack.url}/api/v1/openapi.json`)).json()) as Doc;
  const account = await stack.account('starter', 'manage');
  manageKey = account.key;
  monitor = await createMonitor(stack.db, createSecretBox(stack.secretsKey), {
    accountId: account.accountId,
    targetUsername: 'NASA',
    keywords: ['launch'],
  });
  const hit = await stack.db.hit.create({
    data: {
      monitorId: monitor.id,
      tweetId: '7000001',
      tweetText: 'launch',
      tweetAuthorId: '9',
      tweetAuthorUsername: 'NASA',
      tweetCreatedAt: new Date(Date.now() - 3_600_000),
    },
  });
  await stack.db.deliveryAttempt.create({
    data: {
      monitorId: monitor.id,
      hitId: hit.id,
      event: 'monitor.hit',
      deliveryId: 'recover-input-1',
      url: 'https://hooks.test/r',
      outcome: 'failed',
      createdAt: new Date(Date.now() - 60_000),
    },
  });
}, 90_000);

afterAll(async () => {
  await stack?.stop();
});

/** a refusal: the status, the code and the field named */
function refused(r: Answer, param: string, status = 400): void {
  expect([r.status, r.body.code, r.body.param]).toEqual([status, 'INVALID_REQUEST', param]);
  expect(typeof r.body.error).toBe('string');
}

describe('POST /api/v1/monitors/{id}/recover with hostile input', () => {
  it('refuses a window before the delivery log keeps anything, and until before since, naming the field', async () => {
    for (const since of ['1970-01-01T00:00:00Z', '0001-01-01T00:00:00Z', ago(400 * DAY)]) {
      const r = await recover({ since });
      refused(r, 'since');
      expect(r.body.error).toMatch(/delivery log/);
    }
    refused(await recover({ since: ago(60 * 60_000), until: ago(2 * 60 * 60_000) }), 'until');
    refused(await recover({ since: new Date(Date.now() + DAY).toISOString() }), 'since');
  });

  it('refuses dates that are not ISO 8601 times or not real ones', async () => {
    for (const since of [
      'yesterday',
      '2026-12-01',
      '2026-13-01T00:00:00Z',
      '2026-02-30T00:00:00Z',
      '2026-12-01T25:00:00Z',
      '0000-01-01T00:00:00Z',
      '+275760-09-13T00:00:00Z',
      1764547200000,
      null,
      { at: 'now' },
    ]) {
      const r = await recover({ since });
      expect([JSON.stringify(since), r.status, r.body.code, r.body.param]).toEqual([
        JSON.stringify(since),
        400,
        'INVALID_REQUEST',
        'since',
      ]);
    }
    refused(await recover({ since: ago(60_000), until: 'later' }), 'until');
    refused(await recover({}), 'since');
  });

  it('refuses unknown, repeated or too many outcomes, and unknown fields', async () => {
    const since = ago(60 * 60_000);
    refused(await recover({ since, outcomes: ['delivered'] }), 'outcomes.0');
    refused(await recover({ since, outcomes: ['failed', 'failed'] }), 'outcomes');
    refused(await recover({ since, outcomes: Array.from({ length: 1000 }, () => 'failed') }), 'outcomes');
    refused(await recover({ since, outcomes: 'failed' }), 'outcomes');
    refused(await recover({ since, outcomes: [] }), 'outcomes');
    const extra = await recover({ since, monitor_id: monitor.id });
    expect([extra.status, extra.body.code]).toEqual([400, 'INVALID_REQUEST']);
    expect(extra.body.error).toContain('monitor_id');
  });

  it('refuses a body over the limit (413) and one that is not JSON', async () => {
    const big = await recover(undefined, JSON.stringify({ since: ago(60_000), pad: 'x'.repeat(64 * 1024) }));
    expect([big.status, big.body.code]).toEqual([413, 'PAYLOAD_TOO_LARGE']);
    const broken = await recover(undefined, '{"since": ');
    expect([broken.status, broken.body.code]).toEqual([400, 'INVALID_REQUEST']);
  });

  it('queued nothing on any of them: the failed delivery is still there to recover', async () => {
    const ok = await recover({ since: ago(60 * 60_000), outcomes: ['failed'] });
    expect([ok.status, ok.body.data.delivery_ids]).toEqual([202, ['recover-input-1']]);
  });
});
