import { createServer, request, type IncomingMessage, type OutgoingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
// Type-only: checks at compile time that the middleware plugs into express without importing it at run time.
import type { Request as ExpressRequest, RequestHandler } from 'express';
import { sign, signedHeaders, webhookMiddleware, type WebhookMiddlewareOptions } from './index';

const SECRET = 'whsec_receiver_test_secret';
const PAYLOAD = {
  event: 'monitor.hit',
  monitor: { id: 'mon_42', targetUsername: 'jack', keywords: ['launch'] },
  tweet: {
    id: '1790000000000000001',
    text: 'We launch today 🚀 — café',
    authorUsername: 'jack',
    createdAt: '2024-05-13T10:00:00.000Z',
  },
  detectedAt: '2024-05-13T10:00:05.123Z',
};
const BODY = JSON.stringify(PAYLOAD);

type Req = IncomingMessage & { body?: unknown };
type Prepare = (req: Req) => Promise<void>;

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  json: Record<string, unknown>;
}

const servers: Server[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
});

function readAll(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** Simulates express.raw(): the body is already a Buffer when the middleware runs. */
const rawParser: Prepare = async (req) => {
  req.body = await readAll(req);
};
/** Simulates express.json() mounted before the middleware: the stream is consumed and the body parsed. */
const jsonParser: Prepare = async (req) => {
  req.body = JSON.parse((await readAll(req)).toString('utf8')) as unknown;
};

/**
 * A real HTTP server that runs the middleware; next() answers 200 with what the handler would see
 * (req.body), next(err) answers 500 with the error message.
 */
async function startServer(options: WebhookMiddlewareOptions<Req>, prepare?: Prepare): Promise<string> {
  const middleware = webhookMiddleware<Req>(options);
  const server = createServer((req: Req, res) => {
    void (async () => {
      if (prepare) await prepare(req);
      middleware(req, res, (err?: unknown) => {
        res.setHeader('Content-Type', 'application/json');
        if (err !== undefined) {
          res.statusCode = 500;
          res.end(JSON.stringify({ nextError: err instanceof Error ? err.message : JSON.stringify(err) }));
          return;
        }
        res.statusCode = 200;
        res.end(JSON.stringify({ handled: true, body: req.body }));
      });
    })();
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/**
 * POSTs with node:http so that headers and framing are exactly as given. `chunks` sends the body in pieces
 * with chunked transfer encoding (no Content-Length); `declareOnly` sends headers only (a Content-Length
 * promising more than is ever sent).
 */
function post(
  url: string,
  opts: { headers?: OutgoingHttpHeaders; body?: Buffer | string; chunks?: (Buffer | string)[]; declareOnly?: boolean },
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: opts.headers ?? {} }, (res) => {
      readAll(res).then((buf) => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, json: JSON.parse(buf.toString('utf8')) });
        if (opts.declareOnly) req.destroy();
      }, reject);
    });
    req.on('error', (err) => {
      if (!opts.declareOnly) reject(err);
    });
    if (opts.declareOnly) {
      req.flushHeaders();
    } else if (opts.chunks) {
      for (const c of opts.chunks) req.write(c);
      req.end();
    } else {
      req.end(opts.body);
    }
  });
}

function delivery(body: Buffer | string = BODY, timestamp?: number, secret = SECRET) {
  return {
    headers: signedHeaders({ secret, event: 'monitor.hit', deliveryId: 'dlv_1', body, timestamp }),
    body,
  };
}

function nowSec(): number {
  return Math.floor(Date.now() / 1000);
}

