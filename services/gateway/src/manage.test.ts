/**
 * The management API end to end: key scopes, the monitor, webhook and delivery
 * endpoints, Idempotency-Key and hostile input, through the real gateway and read-api processes on
 * PostgreSQL, Redis and RabbitMQ. Every answer is checked against the served OpenAPI document.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createSecretBox } from '@sts/core';
import { Redis } from 'ioredis';
import { createSocialTweet, createSocialUser } from '@sts/social';
import { rawChannel, startApiStack, type ApiStack } from '@sts/testing';
import type { openApiDocument } from './http/openapi';
import { validate } from '../test/schemaCheck';

type Doc = typeof openApiDocument;
interface Res {
  status: number;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers of many shapes
  body: any;
}

let stack: ApiStack;
let doc: Doc;
let messages: { key: string; body: Record<string, unknown> }[];
let closeChannel: () => Promise<void>;

beforeAll(async () => {
  stack = await startApiStack({ readApiEnv: { WEBHOOK_TEST_MAX_PER_MIN: '50', REDELIVERY_MAX_PER_HOUR: '4' } });
  doc = (await (await fetch(`${stack.url}/api/v1/openapi.json`)).json()) as Doc;
  // every event the management calls publish, as a subscriber of monitor.events sees it
  const raw = await rawChannel(stack.amqpUrl);
  closeChannel = raw.close;
  await raw.ch.assertExchange('monitor.events', 'topic', { durable: true });
  const q = await raw.ch.assertQueue('', { exclusive: true });
  await raw.ch.bindQueue(q.queue, 'monitor.events', '#');
  messages = [];
  await raw.ch.consume(q.queue, (m) => {
    if (m)
      messages.push({ key: m.fields.routingKey, body: JSON.parse(m.content.toString()) as Record<string, unknown> });
  });
  await createSocialUser(stack.db, { username: 'alice', name: 'Alice', followersCount: 3, verified: false });
  for (const text of ['rockets are go', 'just lunch', 'another rockets day'])
    await createSocialTweet(stack.db, { authorUsername: 'alice', text });
}, 90_000);

afterAll(async () => {
  await closeChannel?.();
  await stack?.stop();
});

/** the schema the document names for this answer (path template, method, status) */
function schemaFor(template: string, method: string, status: number): unknown {
  const op = (doc.paths as unknown as Record<string, Record<string, { responses: Record<string, unknown> }>>)[
    template
  ]?.[method.toLowerCase()];
  const response = op?.responses[String(status)] as { content?: { 'application/json': { schema: unknown } } };
  if (!response?.content) throw new Error(`the document has no ${status} for ${method} ${template}`);
  return response.content['application/json'].schema;
}

async function call(
  key: string,
  method: string,
  path: string,
  template: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Res> {
  const init: RequestInit = { method, headers: { authorization: `Bearer ${key}`, ...headers } };
  if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    (init.headers as Record<string, string>)['content-type'] ??= 'application/json';
  }
  const r = await fetch(`${stack.url}${path}`, init);
  const text = await r.text();
  const res = { status: r.status, headers: r.headers, body: text ? (JSON.parse(text) as unknown) : undefined };
  // the contract: every answer is what the served document says
  expect([method, path, res.status, validate(schemaFor(template, method, res.status), res.body, doc)]).toEqual([
    method,
    path,
    res.status,
    [],
  ]);
  return res;
}

const monitorCount = (accountId: string) => stack.db.monitor.count({ where: { accountId } });

/** a monitor of alice made through the API with `fields`; its record */
const newMonitor = async (
  key: string,
  fields: Record<string, unknown> = {},
): Promise<{ id: string; held_events: number }> => {
  const made = await call(key, 'POST', '/api/v1/monitors', '/api/v1/monitors', { target_username: 'alice', ...fields });
  return made.body.data as { id: string; held_events: number };
};

/** a hit of monitor `monitorId` on a post of alice's */
const aliceHit = (monitorId: string, tweetId: string, tweetText: string, tweetCreatedAt: Date) =>
  stack.db.hit.create({
    data: { monitorId, tweetId, tweetText, tweetAuthorId: '1', tweetAuthorUsername: 'alice', tweetCreatedAt },
  });

describe('key scopes', () => {
  it('a read key keeps reading; on a management endpoint it is a 403 INSUFFICIENT_SCOPE that changes and counts nothing', async () => {
    const { accountId, key } = await stack.account('starter', 'read');
    const first = await call(key, 'GET', '/api/v1/monitors', '/api/v1/monitors');
    expect(first.status).toBe(200);
    const month = Number(first.headers.get('x-quota-remaining'));
    const minute = Number(first.headers.get('x-ratelimit-remaining'));
    const body = { target_username: 'alice' };
    const writes: [string, string, string][] = [
      ['POST', '/api/v1/monitors', '/api/v1/monitors'],
      ['POST', `/api/v1/monitors/${randomUUID()}/pause`, '/api/v1/monitors/{id}/pause'],
      ['DELETE', `/api/v1/monitors/${randomUUID()}`, '/api/v1/monitors/{id}'],
      ['GET', `/api/v1/monitors/${randomUUID()}/deliveries`, '/api/v1/monitors/{id}/deliveries'],
      ['POST', `/api/v1/deliveries/${randomUUID()}/redeliver`, '/api/v1/deliveries/{id}/redeliver'],
    ];
    for (const [method, path, template] of writes) {
      const r = await call(key, method, path, template, method === 'POST' ? body : undefined);
      expect([path, r.status, r.body.code]).toEqual([path, 403, 'INSUFFICIENT_SCOPE']);
      expect(r.headers.get('x-quota-remaining')).toBeNull();
    }
    expect(await monitorCount(accountId)).toBe(0);
    const after = await call(key, 'GET', '/api/v1/monitors', '/api/v1/monitors');
    expect(Number(after.headers.get('x-quota-remaining'))).toBe(month - 1);
    expect(Number(after.headers.get('x-ratelimit-remaining'))).toBe(minute - 1);
  });
});

