/**
 * The access log: one `request` line per API call at `info` (request id, method, path, route
 * template, status, duration), and none when the level is above `info` (read-api then skips
 * building the line: winston would format it before dropping it).
 */
import { PassThrough } from 'node:stream';
import { createLogger } from '@sts/common';
import { createDbClient, type Db } from '@sts/db';
import { createLocalSource, createSocialUser } from '@sts/social';
import { createTestDatabase, rawRequest, waitFor } from '@sts/testing';
import { createReadApi, type ReadApi } from './app';

const TOKEN = 'internal-token-for-tests-0123456789';

describe('read-api access log', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let app: ReadApi;
  let port: number;
  const lines: Array<Record<string, unknown>> = [];
  const stream = new PassThrough();
  const logger = createLogger({ service: 'read-api-test', level: 'info', stream });
  let buf = '';
  stream.on('data', (c: Buffer) => {
    buf += c.toString();
    const parts = buf.split('\n');
    buf = parts.pop()!;
    for (const p of parts) lines.push(JSON.parse(p) as Record<string, unknown>);
  });

  beforeAll(async () => {
    testDb = await createTestDatabase();
    db = createDbClient({ url: testDb.url, poolSize: 2 });
    await createSocialUser(db, { username: 'bob', name: 'Bob' });
    app = createReadApi({ db, source: createLocalSource({ db }), internalToken: TOKEN, logger });
    port = await app.listen(0, '127.0.0.1');
  });

  afterAll(async () => {
    await app.close();
    await db.$disconnect();
    await testDb.drop();
  });

  const call = (path: string, id: string) =>
    rawRequest(port, 'GET', path, { headers: { 'x-internal-token': TOKEN, 'x-request-id': id } });
  const logged = (id: string) => lines.filter((l) => l.message === 'request' && l.requestId === id);

  it('writes one line per call at info, with the route template and status', async () => {
    logger.level = 'info';
    expect((await call('/api/v1/users/bob', 'log-ok')).status).toBe(200);
    expect((await call('/api/v1/nope', 'log-404')).status).toBe(404);
    await waitFor(() => logged('log-404').length === 1, 20_000);
    expect(logged('log-ok')).toEqual([
      expect.objectContaining({
        level: 'info',
        service: 'read-api-test',
        method: 'GET',
        path: '/api/v1/users/bob',
        route: '/api/v1/users/:username',
        status: 200,
        durationMs: expect.any(Number) as number,
      }),
    ]);
    expect(logged('log-404')).toEqual([expect.objectContaining({ route: 'unmatched', status: 404 })]);
  });

  it('writes none above info', async () => {
    logger.level = 'warn';
    expect((await call('/api/v1/users/bob', 'log-quiet')).status).toBe(200);
    logger.level = 'info';
    expect((await call('/api/v1/users/bob', 'log-after')).status).toBe(200);
    await waitFor(() => logged('log-after').length === 1, 20_000);
    expect(logged('log-quiet')).toEqual([]);
  });
});