describe('webhookMiddleware over a real HTTP server', () => {
  let url: string;
  beforeAll(async () => {
    url = await startServer({ secret: SECRET });
  });

  it('verifies a signed delivery, parses it into req.body and calls next()', async () => {
    const reply = await post(url, delivery());
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({ handled: true, body: PAYLOAD });
  });

  it('reads header names in any case on the wire', async () => {
    const ts = nowSec();
    const reply = await post(url, {
      headers: {
        'content-type': 'application/json',
        'X-SERVICE-TIMESTAMP': String(ts),
        'x-SERVICE-signature': sign(SECRET, ts, BODY),
      },
      body: BODY,
    });
    expect(reply.status).toBe(200);
    expect(reply.json.body).toEqual(PAYLOAD);
  });

  it('reads a body sent in chunks (no Content-Length)', async () => {
    const d = delivery();
    const bytes = Buffer.from(BODY, 'utf8');
    const reply = await post(url, {
      headers: d.headers,
      chunks: [bytes.subarray(0, 7), bytes.subarray(7, 60), bytes.subarray(60)], // splits inside multi-byte characters too
    });
    expect(reply.status).toBe(200);
    expect(reply.json.body).toEqual(PAYLOAD);
  });

  it('answers 401 INVALID_SIGNATURE for a tampered body and does not call next', async () => {
    const d = delivery();
    const reply = await post(url, { headers: d.headers, body: BODY.replace('launch today', 'launch tomorrow') });
    expect(reply.status).toBe(401);
    expect(reply.headers['content-type']).toMatch(/^application\/json/);
    expect(reply.json).toEqual({ error: 'Signature mismatch', code: 'INVALID_SIGNATURE' });
  });

  it('answers 401 naming a missing header', async () => {
    const { 'X-Service-Signature': _omitted, ...headers } = delivery().headers;
    const reply = await post(url, { headers, body: BODY });
    expect(reply.status).toBe(401);
    expect(reply.json).toEqual({ error: 'Missing X-Service-Signature header', code: 'INVALID_SIGNATURE' });
  });

  it('answers 401 for a timestamp outside the tolerance, even with a valid signature', async () => {
    const old = await post(url, delivery(BODY, nowSec() - 3600));
    expect(old.status).toBe(401);
    expect(old.json.code).toBe('INVALID_SIGNATURE');
    expect(old.json.error).toMatch(/^Timestamp too old/);
    const future = await post(url, delivery(BODY, nowSec() + 3600));
    expect(future.status).toBe(401);
    expect(future.json.error).toMatch(/^Timestamp too new/);
  });

  it('answers 401 for a malformed signature or timestamp', async () => {
    const d = delivery();
    const shortSig = await post(url, { headers: { ...d.headers, 'X-Service-Signature': 'sha256=abcd' }, body: BODY });
    expect(shortSig.status).toBe(401);
    expect(shortSig.json.error).toMatch(/^Malformed X-Service-Signature/);
    const badTs = await post(url, { headers: { ...d.headers, 'X-Service-Timestamp': 'soon' }, body: BODY });
    expect(badTs.status).toBe(401);
    expect(badTs.json.error).toMatch(/^Invalid X-Service-Timestamp/);
  });

  it('answers 400 INVALID_REQUEST for a validly signed body that is not a JSON object', async () => {
    const notJson = await post(url, delivery('event=monitor.hit'));
    expect(notJson).toMatchObject({
      status: 400,
      json: { error: 'Request body is not valid JSON', code: 'INVALID_REQUEST' },
    });
    const empty = await post(url, delivery(''));
    expect(empty).toMatchObject({ status: 400, json: { code: 'INVALID_REQUEST' } });
    const array = await post(url, delivery('[1,2]'));
    expect(array).toMatchObject({ status: 400, json: { error: 'Request body must be a JSON object' } });
    const nul = await post(url, delivery('null'));
    expect(nul).toMatchObject({ status: 400, json: { error: 'Request body must be a JSON object' } });
  });

  it('verifies a non-UTF-8 body on its exact bytes, then answers 400 because it is not UTF-8 JSON', async () => {
    const binary = Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x80, 0x22, 0x7d]); // {"a":"\xff\xfe\x80"}
    const good = await post(url, delivery(binary));
    expect(good).toMatchObject({
      status: 400,
      json: { error: 'Request body is not valid UTF-8', code: 'INVALID_REQUEST' },
    });
    const tampered = Buffer.from(binary);
    tampered[7] = 0xfd;
    const bad = await post(url, { headers: delivery(binary).headers, body: tampered });
    expect(bad).toMatchObject({ status: 401, json: { error: 'Signature mismatch' } });
  });

  it('accepts a body of exactly 1 MiB by default and answers 413 above it', async () => {
    const limit = 1024 * 1024;
    const prefix = '{"pad":"';
    const exact = prefix + 'x'.repeat(limit - prefix.length - 2) + '"}';
    expect(Buffer.byteLength(exact)).toBe(limit);
    const ok = await post(url, delivery(exact));
    expect(ok.status).toBe(200);

    const over = exact.slice(0, -2) + 'x"}';
    const declared = await post(url, {
      headers: { ...delivery(over).headers, 'Content-Length': limit + 1 },
      declareOnly: true,
    });
    expect(declared.status).toBe(413);
    expect(declared.json).toEqual({ error: `Request body exceeds ${limit} bytes`, code: 'PAYLOAD_TOO_LARGE' });
    expect(declared.headers.connection).toBe('close');
  });
});