describe('monitors through the API', () => {
  it('creates (201, secret once, stored encrypted), reads, changes, pauses, resumes and deletes', async () => {
    const { accountId, key } = await stack.account('starter', 'manage');
    const made = await call(key, 'POST', '/api/v1/monitors', '/api/v1/monitors', {
      target_username: '@alice',
      keywords: ['rockets', '-lunch'],
      filters: { exclude: ['replies'], lang: ['en'] },
      webhook_url: 'https://hooks.test/in',
    });
    expect(made.status).toBe(201);
    const m = made.body.data;
    expect(m).toMatchObject({
      target_username: 'alice',
      keywords: ['rockets', '-lunch'],
      filters: { exclude: ['replies'], lang: ['en'], excluded_keywords: ['lunch'] },
      is_active: true,
      status: 'active',
      check_interval_sec: 60,
      has_webhook: true,
    });
    expect(m.webhook_secret).toEqual(expect.any(String));
    const hook = await stack.db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: m.id } });
    expect(hook.secretCiphertext).not.toContain(m.webhook_secret);
    expect(createSecretBox(stack.secretsKey).decrypt(hook.secretCiphertext, m.id)).toBe(m.webhook_secret);
    // the same record GET answers, never the secret again
    const one = await call(key, 'GET', `/api/v1/monitors/${m.id}`, '/api/v1/monitors/{id}');
    const { webhook_secret: _s, ...record } = m as Record<string, unknown>;
    expect(one.body.data).toEqual(record);
    const list = await call(key, 'GET', '/api/v1/monitors', '/api/v1/monitors');
    expect(JSON.stringify(list.body)).not.toContain(m.webhook_secret);

    const plain = await call(key, 'POST', '/api/v1/monitors', '/api/v1/monitors', { target_username: 'bob' });
    expect([plain.status, plain.body.data.webhook_secret, plain.body.data.has_webhook]).toEqual([201, null, false]);
    // metered like every call: each 2xx management call uses one unit of the month
    expect(Number(plain.headers.get('x-quota-remaining'))).toBe(Number(made.headers.get('x-quota-remaining')) - 3);

    const edited = await call(key, 'PATCH', `/api/v1/monitors/${m.id}`, '/api/v1/monitors/{id}', {
      keywords: null,
      check_interval_sec: 120,
    });
    expect(edited.body.data).toMatchObject({ keywords: null, check_interval_sec: 120, target_username: 'alice' });
    const paused = await call(key, 'POST', `/api/v1/monitors/${m.id}/pause`, '/api/v1/monitors/{id}/pause');
    expect(paused.body.data).toMatchObject({ is_active: false, status: 'paused' });
    const resumed = await call(key, 'POST', `/api/v1/monitors/${m.id}/resume`, '/api/v1/monitors/{id}/resume', {});
    expect(resumed.body.data).toMatchObject({ is_active: true, status: 'active' });
    const gone = await call(key, 'DELETE', `/api/v1/monitors/${m.id}`, '/api/v1/monitors/{id}');
    expect(gone.body.data).toEqual({ id: m.id, deleted: true });
    expect((await call(key, 'GET', `/api/v1/monitors/${m.id}`, '/api/v1/monitors/{id}')).status).toBe(404);
    expect(await monitorCount(accountId)).toBe(1);
  });

  it("answers the dashboard's rules in the API's envelope: plan limit, interval, URL rule, another account's monitor", async () => {
    const free = await stack.account('free', 'manage');
    const first = await call(free.key, 'POST', '/api/v1/monitors', '/api/v1/monitors', { target_username: 'alice' });
    expect([first.status, first.body.data.check_interval_sec]).toEqual([201, 300]);
    const over = await call(free.key, 'POST', '/api/v1/monitors', '/api/v1/monitors', { target_username: 'bob' });
    expect([over.status, over.body.code, over.body.limit, over.body.plan]).toEqual([403, 'PLAN_LIMIT', 1, 'free']);
    expect(over.body.error).toMatch(/Free plan allows 1 monitor/);
    const fast = await call(free.key, 'PATCH', `/api/v1/monitors/${first.body.data.id}`, '/api/v1/monitors/{id}', {
      check_interval_sec: 60,
    });
    expect([fast.status, fast.body.param]).toEqual([400, 'check_interval_sec']);
    expect(fast.body.error).toMatch(/at least 300 seconds on the Free plan/);

    const other = await stack.account('starter', 'manage');
    const theirs = first.body.data.id as string;
    for (const [method, path, template, body] of [
      ['PATCH', `/api/v1/monitors/${theirs}`, '/api/v1/monitors/{id}', { keywords: ['x'] }],
      ['DELETE', `/api/v1/monitors/${theirs}`, '/api/v1/monitors/{id}', undefined],
      ['POST', `/api/v1/monitors/${theirs}/pause`, '/api/v1/monitors/{id}/pause', undefined],
      ['PUT', `/api/v1/monitors/${theirs}/webhook`, '/api/v1/monitors/{id}/webhook', { url: 'https://hooks.test/x' }],
      ['GET', `/api/v1/monitors/${theirs}/deliveries`, '/api/v1/monitors/{id}/deliveries', undefined],
      ['PATCH', '/api/v1/monitors/not-a-uuid', '/api/v1/monitors/{id}', { keywords: ['x'] }],
    ] as const) {
      const r = await call(other.key, method, path, template, body);
      expect([method, path, r.status, r.body.code]).toEqual([method, path, 404, 'NOT_FOUND']);
    }
    const still = await stack.db.monitor.findUniqueOrThrow({ where: { id: theirs }, include: { webhook: true } });
    expect([still.isActive, still.keywords, still.webhook]).toEqual([true, [], null]);

    // the save-time URL rule (SSRF guard): https only, no private or loopback addresses, no odd ports
    for (const url of ['http://hooks.test/x', 'https://127.0.0.1/x', 'https://[::1]/x', 'https://hooks.test:8080/x']) {
      const r = await call(other.key, 'POST', '/api/v1/monitors', '/api/v1/monitors', {
        target_username: 'alice',
        webhook_url: url,
      });
      expect([url, r.status, r.body.code, r.body.param]).toEqual([url, 400, 'INVALID_REQUEST', 'webhook_url']);
    }
    expect(await monitorCount(other.accountId)).toBe(0);
  });

  it('refuses hostile bodies with a clear 4xx naming the problem, and changes nothing', async () => {
    const { accountId, key } = await stack.account('starter', 'manage');
    const post = (body: unknown, headers: Record<string, string> = {}) =>
      call(key, 'POST', '/api/v1/monitors', '/api/v1/monitors', body, headers);
    const cases: [unknown, Record<string, string>, number, string, string | undefined][] = [
      [{ target_username: 'alice', colour: 'red' }, {}, 400, 'INVALID_REQUEST', 'colour'],
      [{ target_username: 'alice', filters: { exclude: [], mood: 1 } }, {}, 400, 'INVALID_REQUEST', 'filters.mood'],
      [{ target_username: 'alice', filters: { exclude: ['likes'] } }, {}, 400, 'INVALID_REQUEST', 'filters.exclude.0'],
      [{ target_username: 'alice', keywords: 'rockets' }, {}, 400, 'INVALID_REQUEST', 'keywords'],
      [{ target_username: 42 }, {}, 400, 'INVALID_REQUEST', 'target_username'],
      [{ target_username: 'not a name!' }, {}, 400, 'INVALID_REQUEST', 'target_username'],
      [{}, {}, 400, 'INVALID_REQUEST', 'target_username'],
      [{ target_username: 'alice', check_interval_sec: 1.5 }, {}, 400, 'INVALID_REQUEST', 'check_interval_sec'],
      [{ target_username: 'alice', keywords: Array(101).fill('a') }, {}, 400, 'INVALID_REQUEST', 'keywords'],
      [[1, 2], {}, 400, 'INVALID_REQUEST', 'body'],
      ['{"target_username":', {}, 400, 'INVALID_REQUEST', 'body'],
      [
        'target_username=alice',
        { 'content-type': 'application/x-www-form-urlencoded' },
        415,
        'UNSUPPORTED_MEDIA_TYPE',
        undefined,
      ],
      [
        { target_username: 'alice', keywords: ['x'.repeat(200)].concat(Array(99).fill('y'.repeat(190))) },
        {},
        413,
        'PAYLOAD_TOO_LARGE',
        undefined,
      ],
    ];
    for (const [body, headers, status, code, param] of cases) {
      const r = await post(body, headers);
      expect([JSON.stringify(body).slice(0, 60), r.status, r.body.code, r.body.param]).toEqual([
        JSON.stringify(body).slice(0, 60),
        status,
        code,
        param,
      ]);
      expect(r.body.error).toEqual(expect.any(String));
    }
    // a body far over the gateway's bound never reaches read-api
    const huge = await fetch(`${stack.url}/api/v1/monitors`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ target_username: 'alice', keywords: ['z'.repeat(200_000)] }),
    }).catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
    // the gateway answers 413 and closes; fetch may see the reset before the answer
    if (!(huge instanceof Error)) expect(huge.status).toBe(413);
    expect(await monitorCount(accountId)).toBe(0);
  });

  it('previews a rule on the target’s recent posts without saving anything', async () => {
    const { accountId, key } = await stack.account('starter', 'manage');
    const r = await call(key, 'POST', '/api/v1/monitors/preview', '/api/v1/monitors/preview', {
      target_username: 'alice',
      keywords: ['rockets'],
    });
    expect(r.status).toBe(200);
    const posts = r.body.data.posts as { text: string; matched: boolean }[];
    expect(
      posts
        .filter((p) => p.matched)
        .map((p) => p.text)
        .sort(),
    ).toEqual(['another rockets day', 'rockets are go']);
    expect(posts.find((p) => p.text === 'just lunch')!.matched).toBe(false);
    const nobody = await call(key, 'POST', '/api/v1/monitors/preview', '/api/v1/monitors/preview', {
      target_username: 'nobody_here',
    });
    expect([nobody.status, nobody.body.param]).toEqual([400, 'target_username']);
    expect(await monitorCount(accountId)).toBe(0);
  });
});

