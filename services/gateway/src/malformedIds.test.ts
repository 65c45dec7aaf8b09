/**
 * Every route of the served OpenAPI document, walked with malformed path parameters through the
 * real gateway and read-api processes: none answers 5xx. A malformed id is "not found" (404
 * NOT_FOUND, or the record's own not-found code), or a 400 naming the parameter.
 */
import { randomUUID } from 'node:crypto';
import { startApiStack, type ApiStack } from '@sts/testing';
import type { openApiDocument } from './http/openapi';

type Doc = typeof openApiDocument;
type Operation = { parameters?: { in: string; name: string }[] };

let stack: ApiStack;
let doc: Doc;
let key: string;

beforeAll(async () => {
  // a few hundred refused calls in a row: the per-minute limit would answer 429 before the id is read
  stack = await startApiStack({ gatewayEnv: { PLAN_STARTER_PER_MINUTE: '100000' } });
  doc = (await (await fetch(`${stack.url}/api/v1/openapi.json`)).json()) as Doc;
  ({ key } = await stack.account('starter', 'manage'));
}, 90_000);

afterAll(async () => {
  await stack?.stop();
});

/** values no id is: a space, quotes, a non-hex and a too-long UUID, unicode, NUL, numbers */
const MALFORMED = [
  'x%20y',
  'x',
  '%27%3B--',
  '00000000-0000-0000-0000-00000000000g',
  '00000000-0000-4000-8000-0000000000000',
  '%E2%98%83',
  '%00',
  '-1',
  '1e999',
];

/** a body the operation accepts, so that the request reaches the id (an empty body is refused first) */
function bodyOf(template: string, method: string): unknown {
  if (method === 'put' && template.endsWith('/webhook')) return { url: 'https://hooks.test/h' };
  if (method === 'patch' && template.endsWith('/webhook')) return { ordering: 'fifo' };
  if (template.endsWith('/recover')) return { since: new Date(Date.now() - 3_600_000).toISOString() };
  if (method === 'patch') return { keywords: ['a'] };
  return {};
}

describe('malformed path parameters', () => {
  it('never answer 5xx on any route of the OpenAPI document: 404 NOT_FOUND or 400 naming the parameter', async () => {
    const seen: string[] = [];
    const wrong: string[] = [];
    const paths = doc.paths as unknown as Record<string, Record<string, Operation>>;
    for (const [template, ops] of Object.entries(paths)) {
      const params = [...template.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
      if (params.length === 0) continue;
      for (const method of Object.keys(ops).filter((m) => ['get', 'post', 'put', 'patch', 'delete'].includes(m))) {
        for (const bad of MALFORMED) {
          const path = params.reduce((p, name) => p.replace(`{${name}}`, bad), template);
          const body = method === 'get' || method === 'delete' ? undefined : JSON.stringify(bodyOf(template, method));
          const res = await fetch(`${stack.url}${path}`, {
            method: method.toUpperCase(),
            headers: {
              authorization: `Bearer ${key}`,
              'idempotency-key': randomUUID(),
              ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
            },
            ...(body !== undefined ? { body } : {}),
          });
          const text = await res.text();
          const error = JSON.parse(text) as { code?: string; param?: string };
          const outcome = `${method.toUpperCase()} ${path} → ${res.status} ${error.code ?? ''} ${error.param ?? ''}`;
          seen.push(outcome);
          const named = res.status === 400 && error.param !== undefined && [...params, 'path'].includes(error.param);
          const notFound = res.status === 404 && /NOT_FOUND$/.test(error.code ?? '');
          if (!named && !notFound) wrong.push(outcome);
        }
      }
    }
    expect(wrong).toEqual([]);
    // the walk covered the management routes, not only the read ones
    expect(seen.some((s) => s.startsWith('DELETE /api/v1/monitors/'))).toBe(true);
    expect(seen.some((s) => s.startsWith('POST /api/v1/deliveries/'))).toBe(true);
  }, 240_000);
});
