/**
 * GET /api/v1/monitors/{id}/events (docs/api.md "Events by sequence") end to end, through the
 * real gateway and read-api processes on PostgreSQL: a monitor's hits and other events after a
 * sequence, oldest first, paged by cursor, as the webhook delivers them; within the plan's hit
 * window; a manage key only; hostile `after`, `cursor` and ids answered 400/404 naming the field.
 * Every answer is checked against the served OpenAPI document.
 */
import { createSecretBox } from '@sts/core';
import { createMonitor, startApiStack, type ApiStack, type MonitorFixture } from '@sts/testing';
import type { openApiDocument } from './http/openapi';
import { validate } from '../test/schemaCheck';

type Doc = typeof openApiDocument;
const TEMPLATE = '/api/v1/monitors/{id}/events';

let stack: ApiStack;
let doc: Doc;
let manageKey: string;
let accountId: string;
let monitor: MonitorFixture;

interface Answer {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers of several shapes
  body: any;
}

const get = (path: string, key = manageKey): Promise<Answer> => getAs(path, key);

async function getAs(path: string, key: string): Promise<Answer> {
  const r = await fetch(`${stack.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  const body: unknown = await r.json();
  const op = (doc.paths as unknown as Record<string, { get: { responses: Record<string, unknown> } }>)[TEMPLATE]!.get;
  const schema = (op.responses[String(r.status)] as { content: { 'application/json': { schema: unknown } } }).content[
    'application/json'
  ].schema;
  expect([path, r.status, validate(schema, body, doc)]).toEqual([path, r.status, []]);
  return { status: r.status, body };
}

/** a hit of `monitor` numbered `sequence`, of a post `ageDays` old */
async function hit(m: MonitorFixture, sequence: number, ageDays = 0) {
  const createdAt = new Date(Date.now() - ageDays * 86_400_000 - 60_000);
  return stack.db.hit.create({
    data: {
      monitorId: m.id,
      tweetId: String(5_000_000 + sequence),
      tweetText: `post ${sequence}`,
      tweetAuthorId: '9',
      tweetAuthorUsername: m.targetUsername,
      tweetCreatedAt: createdAt,
      detectedAt: new Date(createdAt.getTime() + 1000),
      sequence: BigInt(sequence),
    },
  });
}

beforeAll(async () => {
  stack = await startApiStack();
  doc = (await (await fetch(`${stack.url}/api/v1/openapi.json`)).json()) as Doc;
  ({ key: manageKey, accountId } = await stack.account('starter', 'manage'));
  monitor = await createMonitor(stack.db, createSecretBox(stack.secretsKey), {
    accountId,
    targetUsername: 'NASA',
    keywords: ['launch'],
  });
  // 1, 2, 4, 5: hits; 3: the target was suspended; one hit recorded before events were numbered
  for (const s of [1, 2, 4, 5]) await hit(monitor, s);
  await stack.db.hit.create({
    data: {
      monitorId: monitor.id,
      tweetId: '4999999',
      tweetText: 'before numbering',
      tweetAuthorId: '9',
      tweetAuthorUsername: 'NASA',
      tweetCreatedAt: new Date(Date.now() - 3_600_000),
    },
  });
  const suspended = {
    event: 'monitor.target_unavailable',
    monitor: { id: monitor.id, targetUsername: 'NASA', query: null, keywords: ['launch'] },
    status: 'suspended',
    previousStatus: 'ok',
    username: 'NASA',
    newUsername: null,
    detail: '@NASA is suspended',
    detectedAt: new Date().toISOString(),
    sequence: 3,
  };
  await stack.db.monitorEvent.create({
    data: { monitorId: monitor.id, kind: suspended.event, payload: suspended, sequence: 3n },
  });
}, 90_000);

afterAll(async () => {
  await stack?.stop();
});

describe('GET /api/v1/monitors/{id}/events', () => {
  it('answers the events after a sequence, oldest first, as delivered, paged by cursor', async () => {
    const all = await get(`/api/v1/monitors/${monitor.id}/events`);
    expect(all.status).toBe(200);
    expect((all.body.data as { sequence: number }[]).map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5]);
    expect(all.body.meta).toEqual({ count: 5, next_cursor: null });
    const [first] = all.body.data;
    expect(first).toEqual({
      event: 'monitor.hit',
      monitor: { id: monitor.id, targetUsername: 'NASA', query: null, keywords: ['launch'] },
      tweet: { id: '5000001', text: 'post 1', authorUsername: 'NASA', createdAt: expect.any(String) },
      detectedAt: expect.any(String),
      sequence: 1,
    });
    expect(all.body.data[2]).toMatchObject({ event: 'monitor.target_unavailable', status: 'suspended', sequence: 3 });

    // a receiver that saw 4 after 1 asks for what follows 1, two at a time
    const page1 = await get(`/api/v1/monitors/${monitor.id}/events?after=1&limit=2`);
    expect((page1.body.data as { sequence: number }[]).map((e) => e.sequence)).toEqual([2, 3]);
    expect(page1.body.meta.next_cursor).toEqual(expect.any(String));
    const page2 = await get(`/api/v1/monitors/${monitor.id}/events?limit=2&cursor=${page1.body.meta.next_cursor}`);
    expect((page2.body.data as { sequence: number }[]).map((e) => e.sequence)).toEqual([4, 5]);
    expect(page2.body.meta.next_cursor).toBeNull();
    expect((await get(`/api/v1/monitors/${monitor.id}/events?after=5`)).body.data).toEqual([]);
    expect((await get(`/api/v1/monitors/${monitor.id}/events?after=9007199254740991`)).body.data).toEqual([]);
  });

  it("keeps to the plan's hit window", async () => {
    const other = await createMonitor(stack.db, createSecretBox(stack.secretsKey), { accountId });
    await hit(other, 1, 400);
    await hit(other, 2);
    const r = await get(`/api/v1/monitors/${other.id}/events`);
    expect((r.body.data as { sequence: number }[]).map((e) => e.sequence)).toEqual([2]);
  });

  it('refuses an after that is not a sequence, naming it, and a cursor that is not one', async () => {
    for (const bad of ['abc', '-1', '1.5', '1e3', '', '%2B5', '05', '9007199254740992', '99999999999999999999']) {
      const r = await get(`/api/v1/monitors/${monitor.id}/events?after=${bad}`);
      expect([bad, r.status, r.body.code, r.body.param]).toEqual([bad, 400, 'INVALID_REQUEST', 'after']);
      expect(r.body.error).toContain('after');
    }
    const twice = await get(`/api/v1/monitors/${monitor.id}/events?after=1&after=2`);
    expect([twice.status, twice.body.param]).toEqual([400, 'after']);
    const both = await get(`/api/v1/monitors/${monitor.id}/events?after=1&cursor=ZXYuMg`);
    expect([both.status, both.body.code, both.body.param]).toEqual([400, 'INVALID_REQUEST', 'cursor']);
    for (const cursor of [
      'not-a-cursor',
      Buffer.from('ht.1.x').toString('base64url'),
      Buffer.from('ev.-1').toString('base64url'),
    ]) {
      const r = await get(`/api/v1/monitors/${monitor.id}/events?cursor=${cursor}`);
      expect([cursor, r.status, r.body.code]).toEqual([cursor, 400, 'INVALID_REQUEST']);
    }
    const limit = await get(`/api/v1/monitors/${monitor.id}/events?limit=101`);
    expect([limit.status, limit.body.param]).toEqual([400, 'limit']);
  });

  it('refuses limits out of bounds and tampered cursors; the bounds themselves are served', async () => {
    // an account of its own: the requests above used most of the first one's per-minute limit
    const own = await stack.account('starter', 'manage');
    const mine = await createMonitor(stack.db, createSecretBox(stack.secretsKey), { accountId: own.accountId });
    for (const seq of [1, 2, 4, 5]) await hit(mine, seq);
    const get = (path: string) => getAs(path.replace(monitor.id, mine.id), own.key);
    for (const bad of ['0', '-1', 'ten', '1e2', '99999999999999999999', '']) {
      const r = await get(`/api/v1/monitors/${monitor.id}/events?limit=${bad}`);
      expect([bad, r.status, r.body.code, r.body.param]).toEqual([bad, 400, 'INVALID_REQUEST', 'limit']);
    }
    expect((await get(`/api/v1/monitors/${monitor.id}/events?limit=1`)).body.data).toHaveLength(1);
    expect((await get(`/api/v1/monitors/${monitor.id}/events?limit=100`)).status).toBe(200);
    // a cursor edited by hand: another sequence beyond int64, extra parts, not a number, far too long
    for (const cursor of [
      Buffer.from('ev.99999999999999999999').toString('base64url'),
      Buffer.from('ev.9223372036854775808').toString('base64url'),
      Buffer.from('ev.1.2').toString('base64url'),
      Buffer.from('ev.x').toString('base64url'),
      Buffer.from('ev.').toString('base64url'),
      'A'.repeat(5000),
    ]) {
      const r = await get(`/api/v1/monitors/${monitor.id}/events?cursor=${cursor}`);
      expect([cursor.slice(0, 40), r.status, r.body.code]).toEqual([cursor.slice(0, 40), 400, 'INVALID_REQUEST']);
    }
    // a cursor of a real page, edited to another valid sequence, is just that position
    const edited = Buffer.from('ev.4').toString('base64url');
    const r = await get(`/api/v1/monitors/${monitor.id}/events?cursor=${edited}`);
    expect((r.body.data as { sequence: number }[]).map((e) => e.sequence)).toEqual([5]);
  });

  it("is a manage key's, and answers 404 for another account's or a malformed monitor id", async () => {
    const read = await stack.addKey(accountId, 'read');
    const refused = await get(`/api/v1/monitors/${monitor.id}/events`, read);
    expect([refused.status, refused.body.code]).toEqual([403, 'INSUFFICIENT_SCOPE']);
    const stranger = await stack.account('starter', 'manage');
    expect((await get(`/api/v1/monitors/${monitor.id}/events`, stranger.key)).status).toBe(404);
    expect((await get('/api/v1/monitors/not-a-uuid/events')).status).toBe(404);
    expect((await get('/api/v1/monitors/00000000-0000-4000-8000-000000000000/events')).status).toBe(404);
  });
});
