/**
 * Walks a list of bad inputs through the running read-api: each must be a 4xx JSON error with a
 * code and a message naming the problem, never a 5xx, HTML or a stack trace.
 */
import net from 'node:net';
import { createLogger } from '@sts/common';
import { createDbClient, type Db } from '@sts/db';
import { createLocalSource, createSocialTweet, createSocialUser, encodeCursor } from '@sts/social';
import { createTestDatabase, rawRequest, type RawResponse } from '@sts/testing';
import { createReadApi, type ReadApi } from './app';

const TOKEN = 'internal-token-for-tests-0123456789';

interface Case {
  name: string;
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
  status: number;
  code: string;
  /** what the message must mention */
  message: RegExp;
  param?: string;
}

describe('read-api bad input', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let app: ReadApi;
  let port: number;
  let account: string;
  let otherMonitor: string;
  let ownMonitor: string;
  let searchCursor: string;
  let timelineCursor: string;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    db = createDbClient({ url: testDb.url, poolSize: 2 });
    await createSocialUser(db, { username: 'bob', name: 'Bob' });
    for (let i = 0; i < 3; i++) await createSocialTweet(db, { authorUsername: 'bob', text: `hello ${i}` });
    account = (await db.account.create({ data: { email: 'a@example.com' } })).id;
    const other = (await db.account.create({ data: { email: 'b@example.com' } })).id;
    ownMonitor = (await db.monitor.create({ data: { accountId: account, targetUsername: 'bob', targetKey: 'bob' } }))
      .id;
    otherMonitor = (await db.monitor.create({ data: { accountId: other, targetUsername: 'bob', targetKey: 'bob' } }))
      .id;
    app = createReadApi({
      db,
      source: createLocalSource({ db }),
      internalToken: TOKEN,
      logger: createLogger({ service: 'read-api-test', level: 'error' }),
    });
    port = await app.listen(0, '127.0.0.1');
    const s = await rawRequest(port, 'GET', '/api/v1/search?q=hello&limit=1', {
      headers: { 'x-internal-token': TOKEN },
    });
    searchCursor = (s.json!.meta as { next_cursor: string }).next_cursor;
    const t = await rawRequest(port, 'GET', '/api/v1/users/bob/tweets?limit=1', {
      headers: { 'x-internal-token': TOKEN },
    });
    timelineCursor = (t.json!.meta as { next_cursor: string }).next_cursor;
    expect(searchCursor).toBeTruthy();
    expect(timelineCursor).toBeTruthy();
  });

  afterAll(async () => {
    await app.close();
    await db.$disconnect();
    await testDb.drop();
  });

  function cases(): Case[] {
    const badLimit = (path: string): Case[] =>
      [
        ['non-numeric', 'abc'],
        ['negative', '-1'],
        ['zero', '0'],
        ['fractional', '1.5'],
        ['too big', '101'],
        ['huge', '99999999999999999999999'],
        ['exponent', '1e2'],
        ['leading plus', '%2B5'],
        ['plus as space', '+5'],
        ['leading space', '%205'],
        ['trailing space', '5%20'],
        ['leading zero', '05'],
        ['hex', '0x10'],
        ['empty', ''],
        ['Infinity', 'Infinity'],
        ['NaN', 'NaN'],
        ['Arabic-Indic digit', '%D9%A3'],
      ].map(([what, v]) => ({
        name: `${path} limit ${what}`,
        path: `${path}${path.includes('?') ? '&' : '?'}limit=${v}`,
        status: 400,
        code: 'INVALID_REQUEST',
        message: /limit must be an integer from 1 to 100/,
        param: 'limit',
      }));
    const list: Case[] = [
      ...badLimit('/api/v1/users/bob/tweets'),
      ...badLimit('/api/v1/search?q=hello'),
      ...badLimit(`/api/v1/monitors/${ownMonitor}/hits`),
      {
        name: 'repeated limit',
        path: '/api/v1/users/bob/tweets?limit=1&limit=2',
        status: 400,
        code: 'INVALID_REQUEST',
        message: /limit must be given at most once/,
        param: 'limit',
      },
      // q
      {
        name: 'missing q',
        path: '/api/v1/search',
        status: 400,
        code: 'INVALID_REQUEST',
        message: /q is required/,
        param: 'q',
      },
      {
        name: 'empty q',
        path: '/api/v1/search?q=',
        status: 400,
        code: 'INVALID_REQUEST',
        message: /q must not be empty/,
        param: 'q',
      },
      {
        name: 'blank q',
        path: '/api/v1/search?q=%20%20+',
        status: 400,
        code: 'INVALID_REQUEST',
        message: /q must not be empty/,
        param: 'q',
      },
      {
        name: 'overlong q',
        path: `/api/v1/search?q=${'a'.repeat(513)}`,
        status: 400,
        code: 'INVALID_REQUEST',
        message: /q must be at most 512 characters/,
        param: 'q',
      },
      {
        name: 'repeated q',
        path: '/api/v1/search?q=a&q=b',
        status: 400,
        code: 'INVALID_REQUEST',
        message: /q must be given at most once/,
        param: 'q',
      },
      {
        name: 'q with NUL',
        path: '/api/v1/search?q=a%00b',
        status: 400,
        code: 'INVALID_REQUEST',
        message: /q must not contain control characters/,
        param: 'q',
      },
      {
        name: 'q with bad percent-encoding',
        path: '/api/v1/search?q=%E0%A4%A',
        status: 400,
        code: 'INVALID_REQUEST',
        message: /q contains malformed percent-encoding/,
        param: 'q',
      },
      {
        name: 'bad percent-encoding in a parameter name',
        path: '/api/v1/search?q=hello&%ZZ=1',
        status: 400,
        code: 'INVALID_REQUEST',
        message: /query contains malformed percent-encoding/,
        param: 'query',
      },
      {
        name: 'bad percent-encoding in limit',
        path: '/api/v1/users/bob/tweets?limit=%E0',
        status: 400,
        code: 'INVALID_REQUEST',
        message: /limit contains malformed percent-encoding/,
        param: 'limit',
      },
      // usernames
      ...[
        ['too long', 'a'.repeat(16)],
        ['hyphen', 'bad-name'],
        ['dot', 'bob.smith'],
        ['Unicode', '%C3%A9lise'],
        ['emoji', '%F0%9F%9A%80'],
        ['encoded slash', 'a%2Fb'],
        ['space', 'a%20b'],
        ['at sign', '%40bob'],
        ['NUL', 'bob%00'],
      ].flatMap(([what, u]) =>
        ['', '/tweets'].map((suffix): Case => ({
          name: `username ${what}${suffix}`,
          path: `/api/v1/users/${u}${suffix}`,
          status: 400,
          code: 'INVALID_REQUEST',
          message: /username must be 1 to 15 letters, digits or underscores/,
          param: 'username',
        })),
      ),
      // tweet ids
      ...[
        ['letters', 'abc'],
        ['zero', '0'],
        ['negative', '-1'],
        ['fractional', '1.5'],
        ['exponent', '1e5'],
        ['leading zero', '0123'],
        ['20 digits', '12345678901234567890'],
        ['over int64', '9223372036854775808'],
        ['Unicode digits', '%D9%A3%D9%A4'],
        ['space', '12%2034'],
      ].map(([what, id]): Case => ({
        name: `tweet id ${what}`,
        path: `/api/v1/tweets/${id}`,
        status: 400,
        code: 'INVALID_REQUEST',
        message: /id must be a numeric tweet id/,
        param: 'id',
      })),
      // monitors
      ...[
        'include_hits=true',
        'include_hits=2',
        'include_hits=',
        'include_hits=yes',
        'include_hits=1&include_hits=1',
      ].map((q): Case => ({
        name: `monitors ${q}`,
        path: `/api/v1/monitors?${q}`,
        status: 400,
        code: 'INVALID_REQUEST',
        message: /include_hits/,
        param: 'include_hits',
      })),
      ...['0', '11', 'abc', '1.5', '-3', '1e1', ''].map((v): Case => ({
        name: `hit_limit ${v || 'empty'}`,
        path: `/api/v1/monitors?include_hits=1&hit_limit=${v}`,
        status: 400,
        code: 'INVALID_REQUEST',
        message: /hit_limit must be an integer from 1 to 10/,
        param: 'hit_limit',
      })),
      {
        name: 'monitor id not a UUID',
        path: '/api/v1/monitors/not-a-uuid/hits',
        status: 404,
        code: 'NOT_FOUND',
        message: /monitor not found/,
      },
      {
        name: "another account's monitor",
        path: `/api/v1/monitors/${otherMonitor}/hits`,
        status: 404,
        code: 'NOT_FOUND',
        message: /monitor not found/,
      },
      // cursors
      ...[
        ['garbage', 'not*a*cursor'],
        ['empty', ''],
        ['foreign base64', 'AAAA'],
        ['too long', 'A'.repeat(2000)],
        ['forged', encodeCursor('tl', ['-1', 'x'])],
      ].flatMap(([what, c]) =>
        ['/api/v1/users/bob/tweets', '/api/v1/search?q=hello', `/api/v1/monitors/${ownMonitor}/hits`].map(
          (p): Case => ({
            name: `cursor ${what} on ${p}`,
            path: `${p}${p.includes('?') ? '&' : '?'}cursor=${c}`,
            status: 400,
            code: 'INVALID_REQUEST',
            message: /cursor is not valid/,
            param: 'cursor',
          }),
        ),
      ),
      {
        name: 'search cursor on a timeline',
        path: `/api/v1/users/bob/tweets?cursor=${searchCursor}`,
        status: 400,
        code: 'INVALID_REQUEST',
        message: /cursor is not valid/,
        param: 'cursor',
      },
      {
        name: 'timeline cursor on hits',
        path: `/api/v1/monitors/${ownMonitor}/hits?cursor=${timelineCursor}`,
        status: 400,
        code: 'INVALID_REQUEST',
        message: /cursor is not valid/,
        param: 'cursor',
      },
      {
        name: 'repeated cursor',
        path: `/api/v1/search?q=hello&cursor=${searchCursor}&cursor=${searchCursor}`,
        status: 400,
        code: 'INVALID_REQUEST',
        message: /cursor must be given at most once/,
        param: 'cursor',
      },
      // routes and methods
      ...[
        '/',
        '/api',
        '/api/v1',
        '/api/v1/nope',
        '/api/v2/users/bob',
        '/api/v1/users',
        '/api/v1/users/bob/likes',
        '/API/V1/USERS/bob',
        '/api/v1/monitors/x',
        '/index.html',
        '/api/v1/users//tweets',
      ].map((p): Case => ({
        name: `unknown route ${p}`,
        path: p,
        status: 404,
        code: 'NOT_FOUND',
        message: /no such endpoint/,
      })),
      ...(
        [
          ['DELETE', '/api/v1/users/bob'],
          ['PUT', '/api/v1/tweets/123'],
          ['PATCH', '/api/v1/monitors'],
          ['POST', '/api/v1/search?q=x'],
          ['GET', '/api/v1/tweets'],
          ['OPTIONS', '/api/v1/users/bob'],
        ] as const
      ).map(([method, p]): Case => ({
        name: `${method} ${p}`,
        method,
        path: p,
        status: 405,
        code: 'METHOD_NOT_ALLOWED',
        message: new RegExp(`${method} is not allowed`),
      })),
      // bad percent-encoding in the path
      ...[
        '/api/v1/users/%E0%A4%A',
        '/api/v1/users/%ZZ',
        '/api/v1/tweets/%',
        '/api/v1/%C0%AF/x',
        '/api/v1/users/%ED%A0%80/tweets',
      ].map((p): Case => ({
        name: `bad encoding ${p}`,
        path: p,
        status: 400,
        code: 'INVALID_REQUEST',
        message: /malformed percent-encoding/,
        param: 'path',
      })),
      // request bodies
      {
        name: 'malformed JSON',
        method: 'POST',
        path: '/api/v1/tweets',
        headers: { 'content-type': 'application/json' },
        body: '{"text": ',
        status: 400,
        code: 'INVALID_REQUEST',
        message: /not valid JSON/,
        param: 'body',
      },
      {
        name: 'JSON with trailing garbage',
        method: 'POST',
        path: '/api/v1/tweets',
        headers: { 'content-type': 'application/json' },
        body: '{"text": "hi"} x',
        status: 400,
        code: 'INVALID_REQUEST',
        message: /not valid JSON/,
        param: 'body',
      },
      {
        name: 'missing body',
        method: 'POST',
        path: '/api/v1/tweets',
        headers: { 'content-type': 'application/json' },
        status: 400,
        code: 'INVALID_REQUEST',
        message: /body is required/,
        param: 'body',
      },
      {
        name: 'overlong text',
        method: 'POST',
        path: '/api/v1/tweets',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'é'.repeat(281) }),
        status: 400,
        code: 'INVALID_REQUEST',
        message: /text must be at most 280 characters/,
        param: 'text',
      },
      {
        name: 'text not a string',
        method: 'POST',
        path: '/api/v1/tweets',
        headers: { 'content-type': 'application/json' },
        body: '{"text": ["a"]}',
        status: 400,
        code: 'INVALID_REQUEST',
        message: /text must be a string/,
        param: 'text',
      },
      ...['text/plain', 'application/xml', 'multipart/form-data; boundary=x', 'application/jsonx'].map(
        (type): Case => ({
          name: `content type ${type}`,
          method: 'POST',
          path: '/api/v1/tweets',
          headers: { 'content-type': type },
          body: '{"text":"hi"}',
          status: 415,
          code: 'UNSUPPORTED_MEDIA_TYPE',
          message: /Content-Type must be application\/json/,
        }),
      ),
      {
        name: 'gzip body',
        method: 'POST',
        path: '/api/v1/tweets',
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
        body: 'xx',
        status: 415,
        code: 'UNSUPPORTED_MEDIA_TYPE',
        message: /Content-Encoding/,
      },
      {
        name: 'body too large',
        method: 'POST',
        path: '/api/v1/tweets',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'a', pad: 'x'.repeat(100_000) }),
        status: 413,
        code: 'PAYLOAD_TOO_LARGE',
        message: /larger than/,
      },
    ];
    return list;
  }

  function assertCleanError(c: Case, r: RawResponse): void {
    const label = `${c.method ?? 'GET'} ${c.path.slice(0, 80)} (${c.name})`;
    expect({ label, status: r.status }).toEqual({ label, status: c.status });
    expect(r.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(r.text).not.toMatch(/<html|<!DOCTYPE|\bat .+\.ts:\d+|Error:/i);
    expect(r.json).toBeDefined();
    expect({ label, code: r.json!.code }).toEqual({ label, code: c.code });
    expect({ label, error: r.json!.error }).toEqual({ label, error: expect.stringMatching(c.message) });
    expect(r.json!.request_id).toEqual(expect.any(String));
    if (c.param) expect({ label, param: r.json!.param }).toEqual({ label, param: c.param });
  }

  it('answers every bad input with a 4xx JSON error naming the problem', async () => {
    const list = cases();
    expect(list.length).toBeGreaterThan(150);
    for (const c of list) {
      const r = await rawRequest(port, c.method ?? 'GET', c.path, {
        headers: { 'x-internal-token': TOKEN, 'x-account-id': account, ...c.headers },
        body: c.body,
      });
      assertCleanError(c, r);
    }
  });

  it('answers malformed HTTP with a JSON 400, and the server keeps serving', async () => {
    const raw = (payload: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = net.connect(port, '127.0.0.1', () => socket.end(payload));
        let out = '';
        socket.on('data', (c: Buffer) => (out += c.toString()));
        socket.on('end', () => resolve(out));
        socket.on('error', reject);
      });
    for (const payload of [
      'GET /api/v1/users/a b HTTP/1.1\r\nHost: x\r\n\r\n',
      'GARBAGE\r\n\r\n',
      `GET /api/v1/users/bob HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      'GET /api/v1/users/bob HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n',
    ]) {
      const out = await raw(payload);
      expect(out).toMatch(/^HTTP\/1\.1 4(00|31) /);
      expect(out).toContain('content-type: application/json');
      const body = JSON.parse(out.slice(out.indexOf('\r\n\r\n') + 4)) as { code: string; error: string };
      expect(body.code).toBe('INVALID_REQUEST');
      expect(body.error).toMatch(/malformed HTTP request|headers are too large/);
    }
    const ok = await rawRequest(port, 'GET', '/api/v1/users/bob', { headers: { 'x-internal-token': TOKEN } });
    expect(ok.status).toBe(200);
  });
});
