/**
 * Query monitors through the management API (POST /api/v1/monitors with `query`), end to end
 * through the real gateway and read-api on PostgreSQL, Redis and RabbitMQ: the record carries
 * `query` and a null `target_username`; a refused query is a 400 naming `query` and the part, with
 * nothing saved; the preview takes a query. Every answer is checked against the served OpenAPI
 * document.
 */
import { createSocialTweet, createSocialUser } from '@sts/social';
import { startApiStack, type ApiStack } from '@sts/testing';
import type { openApiDocument } from './http/openapi';
import { validate } from '../test/schemaCheck';

type Doc = typeof openApiDocument;
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers of many shapes
type Res = { status: number; body: any };

let stack: ApiStack;
let doc: Doc;

beforeAll(async () => {
  stack = await startApiStack({});
  doc = (await (await fetch(`${stack.url}/api/v1/openapi.json`)).json()) as Doc;
  await createSocialUser(stack.db, { username: 'acme', name: 'Acme' });
  for (const text of ['The new release is out', 'launch giveaway', 'just lunch'])
    await createSocialTweet(stack.db, { authorUsername: 'acme', text, lang: 'en' });
}, 90_000);

afterAll(async () => {
  await stack?.stop();
});

async function call(key: string, method: string, path: string, template: string, body?: unknown): Promise<Res> {
  const r = await fetch(`${stack.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await r.text();
  const res = { status: r.status, body: text ? (JSON.parse(text) as unknown) : undefined };
  const op = (doc.paths as unknown as Record<string, Record<string, { responses: Record<string, unknown> }>>)[
    template
  ]?.[method.toLowerCase()];
  const response = op?.responses[String(res.status)] as { content: { 'application/json': { schema: unknown } } };
  expect([method, path, res.status, validate(response.content['application/json'].schema, res.body, doc)]).toEqual([
    method,
    path,
    res.status,
    [],
  ]);
  return res;
}

describe('query monitors through the API', () => {
  it('creates one (201: query set, target_username null), reads it, changes its query and previews a query', async () => {
    const { accountId, key } = await stack.account('starter', 'manage');
    // a first read warms read-api's database path (a cold start on a busy machine can outlast the gateway's timeout)
    expect((await call(key, 'GET', '/api/v1/monitors', '/api/v1/monitors')).body.data).toEqual([]);
    const query = '"new release" OR launch -giveaway lang:en';
    const made = await call(key, 'POST', '/api/v1/monitors', '/api/v1/monitors', { query });
    expect(made.status).toBe(201);
    expect(made.body.data).toMatchObject({ query, target_username: null, keywords: null, webhook_secret: null });
    const id = made.body.data.id as string;
    expect(await stack.db.monitor.findUniqueOrThrow({ where: { id } })).toMatchObject({ accountId, query });
    const one = await call(key, 'GET', `/api/v1/monitors/${id}`, '/api/v1/monitors/{id}');
    expect(one.body.data).toMatchObject({ query, target_username: null });
    const user = await call(key, 'POST', '/api/v1/monitors', '/api/v1/monitors', { target_username: 'acme' });
    expect(user.body.data).toMatchObject({ query: null, target_username: 'acme' });

    const edited = await call(key, 'PATCH', `/api/v1/monitors/${id}`, '/api/v1/monitors/{id}', { query: 'rocket' });
    expect(edited.body.data).toMatchObject({ query: 'rocket', target_username: null });
    const cross = await call(key, 'PATCH', `/api/v1/monitors/${id}`, '/api/v1/monitors/{id}', {
      target_username: 'acme',
    });
    expect([cross.status, cross.body.param]).toEqual([400, 'target_username']);

    const preview = await call(key, 'POST', '/api/v1/monitors/preview', '/api/v1/monitors/preview', { query });
    expect(preview.status).toBe(200);
    expect(preview.body.data).toMatchObject({ query, target_username: null });
    const verdicts = (preview.body.data.posts as { text: string; matched: boolean }[]).map((p) => [p.text, p.matched]);
    expect(verdicts).toEqual(
      expect.arrayContaining([
        ['The new release is out', true],
        ['launch giveaway', false],
      ]),
    );
  });

  it.each([
    ['empty', { query: '' }, 'query: the query is empty'],
    ['1,000 characters', { query: 'x'.repeat(1000) }, 'query: the query is 1000 characters; at most 512'],
    ['an unknown operator', { query: 'launch has:links' }, 'query: unknown operator "has:" in "has:links"'],
    ['matching everything', { query: '-giveaway lang:en' }, 'query: the query would match every post'],
    ['with a username', { query: 'launch', target_username: 'acme' }, 'query: give a username or a query, not both'],
    ['with keywords', { query: 'launch', keywords: ['rocket'] }, 'keywords: a query monitor takes no keywords'],
    [
      'with profile events',
      { query: 'launch', events: ['posts', 'profile'] },
      'events: a query monitor watches no account, so it has no profile',
    ],
    [
      'with deletes',
      { query: 'launch', events: ['posts', 'deletes'] },
      'events: a query monitor watches no account, so it sees no deletions',
    ],
    ['with an unknown event', { query: 'launch', events: ['posts', 'erasures'] }, 'events'],
    ['5,000 characters (over the body bound)', { query: 'x'.repeat(5000) }, 'query'],
  ])('refuses a query %s with a 400 naming the part, nothing saved', async (_label, body, message) => {
    const { accountId, key } = await stack.account('starter', 'manage');
    const r = await call(key, 'POST', '/api/v1/monitors', '/api/v1/monitors', body);
    expect([r.status, r.body.code]).toEqual([400, 'INVALID_REQUEST']);
    expect(r.body.error).toContain(message);
    expect(await stack.db.monitor.count({ where: { accountId } })).toBe(0);
  });
});
