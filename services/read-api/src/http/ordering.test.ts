/**
 * read-api never answers out of order on a connection that still owes answers: a request
 * node:http cannot read (a head over its limit, a malformed line) pipelined behind good ones gets
 * its error answer only after theirs, then the connection closes. The gateway pipelines calls of
 * several clients on one connection, so an early error would land on other clients' calls.
 */
import net from 'node:net';
import { createLogger } from '@sts/common';
import { createDbClient, type Db } from '@sts/db';
import { createLocalSource, createSocialUser } from '@sts/social';
import { createTestDatabase } from '@sts/testing';
import { createReadApi, type ReadApi } from '../app';

const TOKEN = 'internal-token-for-tests-0123456789';

/** writes `raw` on a new connection, reads until the server closes it; the answers' status lines and bodies */
async function exchange(port: number, raw: string): Promise<Array<{ status: number; body: string }>> {
  const socket = net.connect(port, '127.0.0.1');
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.write(raw);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the connection was not closed')), 10_000);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  let data = Buffer.concat(chunks).toString('latin1');
  const answers: Array<{ status: number; body: string }> = [];
  while (data.length > 0) {
    const end = data.indexOf('\r\n\r\n');
    const head = data.slice(0, end);
    const length = Number(/content-length: (\d+)/i.exec(head)![1]);
    answers.push({ status: Number(head.split(' ')[1]), body: data.slice(end + 4, end + 4 + length) });
    data = data.slice(end + 4 + length);
  }
  return answers;
}

describe('read-api answer order on a pipelined connection', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let app: ReadApi;
  let port: number;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    db = createDbClient({ url: testDb.url, poolSize: 2 });
    await createSocialUser(db, { username: 'bob', name: 'Bob' });
    app = createReadApi({
      db,
      source: createLocalSource({ db }),
      internalToken: TOKEN,
      logger: createLogger({ service: 'read-api-test', level: 'error' }),
      userCacheTtlMs: 0, // every call goes to PostgreSQL: still pending when the bad request is read
    });
    port = await app.listen(0, '127.0.0.1');
  });

  afterAll(async () => {
    await app.close();
    await db.$disconnect();
    await testDb.drop();
  });

  const good = (id: string) =>
    `GET /api/v1/users/bob HTTP/1.1\r\nHost: r\r\nx-internal-token: ${TOKEN}\r\nx-request-id: ${id}\r\n\r\n`;

  it.each([
    ['a head over the limit', `GET /api/v1/users/bob HTTP/1.1\r\nHost: r\r\nx-big: ${'a'.repeat(17_000)}\r\n\r\n`, 431],
    ['a malformed header line', 'GET /api/v1/users/bob HTTP/1.1\r\nHost: r\r\nno colon here\r\n\r\n', 400],
  ])(
    '%s behind good requests: their answers first, in order, then the error, then the close',
    async (_n, bad, status) => {
      const answers = await exchange(port, good('r1') + good('r2') + good('r3') + bad);
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, status]);
      expect(
        answers.slice(0, 3).map((a) => (JSON.parse(a.body) as { data: { username: string } }).data.username),
      ).toEqual(['bob', 'bob', 'bob']);
      expect(JSON.parse(answers[3]!.body)).toMatchObject({ code: 'INVALID_REQUEST' });
    },
  );

  it('a bad request with nothing owed is answered at once', async () => {
    const answers = await exchange(port, 'GET /x HTTP/1.1\r\nHost: r\r\nno colon\r\n\r\n');
    expect(answers.map((a) => a.status)).toEqual([400]);
  });
});