describe('webhookMiddleware options and body sources', () => {
  it('applies a configurable limit to a chunked body with no Content-Length', async () => {
    const url = await startServer({ secret: SECRET, maxBodyBytes: 100 });
    const body = JSON.stringify({ pad: 'y'.repeat(200) });
    const reply = await post(url, { headers: delivery(body).headers, chunks: [body.slice(0, 50), body.slice(50)] });
    expect(reply).toMatchObject({
      status: 413,
      json: { error: 'Request body exceeds 100 bytes', code: 'PAYLOAD_TOO_LARGE' },
    });
    const small = await post(url, delivery('{"ok":true}'));
    expect(small).toMatchObject({ status: 200, json: { body: { ok: true } } });
  });

  it('uses req.body when an earlier raw parser left a Buffer (express.raw)', async () => {
    const url = await startServer({ secret: SECRET, maxBodyBytes: 2000 }, rawParser);
    expect(await post(url, delivery())).toMatchObject({ status: 200, json: { body: PAYLOAD } });
    const tampered = await post(url, { headers: delivery().headers, body: BODY + '\n' });
    expect(tampered).toMatchObject({ status: 401, json: { code: 'INVALID_SIGNATURE' } });
    const big = JSON.stringify({ pad: 'z'.repeat(3000) });
    expect(await post(url, delivery(big))).toMatchObject({ status: 413, json: { code: 'PAYLOAD_TOO_LARGE' } });
  });

  it('passes a clear error to next() when another parser already consumed and parsed the body', async () => {
    const url = await startServer({ secret: SECRET }, jsonParser);
    const reply = await post(url, delivery());
    expect(reply.status).toBe(500);
    expect(reply.json.nextError).toMatch(/already consumed.*express\.raw/);
  });

  it('honours the tolerance and clock options (299 s accepted, 301 s refused)', async () => {
    const ts = 1_700_000_000;
    const at = (now: number) => startServer({ secret: SECRET, now: () => now });
    expect((await post(await at(ts + 299), delivery(BODY, ts))).status).toBe(200);
    expect((await post(await at(ts - 299), delivery(BODY, ts))).status).toBe(200);
    expect(await post(await at(ts + 301), delivery(BODY, ts))).toMatchObject({
      status: 401,
      json: { error: 'Timestamp too old: 301 s before now (tolerance 300 s)' },
    });
    expect(await post(await at(ts - 301), delivery(BODY, ts))).toMatchObject({
      status: 401,
      json: { error: 'Timestamp too new: 301 s ahead of now (tolerance 300 s)' },
    });
    const tight = await startServer({ secret: SECRET, now: () => ts + 20, toleranceSec: 10 });
    expect((await post(tight, delivery(BODY, ts))).status).toBe(401);
  });

  it('looks the secret up per request with getSecret (sync or async)', async () => {
    const secrets: Record<string, string> = { '/hooks/a': 'whsec_a', '/hooks/b': 'whsec_b' };
    const url = await startServer({
      getSecret: async (req) => {
        await Promise.resolve();
        return req.url === undefined ? undefined : secrets[req.url];
      },
    });
    expect(await post(`${url}/hooks/a`, delivery(BODY, undefined, 'whsec_a'))).toMatchObject({ status: 200 });
    expect(await post(`${url}/hooks/b`, delivery(BODY, undefined, 'whsec_b'))).toMatchObject({ status: 200 });
    expect(await post(`${url}/hooks/b`, delivery(BODY, undefined, 'whsec_a'))).toMatchObject({
      status: 401,
      json: { error: 'Signature mismatch', code: 'INVALID_SIGNATURE' },
    });
    expect(await post(`${url}/hooks/unknown`, delivery(BODY, undefined, 'whsec_a'))).toMatchObject({
      status: 401,
      json: { error: 'No signing secret is configured for this endpoint', code: 'INVALID_SIGNATURE' },
    });
  });

  it('accepts old and new secrets during a rotation', async () => {
    const url = await startServer({ getSecret: () => ['whsec_new', 'whsec_old'] });
    expect((await post(url, delivery(BODY, undefined, 'whsec_old'))).status).toBe(200);
    expect((await post(url, delivery(BODY, undefined, 'whsec_new'))).status).toBe(200);
    expect((await post(url, delivery(BODY, undefined, 'whsec_other'))).status).toBe(401);
  });

  it('passes a getSecret failure to next(err) instead of answering 401', async () => {
    const url = await startServer({
      getSecret: () => Promise.reject(new Error('secret store unavailable')),
    });
    expect(await post(url, delivery())).toMatchObject({ status: 500, json: { nextError: 'secret store unavailable' } });
  });

  it('refuses invalid options when it is created', () => {
    expect(() => webhookMiddleware({} as WebhookMiddlewareOptions)).toThrow(/exactly one of/);
    expect(() =>
      webhookMiddleware({ secret: SECRET, getSecret: () => SECRET } as unknown as WebhookMiddlewareOptions),
    ).toThrow(/exactly one of/);
    expect(() => webhookMiddleware({ secret: '' })).toThrow(/non-empty/);
    expect(() => webhookMiddleware({ secret: [] })).toThrow(/non-empty/);
    expect(() => webhookMiddleware({ secret: SECRET, maxBodyBytes: 0 })).toThrow(/maxBodyBytes/);
    expect(() => webhookMiddleware({ secret: SECRET, maxBodyBytes: 1.5 })).toThrow(/maxBodyBytes/);
  });

  it('has a shape express accepts (checked by the type checker)', () => {
    const plain: RequestHandler = webhookMiddleware({ secret: SECRET });
    const typed: RequestHandler = webhookMiddleware<ExpressRequest>({
      getSecret: (req) => (req.path === '/hooks/a' ? 'whsec_a' : undefined),
    });
    expect([plain, typed].every((h) => typeof h === 'function' && h.length === 3)).toBe(true);
  });
});