describe('webhooks, deliveries, redelivery and recovery through the API', () => {
  it('sets, tests, rotates (overlapped and now=1) and removes a webhook', async () => {
    const { key } = await stack.account('starter', 'manage');
    const m = await newMonitor(key);
    const base = `/api/v1/monitors/${m.id}/webhook`;
    const noHook = await call(key, 'POST', `${base}/test`, '/api/v1/monitors/{id}/webhook/test');
    expect([noHook.status, noHook.body.code]).toEqual([409, 'NO_WEBHOOK']);
    const set = await call(key, 'PUT', base, '/api/v1/monitors/{id}/webhook', { url: 'https://hooks.test/a' });
    expect(set.status).toBe(200);
    expect(set.body.data).toMatchObject({
      monitor_id: m.id,
      url: 'https://hooks.test/a',
      kind: 'native',
      health: 'ok',
    });
    const firstSecret = set.body.data.webhook_secret as string;
    const badUrl = await call(key, 'PUT', base, '/api/v1/monitors/{id}/webhook', { url: 'https://10.0.0.1/a' });
    expect([badUrl.status, badUrl.body.param]).toEqual([400, 'url']);

    const test = await call(key, 'POST', `${base}/test`, '/api/v1/monitors/{id}/webhook/test');
    expect(test.status).toBe(202);
    await waitFor(() => messages.some((x) => x.key === 'monitor.test' && JSON.stringify(x.body).includes(m.id)));

    const rotated = await call(key, 'POST', `${base}/rotate`, '/api/v1/monitors/{id}/webhook/rotate');
    expect(rotated.body.data.webhook_secret).not.toBe(firstSecret);
    expect(Date.parse(rotated.body.data.previous_secret_until)).toBeGreaterThan(Date.now() + 23 * 3600_000);
    const leaked = await call(key, 'POST', `${base}/rotate?now=1`, '/api/v1/monitors/{id}/webhook/rotate');
    expect(leaked.body.data.previous_secret_until).toBeNull();
    const row = await stack.db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: m.id } });
    expect(row.previousSecretCiphertext).toBeNull();
    expect(createSecretBox(stack.secretsKey).decrypt(row.secretCiphertext, m.id)).toBe(leaked.body.data.webhook_secret);

    const removed = await call(key, 'DELETE', base, '/api/v1/monitors/{id}/webhook');
    expect(removed.status).toBe(200);
    expect((await call(key, 'GET', `/api/v1/monitors/${m.id}`, '/api/v1/monitors/{id}')).body.data.has_webhook).toBe(
      false,
    );
  });

  it('takes retry_policy and ordering on create and update, returns them on read; an unknown value is a 400 naming the field', async () => {
    const { key } = await stack.account('starter', 'manage');
    const created = await call(key, 'POST', '/api/v1/monitors', '/api/v1/monitors', {
      target_username: 'alice',
      webhook_url: 'https://hooks.test/r',
      retry_policy: 'standard',
    });
    expect(created.status).toBe(201);
    const m = created.body.data;
    const base = `/api/v1/monitors/${m.id}/webhook`;
    const read = await call(key, 'GET', base, '/api/v1/monitors/{id}/webhook');
    expect(read.body.data).toMatchObject({ monitor_id: m.id, retry_policy: 'standard', ordering: 'unordered' });
    expect(read.body.data).not.toHaveProperty('webhook_secret');

    const patched = await call(key, 'PATCH', base, '/api/v1/monitors/{id}/webhook', { ordering: 'fifo' });
    expect([patched.status, patched.body]).toEqual([200, expect.anything()]);
    expect(patched.body.data).toMatchObject({ retry_policy: 'standard', ordering: 'fifo' });
    // PUT replaces the URL (a new secret); rules left out stay, rules given change
    const put = await call(key, 'PUT', base, '/api/v1/monitors/{id}/webhook', {
      url: 'https://hooks.test/s',
      retry_policy: 'none',
    });
    expect(put.body.data).toMatchObject({ retry_policy: 'none', ordering: 'fifo', webhook_secret: expect.any(String) });

    for (const [method, body, param] of [
      ['PATCH', { retry_policy: 'always' }, 'retry_policy'],
      ['PATCH', { ordering: 'lifo' }, 'ordering'],
      ['PUT', { url: 'https://hooks.test/t', retry_policy: 'sometimes' }, 'retry_policy'],
    ] as const) {
      const bad = await call(key, method, base, '/api/v1/monitors/{id}/webhook', body);
      expect([bad.status, bad.body.code, bad.body.param]).toEqual([400, 'INVALID_REQUEST', param]);
      expect(bad.body.error).toContain(param);
    }
    const badCreate = await call(key, 'POST', '/api/v1/monitors', '/api/v1/monitors', {
      target_username: 'alice',
      webhook_url: 'https://hooks.test/u',
      ordering: 'random',
    });
    expect([badCreate.status, badCreate.body.code, badCreate.body.param]).toEqual([400, 'INVALID_REQUEST', 'ordering']);
    const row = await stack.db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: m.id } });
    expect([row.url, row.retryPolicy, row.ordering]).toEqual(['https://hooks.test/s', 'none', 'fifo']);

    // without a webhook: 409 NO_WEBHOOK on read and update
    const plain = await newMonitor(key);
    const none = await call(key, 'GET', `/api/v1/monitors/${plain.id}/webhook`, '/api/v1/monitors/{id}/webhook');
    expect([none.status, none.body.code]).toEqual([409, 'NO_WEBHOOK']);
  });

  it('pages the delivery log with attempt detail, redelivers one attempt and recovers failures since a time', async () => {
    const { key } = await stack.account('starter', 'manage');
    const m = await newMonitor(key, { webhook_url: 'https://hooks.test/b' });
    const hit = await aliceHit(m.id, '1001', 'rockets are go', new Date(Date.now() - 60_000));
    const attempt = (outcome: 'delivered' | 'failed', ago: number, deliveryId: string) =>
      stack.db.deliveryAttempt.create({
        data: {
          monitorId: m.id,
          hitId: hit.id,
          event: 'monitor.hit',
          deliveryId,
          url: 'https://hooks.test/b',
          outcome,
          statusCode: outcome === 'failed' ? 500 : 200,
          latencyMs: 12,
          requestHeaders: [['content-type', 'application/json']],
          requestBody: '{"event":"monitor.hit"}',
          responseHeaders: [['content-type', 'text/plain']],
          responseBody: Buffer.from(outcome === 'failed' ? 'boom' : 'ok'),
          createdAt: new Date(Date.now() - ago),
        },
      });
    await attempt('delivered', 30_000, 'd-ok');
    const failed = await attempt('failed', 10_000, 'd-failed');
    const page1 = await call(
      key,
      'GET',
      `/api/v1/monitors/${m.id}/deliveries?limit=1`,
      '/api/v1/monitors/{id}/deliveries',
    );
    expect(page1.body.data).toEqual([
      expect.objectContaining({
        id: failed.id,
        delivery_id: 'd-failed',
        outcome: 'failed',
        status_code: 500,
        request: {
          url: 'https://hooks.test/b',
          headers: [['content-type', 'application/json']],
          body: '{"event":"monitor.hit"}',
        },
        response: { status: 500, headers: [['content-type', 'text/plain']], body: 'boom' },
      }),
    ]);
    const cursor = page1.body.meta.next_cursor as string;
    const page2 = await call(
      key,
      'GET',
      `/api/v1/monitors/${m.id}/deliveries?limit=1&cursor=${cursor}`,
      '/api/v1/monitors/{id}/deliveries',
    );
    expect([page2.body.data[0].delivery_id, page2.body.meta.next_cursor]).toEqual(['d-ok', null]);
    const badCursor = await call(
      key,
      'GET',
      `/api/v1/monitors/${m.id}/deliveries?cursor=abc`,
      '/api/v1/monitors/{id}/deliveries',
    );
    expect([badCursor.status, badCursor.body.param]).toEqual([400, 'cursor']);

    const again = await call(
      key,
      'POST',
      `/api/v1/deliveries/${failed.id}/redeliver`,
      '/api/v1/deliveries/{id}/redeliver',
    );
    expect([again.status, again.body.data]).toEqual([
      202,
      { delivery_id: 'd-failed', monitor_id: m.id, attempt_id: failed.id },
    ]);
    await waitFor(() => messages.some((x) => x.key === 'webhook.redeliver' && x.body.attemptId === failed.id));

    const since = new Date(Date.now() - 20_000).toISOString();
    const recovered = await call(key, 'POST', `/api/v1/monitors/${m.id}/recover`, '/api/v1/monitors/{id}/recover', {
      since,
    });
    expect([recovered.status, recovered.body.data]).toEqual([
      202,
      { queued: 1, remaining: 0, delivery_ids: ['d-failed'], retry_after: null },
    ]);
    expect(recovered.headers.get('retry-after')).toBeNull();
    const future = await call(key, 'POST', `/api/v1/monitors/${m.id}/recover`, '/api/v1/monitors/{id}/recover', {
      since: new Date(Date.now() + 3600_000).toISOString(),
    });
    expect([future.status, future.body.param]).toEqual([400, 'since']);
    const notTime = await call(key, 'POST', `/api/v1/monitors/${m.id}/recover`, '/api/v1/monitors/{id}/recover', {
      since: 'yesterday',
    });
    expect([notTime.status, notTime.body.param]).toEqual([400, 'since']);
  });

  it('shows a retry held while the webhook is disabled: held on its last attempt, which names no next time', async () => {
    const { key } = await stack.account('starter', 'manage');
    const m = await newMonitor(key, { webhook_url: 'https://hooks.test/held', retry_policy: 'standard' });
    // what the dispatcher leaves when attempt 2 of d-held falls due while endpoint health has the
    // webhook disabled: attempt 1 logged with its next time cleared, attempt 2 in the hold
    const endpoint = await stack.db.webhookEndpoint.update({
      where: { monitorId: m.id },
      data: { disabledAt: new Date(), heldCount: 1 },
    });
    const base = { monitorId: m.id, url: 'https://hooks.test/held', event: 'monitor.hit', outcome: 'failed' as const };
    await stack.db.deliveryAttempt.create({
      data: { ...base, deliveryId: 'd-held', attempt: 1, statusCode: 503, createdAt: new Date(Date.now() - 20_000) },
    });
    await stack.db.deliveryAttempt.create({
      data: {
        ...base,
        deliveryId: 'd-waiting',
        attempt: 1,
        statusCode: 503,
        nextAttemptAt: new Date(Date.now() + 60_000),
        createdAt: new Date(Date.now() - 10_000),
      },
    });
    await stack.db.heldEvent.create({
      data: {
        endpointId: endpoint.id,
        monitorId: m.id,
        event: 'monitor.hit',
        deliveryId: 'd-held',
        payload: {},
        url: 'https://hooks.test/held',
        detectedAt: new Date(Date.now() - 30_000),
        attempt: 2,
      },
    });
    const log = await call(key, 'GET', `/api/v1/monitors/${m.id}/deliveries`, '/api/v1/monitors/{id}/deliveries');
    expect(log.status).toBe(200);
    expect(
      (log.body.data as { delivery_id: string; held: boolean; next_attempt_at: string | null }[]).map((d) => [
        d.delivery_id,
        d.held,
        d.next_attempt_at === null,
      ]),
    ).toEqual([
      ['d-waiting', false, false],
      ['d-held', true, true],
    ]);
    const monitor = await call(key, 'GET', `/api/v1/monitors/${m.id}`, '/api/v1/monitors/{id}');
    expect(monitor.body.data.held_events).toBe(1);
  });

  it('recovers by window and outcome in one call, within the redelivery budget (Retry-After for the rest)', async () => {
    const { key } = await stack.account('starter', 'manage');
    const m = await newMonitor(key, { webhook_url: 'https://hooks.test/w' });
    const at = (agoSec: number) => new Date(Date.now() - agoSec * 1000);
    let n = 0;
    const delivery = async (deliveryId: string, outcome: 'failed' | 'skipped', agoSec: number) => {
      const hit = await aliceHit(m.id, String(2000 + n++), deliveryId, at(600));
      await stack.db.deliveryAttempt.create({
        data: {
          monitorId: m.id,
          hitId: hit.id,
          event: 'monitor.hit',
          deliveryId,
          url: 'https://hooks.test/w',
          outcome,
          createdAt: at(agoSec),
        },
      });
    };
    await delivery('w-early', 'failed', 300); // before since
    for (const [i, ago] of [50, 45, 40].entries()) await delivery(`w-skip-${i}`, 'skipped', ago);
    await delivery('w-fail', 'failed', 35);
    await delivery('w-skip-late', 'skipped', 2); // after until
    await delivery('w-fail-2', 'failed', 30);
    const path = `/api/v1/monitors/${m.id}/recover`;
    const template = '/api/v1/monitors/{id}/recover';
    const window = { since: at(100).toISOString(), until: at(20).toISOString() };

    const redelivers = () => messages.filter((x) => x.key === 'webhook.redeliver').length;
    const queuedBefore = redelivers();
    const skippedOnly = await call(key, 'POST', path, template, { ...window, outcomes: ['skipped'] });
    expect([skippedOnly.status, skippedOnly.body.data.delivery_ids]).toEqual([
      202,
      ['w-skip-0', 'w-skip-1', 'w-skip-2'],
    ]);
    // the default outcomes are all three; the budget (4 an hour) grants one more: the rest is reported
    const all = await call(key, 'POST', path, template, window);
    expect(all.status).toBe(202);
    expect(all.body.data).toMatchObject({ queued: 1, remaining: 1, delivery_ids: ['w-fail'] });
    expect(all.body.data.retry_after).toBeGreaterThan(0);
    expect(all.headers.get('retry-after')).toBe(String(all.body.data.retry_after));
    await waitFor(() => redelivers() >= queuedBefore + 4);

    // until before since, an unknown outcome: 400 naming the field, nothing queued
    const before = messages.length;
    const backwards = await call(key, 'POST', path, template, { since: window.until, until: window.since });
    expect([backwards.status, backwards.body.code, backwards.body.param]).toEqual([400, 'INVALID_REQUEST', 'until']);
    expect(backwards.body.error).toMatch(/until is before since/);
    const unknown = await call(key, 'POST', path, template, { since: window.since, outcomes: ['delivered'] });
    expect([unknown.status, unknown.body.param]).toEqual([400, 'outcomes.0']);
    const none = await call(key, 'POST', path, template, { since: window.since, outcomes: [] });
    expect([none.status, none.body.param]).toEqual([400, 'outcomes']);
    await new Promise((r) => setTimeout(r, 300));
    expect(messages.length).toBe(before);
  });

  it('shows the held count and enables a disabled webhook', async () => {
    const { key } = await stack.account('starter', 'manage');
    const m = await newMonitor(key, { webhook_url: 'https://hooks.test/held' });
    expect(m.held_events).toBe(0);
    await stack.db.webhookEndpoint.update({
      where: { monitorId: m.id },
      data: {
        consecutiveFailures: 8,
        firstFailureAt: new Date(Date.now() - 4 * 86_400_000),
        disabledAt: new Date(),
        heldCount: 5,
      },
    });
    const shown = await call(key, 'GET', `/api/v1/monitors/${m.id}`, '/api/v1/monitors/{id}');
    expect(shown.body.data.held_events).toBe(5);
    const enable = `/api/v1/monitors/${m.id}/webhook/enable`;
    const enabled = await call(key, 'POST', enable, '/api/v1/monitors/{id}/webhook/enable');
    expect(enabled.status).toBe(200);
    expect(enabled.body.data).toMatchObject({
      monitor_id: m.id,
      health: 'ok',
      consecutive_failures: 0,
      held_events: 5,
    });
    expect(await stack.db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: m.id } })).toMatchObject({
      disabledAt: null,
      consecutiveFailures: 0,
    });
    // a read key may not; another account's monitor is not found
    const reader = await stack.account('starter', 'read');
    const refused = await call(reader.key, 'POST', enable, '/api/v1/monitors/{id}/webhook/enable');
    expect([refused.status, refused.body.code]).toEqual([403, 'INSUFFICIENT_SCOPE']);
    const stranger = await stack.account('starter', 'manage');
    const missing = await call(stranger.key, 'POST', enable, '/api/v1/monitors/{id}/webhook/enable');
    expect([missing.status, missing.body.code]).toEqual([404, 'NOT_FOUND']);
  });
});

describe('Idempotency-Key', () => {
  it('replays the first answer for the same key and body, refuses another body, and acts once under concurrency', async () => {
    const { accountId, key } = await stack.account('starter', 'manage');
    const idem = randomUUID();
    const body = { target_username: 'alice', keywords: ['rockets'], webhook_url: 'https://hooks.test/c' };
    const first = await call(key, 'POST', '/api/v1/monitors', '/api/v1/monitors', body, { 'idempotency-key': idem });
    expect([first.status, first.headers.get('idempotent-replayed')]).toEqual([201, null]);
    // the same body with its keys in another order and other spacing is the same request
    const again = await call(
      key,
      'POST',
      '/api/v1/monitors',
      '/api/v1/monitors',
      `{ "webhook_url": "https://hooks.test/c", "keywords": ["rockets"],  "target_username": "alice" }`,
      { 'idempotency-key': idem },
    );
    expect([again.status, again.headers.get('idempotent-replayed'), again.body]).toEqual([201, 'true', first.body]);
    expect(await monitorCount(accountId)).toBe(1);
    const other = await call(
      key,
      'POST',
      '/api/v1/monitors',
      '/api/v1/monitors',
      { ...body, keywords: ['other'] },
      {
        'idempotency-key': idem,
      },
    );
    expect([other.status, other.body.code]).toEqual([422, 'IDEMPOTENCY_KEY_REUSED']);
    // the same key on another endpoint is another request too
    const elsewhere = await call(key, 'POST', '/api/v1/monitors/preview', '/api/v1/monitors/preview', body, {
      'idempotency-key': idem,
    });
    expect(elsewhere.status).toBe(422);
    expect(await monitorCount(accountId)).toBe(1);

    // ten at once with a new key: one acts, all answer the same monitor
    const burst = randomUUID();
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        call(
          key,
          'POST',
          '/api/v1/monitors',
          '/api/v1/monitors',
          { target_username: 'bob' },
          { 'idempotency-key': burst },
        ),
      ),
    );
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([201]));
    expect(new Set(answers.map((a) => String(a.body.data.id))).size).toBe(1);
    expect(await monitorCount(accountId)).toBe(2);

    // an action replayed does not act again: one test ping published for two calls
    const m = first.body.data.id as string;
    const ping = randomUUID();
    for (let i = 0; i < 2; i++)
      expect(
        (
          await call(
            key,
            'POST',
            `/api/v1/monitors/${m}/webhook/test`,
            '/api/v1/monitors/{id}/webhook/test',
            undefined,
            {
              'idempotency-key': ping,
            },
          )
        ).status,
      ).toBe(202);
    await waitFor(() => messages.some((x) => x.key === 'monitor.test' && JSON.stringify(x.body).includes(m)));
    await new Promise((r) => setTimeout(r, 300));
    expect(messages.filter((x) => x.key === 'monitor.test' && JSON.stringify(x.body).includes(m))).toHaveLength(1);

    // keys are per account: another account's same key acts for that account
    const b = await stack.account('starter', 'manage');
    const theirs = await call(b.key, 'POST', '/api/v1/monitors', '/api/v1/monitors', body, { 'idempotency-key': idem });
    expect([theirs.status, theirs.headers.get('idempotent-replayed')]).toEqual([201, null]);
    expect(theirs.body.data.id).not.toBe(first.body.data.id);

    // a bad key is a 400 naming the header, and nothing is made
    for (const bad of ['x'.repeat(256), 'has space', ''])
      if (bad !== '') {
        const r = await call(
          key,
          'POST',
          '/api/v1/monitors',
          '/api/v1/monitors',
          { target_username: 'carol' },
          {
            'idempotency-key': bad,
          },
        );
        expect([r.status, r.body.param]).toEqual([400, 'Idempotency-Key']);
      }
    expect(await monitorCount(accountId)).toBe(2);
  });

  it('keeps a refusal (a 4xx after the request was understood) but not a failure a retry should act on', async () => {
    const free = await stack.account('free', 'manage');
    await call(free.key, 'POST', '/api/v1/monitors', '/api/v1/monitors', { target_username: 'alice' });
    const idem = randomUUID();
    const refused = await call(
      free.key,
      'POST',
      '/api/v1/monitors',
      '/api/v1/monitors',
      { target_username: 'bob' },
      {
        'idempotency-key': idem,
      },
    );
    expect(refused.status).toBe(403);
    // the plan changes; the kept refusal is still the answer to this key (a new key acts)
    await stack.db.account.update({ where: { id: free.accountId }, data: { plan: 'starter' } });
    const replay = await call(
      free.key,
      'POST',
      '/api/v1/monitors',
      '/api/v1/monitors',
      { target_username: 'bob' },
      {
        'idempotency-key': idem,
      },
    );
    expect([replay.status, replay.headers.get('idempotent-replayed')]).toEqual([403, 'true']);
    const fresh = await call(
      free.key,
      'POST',
      '/api/v1/monitors',
      '/api/v1/monitors',
      { target_username: 'bob' },
      {
        'idempotency-key': randomUUID(),
      },
    );
    expect(fresh.status).toBe(201);
  });
});

describe('Idempotency-Key answers at rest', () => {
  /** every idempotency entry of the stack, as anyone reading Redis (or its snapshot) sees it */
  async function rawEntries(): Promise<Map<string, string>> {
    const r = new Redis(stack.redis.url, { maxRetriesPerRequest: 1 });
    try {
      const keys = await r.keys(`${stack.redis.prefix}idem:*`);
      const values = keys.length ? await r.mget(...keys) : [];
      return new Map(keys.map((k, i) => [k, values[i] ?? '']));
    } finally {
      r.disconnect();
    }
  }

  it('keeps no webhook secret readable in Redis; the replay still returns it, and a copied entry does not open', async () => {
    const a = await stack.account('starter', 'manage');
    const b = await stack.account('starter', 'manage');
    const key = a.key;
    const [createKey, rotateKey] = [randomUUID(), randomUUID()];
    const body = { target_username: 'alice', webhook_url: 'https://hooks.test/secret' };
    const made = await call(key, 'POST', '/api/v1/monitors', '/api/v1/monitors', body, {
      'idempotency-key': createKey,
    });
    const rotatePath = `/api/v1/monitors/${made.body.data.id}/webhook/rotate?now=1`;
    const rotated = await call(key, 'POST', rotatePath, '/api/v1/monitors/{id}/webhook/rotate', undefined, {
      'idempotency-key': rotateKey,
    });
    const secrets = [made.body.data.webhook_secret as string, rotated.body.data.webhook_secret as string];
    expect(secrets.every((x) => x.startsWith('whsec_'))).toBe(true);

    const entries = await rawEntries();
    expect(entries.size).toBeGreaterThanOrEqual(2);
    for (const [k, raw] of entries) {
      for (const secret of secrets) expect({ k, has: raw.includes(secret) }).toEqual({ k, has: false });
      expect({ k, has: /whsec_|hooks\.test/.test(raw) }).toEqual({ k, has: false });
    }

    const replay = await call(key, 'POST', '/api/v1/monitors', '/api/v1/monitors', body, {
      'idempotency-key': createKey,
    });
    expect([replay.headers.get('idempotent-replayed'), replay.body]).toEqual(['true', made.body]);

    // another account's entry under the same Idempotency-Key, overwritten with this one's sealed answer, does not open
    const theirs = await call(b.key, 'POST', '/api/v1/monitors', '/api/v1/monitors', body, {
      'idempotency-key': createKey,
    });
    expect(theirs.status).toBe(201);
    const entryOf = (accountId: string) =>
      `${stack.redis.prefix}idem:${accountId}:${createHash('sha256').update(createKey).digest('hex')}`;
    const r = new Redis(stack.redis.url, { maxRetriesPerRequest: 1 });
    try {
      await r.set(entryOf(b.accountId), (await r.get(entryOf(a.accountId)))!, 'EX', 600);
    } finally {
      r.disconnect();
    }
    const copied = await call(b.key, 'POST', '/api/v1/monitors', '/api/v1/monitors', body, {
      'idempotency-key': createKey,
    });
    expect([copied.status, copied.body.code, JSON.stringify(copied.body).includes(secrets[0]!)]).toEqual([
      422,
      'IDEMPOTENCY_KEY_REUSED',
      false,
    ]);
  });
});

async function waitFor(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}
