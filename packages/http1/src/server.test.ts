/**
 * The HTTP/1.1 server, spoken to over raw TCP: framing, pipelining, strictness against
 * smuggling-shaped input, timeouts and shutdown.
 */
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import {
  createHttpServer,
  type HttpRequest,
  type HttpResponder,
  type HttpServer,
  type HttpServerOptions,
} from './server';
import { prng } from '../test/differential';

interface Answer {
  status: number;
  head: string;
  headers: Record<string, string>;
  body: string;
}

/** A raw client: collects bytes and cuts them into answers by Content-Length. */
class RawClient {
  private data = Buffer.alloc(0);
  closed = false;
  private waiters: Array<() => void> = [];
  readonly socket: net.Socket;

  constructor(port: number) {
    this.socket = net.connect(port, '127.0.0.1');
    this.socket.on('data', (c: Buffer) => {
      this.data = Buffer.concat([this.data, c]);
      this.wake();
    });
    this.socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    this.socket.on('error', () => undefined);
  }

  private wake() {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  ready(): Promise<void> {
    return new Promise((r) => this.socket.once('connect', () => r()));
  }

  write(s: string | Buffer): void {
    this.socket.write(s);
  }

  /** the next answer; null if the connection closed first */
  async next(timeoutMs = 3000, headRequest = false): Promise<Answer | null> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const end = this.data.indexOf('\r\n\r\n');
      if (end !== -1) {
        const head = this.data.toString('latin1', 0, end);
        const lines = head.split('\r\n');
        const headers: Record<string, string> = {};
        for (const l of lines.slice(1)) {
          const i = l.indexOf(':');
          headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
        }
        const status = Number(lines[0]!.split(' ')[1]);
        const len = headRequest || status === 100 ? 0 : Number(headers['content-length'] ?? 0);
        if (this.data.length >= end + 4 + len) {
          const body = this.data.toString('utf8', end + 4, end + 4 + len);
          this.data = this.data.subarray(end + 4 + len);
          return { status, head, headers, body };
        }
      }
      if (this.closed) return null;
      if (Date.now() > deadline) throw new Error(`no complete answer; have ${JSON.stringify(this.data.toString())}`);
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 50);
      });
    }
  }

  async waitClosed(timeoutMs = 3000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    return this.closed;
  }

  /** bytes received and not yet read as an answer */
  get rest(): string {
    return this.data.toString();
  }

  destroy() {
    this.socket.destroy();
  }
}

/** what a user of the server passes (the gateway passes the API's error format and request-id rule) */
const jsonErrors: Partial<HttpServerOptions> = {
  errorBody: (e) => ({
    contentType: 'application/json; charset=utf-8',
    body: JSON.stringify({ error: e.message, code: e.code, request_id: e.requestId }),
  }),
  requestId: (v) => (v !== undefined && /^[A-Za-z0-9._:-]{1,128}$/.test(v) ? v : randomUUID()),
};

describe('http1 server', () => {
  let server: HttpServer;
  let port: number;
  const seen: HttpRequest[] = [];
  const clients: RawClient[] = [];

  async function start(opts: Partial<HttpServerOptions> = {}) {
    server = createHttpServer({
      handler: (req, res) => {
        seen.push(req);
        const delay = Number(req.headers['x-delay'] ?? 0);
        const answer = () =>
          res.send(
            200,
            `content-type: application/json\r\nx-request-id: ${req.requestId}\r\n`,
            JSON.stringify({
              method: req.method,
              target: req.target,
              path: req.path,
              body: req.body?.toString('utf8') ?? null,
            }),
          );
        if (req.headers['x-throw']) throw new Error('handler bug');
        if (delay > 0) setTimeout(answer, delay);
        else answer();
      },
      ...jsonErrors,
      ...opts,
    });
    port = await server.listen(0, '127.0.0.1');
  }

  async function client(): Promise<RawClient> {
    const c = new RawClient(port);
    clients.push(c);
    await c.ready();
    return c;
  }

  afterEach(async () => {
    for (const c of clients.splice(0)) c.destroy();
    seen.length = 0;
    await server.close(100);
  });

  it('answers several requests on one keep-alive connection, with Date and Content-Length', async () => {
    await start();
    const c = await client();
    c.write('GET /a?x=1 HTTP/1.1\r\nHost: h\r\n\r\n');
    const a = await c.next();
    expect(a!.status).toBe(200);
    expect(JSON.parse(a!.body)).toEqual({ method: 'GET', target: '/a?x=1', path: '/a', body: null });
    expect(a!.headers.date).toMatch(/GMT$/);
    expect(Number(a!.headers['content-length'])).toBe(Buffer.byteLength(a!.body));
    expect(a!.headers.connection).toBeUndefined();
    c.write('GET /b HTTP/1.1\r\nHost: h\r\n\r\n');
    expect(JSON.parse((await c.next())!.body).path).toBe('/b');
    expect(c.closed).toBe(false);
  });

  it('with keepHeaders, hands the handler only those headers (and the ones the server needs), checking every line', async () => {
    await start({ keepHeaders: ['x-a'] });
    const c = await client();
    c.write('GET /k HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nX-B: 2\r\nX-Request-Id: r-1\r\n\r\n');
    expect((await c.next())!.status).toBe(200);
    expect({ ...seen[0]!.headers }).toEqual({ host: 'h', 'x-a': '1', 'x-request-id': 'r-1' });
    c.write('GET /k HTTP/1.1\r\nHost: h\r\nX-B: a\x01b\r\n\r\n');
    expect((await c.next())!.status).toBe(400);
  });

  it('answers pipelined requests in order even when the first one is slower', async () => {
    await start();
    const c = await client();
    c.write(
      'GET /slow HTTP/1.1\r\nHost: h\r\nX-Delay: 150\r\n\r\nPOST /fast HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhiGET /third HTTP/1.1\r\nHost: h\r\n\r\n',
    );
    const paths = [];
    for (let i = 0; i < 3; i++) paths.push(JSON.parse((await c.next())!.body) as { path: string; body: string });
    expect(paths.map((p) => p.path)).toEqual(['/slow', '/fast', '/third']);
    expect(paths[1]!.body).toBe('hi');
  });

  describe('pipelining', () => {
    /** a server whose handler answers nothing itself: the test answers through `held` */
    async function holding(opts: Partial<HttpServerOptions> = {}) {
      const held: Array<{ req: HttpRequest; res: HttpResponder }> = [];
      server = createHttpServer({ handler: (req, res) => held.push({ req, res }), ...opts });
      port = await server.listen(0, '127.0.0.1');
      return held;
    }
    const answer = (h: { req: HttpRequest; res: HttpResponder }, body = h.req.path) =>
      h.res.send(200, 'content-type: text/plain\r\n', body);
    const settle = () => new Promise((r) => setTimeout(r, 50));
    const until = async (check: () => boolean) => {
      for (let i = 0; i < 100 && !check(); i++) await settle();
    };

    it('hands safe requests to the handler together; answers wait for the earlier ones, then leave in one write', async () => {
      const held = await holding();
      const writes: number[] = [];
      server.server.on('connection', (socket: net.Socket) => {
        const s = socket as unknown as { _write: (...a: unknown[]) => void; _writev: (...a: unknown[]) => void };
        const write = s._write.bind(socket);
        const writev = s._writev.bind(socket);
        s._write = (...a) => (writes.push(1), write(...a));
        s._writev = (chunks, ...a) => (writes.push((chunks as unknown[]).length), writev(chunks, ...a));
      });
      const c = await client();
      c.write(
        'GET /0 HTTP/1.1\r\nHost: h\r\n\r\nHEAD /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n',
      );
      await until(() => held.length === 3);
      expect(held.map((h) => h.req.path)).toEqual(['/0', '/1', '/2']);
      expect(server.inFlight).toBe(3);
      answer(held[2]!);
      answer(held[1]!);
      await settle();
      expect(c.rest).toBe(''); // held behind /0
      answer(held[0]!);
      expect((await c.next())!.body).toBe('/0');
      const head = (await c.next(3000, true))!;
      expect(head.headers['content-length']).toBe('2');
      expect((await c.next())!.body).toBe('/2');
      expect(writes).toEqual([3]); // the three answers of that tick: one writev
      expect(server.inFlight).toBe(0);
    });

    it('a request that is not safe runs alone: after the answers before it, and before anything after it', async () => {
      const held = await holding();
      const c = await client();
      c.write(
        'GET /a HTTP/1.1\r\nHost: h\r\n\r\nPOST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhiGET /c HTTP/1.1\r\nHost: h\r\n\r\n',
      );
      await until(() => held.length > 0);
      await settle();
      expect(held.map((h) => h.req.path)).toEqual(['/a']);
      answer(held[0]!);
      await until(() => held.length > 1);
      await settle();
      expect(held.map((h) => h.req.path)).toEqual(['/a', '/b']);
      expect(held[1]!.req.body!.toString()).toBe('hi');
      answer(held[1]!);
      await until(() => held.length > 2);
      answer(held[2]!);
      const bodies = [];
      for (let i = 0; i < 3; i++) bodies.push((await c.next())!.body);
      expect(bodies).toEqual(['/a', '/b', '/c']);
    });

    it('a framing error behind owed requests is answered after them, then the connection closes', async () => {
      const held = await holding(jsonErrors);
      const c = await client();
      c.write(
        'GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\nBROKEN\r\n\r\nGET /c HTTP/1.1\r\nHost: h\r\n\r\n',
      );
      await until(() => held.length === 2);
      await settle();
      expect(c.rest).toBe('');
      answer(held[1]!);
      answer(held[0]!);
      expect((await c.next())!.body).toBe('/a');
      expect((await c.next())!.body).toBe('/b');
      const refused = (await c.next())!;
      expect(refused.status).toBe(400);
      expect(JSON.parse(refused.body).error).toBe('malformed request line');
      expect(refused.headers.connection).toBe('close');
      expect(await c.waitClosed()).toBe(true);
      expect(held).toHaveLength(2);
    });

    it('Connection: close in a pipeline: the answers up to it, then the end; nothing after it is handled', async () => {
      await start();
      const c = await client();
      c.write(
        'GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\nGET /c HTTP/1.1\r\nHost: h\r\n\r\n',
      );
      const a = (await c.next())!;
      const b = (await c.next())!;
      expect([JSON.parse(a.body).path, JSON.parse(b.body).path]).toEqual(['/a', '/b']);
      expect(a.headers.connection).toBeUndefined();
      expect(b.headers.connection).toBe('close');
      expect(await c.waitClosed()).toBe(true);
      expect(c.rest).toBe('');
      expect(seen.map((r) => r.path)).toEqual(['/a', '/b']);
    });

    it('a long-lived answer behind an owed one never starts: the earlier answer is written, then the connection ends', async () => {
      let closedCalls = 0;
      let live: ReturnType<HttpResponder['stream']> | undefined;
      const held = await holding({
        handler: (req, res) => {
          if (req.path !== '/live') held.push({ req, res });
          else live = res.stream(200, '', { maxUnsentBytes: 1024, onClose: () => closedCalls++ });
        },
      });
      const c = await client();
      c.write('GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /live HTTP/1.1\r\nHost: h\r\n\r\n');
      await until(() => live !== undefined);
      expect(live!.closed).toBe(true);
      expect(live!.write('x')).toBe(false);
      expect(closedCalls).toBe(1);
      answer(held[0]!);
      expect((await c.next())!.body).toBe('/a');
      expect(await c.waitClosed()).toBe(true);
      expect(c.rest).toBe('');
      expect(server.inFlight).toBe(0);
    });

    it('close() with pipelined requests in flight writes every answer, the last with Connection: close', async () => {
      const held = await holding();
      const c = await client();
      c.write('GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n');
      await until(() => held.length === 2);
      const closing = server.close(5000);
      answer(held[1]!);
      answer(held[0]!);
      const a = (await c.next())!;
      const b = (await c.next())!;
      expect([a.body, b.body]).toEqual(['/a', '/b']);
      expect(a.headers.connection).toBeUndefined();
      expect(b.headers.connection).toBe('close');
      await closing;
      expect(await c.waitClosed()).toBe(true);
    });

    it('answers given while the client is not reading wait for one drain, however many there are', async () => {
      const held = await holding();
      let socket: net.Socket | undefined;
      server.server.on('connection', (s: net.Socket) => (socket = s));
      const c = await client();
      c.socket.pause(); // takes nothing
      c.write('GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\nGET /c HTTP/1.1\r\nHost: h\r\n\r\n');
      await until(() => held.length === 3);
      const drains = socket!.listenerCount('drain');
      const big = Buffer.alloc(4 * 1024 * 1024, 'z'); // more than the loopback buffers take
      held[0]!.res.send(200, '', big);
      held[1]!.res.send(200, '', big);
      held[2]!.res.send(200, '', big);
      await settle();
      expect(socket!.listenerCount('drain')).toBe(drains + 1);
      c.socket.resume();
      for (let i = 0; i < held.length; i++) expect((await c.next(10_000))!.body.length).toBe(big.length);
    });

    it('random pipelines (methods, bodies, Connection: close, delays, split writes): every answer in order, unsafe ones alone', async () => {
      const METHODS = ['GET', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'DELETE'];
      for (let seed = 1; seed <= 40; seed++) {
        const rand = prng(seed);
        const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
        const inFlight = new Set<string>();
        const violations: string[] = [];
        const handled: string[] = [];
        if (seed > 1) await server.close(0);
        server = createHttpServer({
          maxPipelinedRequests: pick([1, 2, 4, 16]),
          handler: (req, res) => {
            const safe = ['GET', 'HEAD', 'OPTIONS'].includes(req.method);
            if (!safe && inFlight.size > 0) violations.push(`${req.path} began beside ${[...inFlight].join(',')}`);
            for (const other of inFlight)
              if (other.startsWith('!')) violations.push(`${req.path} began beside the unsafe ${other}`);
            const key = safe ? req.path : `!${req.path}`;
            inFlight.add(key);
            handled.push(req.path);
            const answer = () => {
              inFlight.delete(key);
              res.send(200, '', `${req.method} ${req.path} ${req.body?.toString() ?? ''}`);
            };
            const delay = Number(req.headers['x-delay']);
            if (delay === 0) answer();
            else setTimeout(answer, delay);
          },
        });
        port = await server.listen(0, '127.0.0.1');
        const requests: Array<{ method: string; path: string; body: string; close: boolean }> = [];
        const count = 1 + Math.floor(rand() * 20);
        for (let i = 0; i < count; i++) {
          const method = pick(METHODS);
          const body = method === 'POST' || method === 'PUT' ? `b${i}`.repeat(1 + Math.floor(rand() * 3)) : '';
          requests.push({ method, path: `/r${i}`, body, close: rand() < 0.05 });
        }
        const wire = requests
          .map((r) => {
            const framing =
              r.body === ''
                ? ''
                : rand() < 0.5
                  ? `Content-Length: ${r.body.length}\r\n`
                  : 'Transfer-Encoding: chunked\r\n';
            const body =
              r.body === ''
                ? ''
                : framing.startsWith('Content')
                  ? r.body
                  : `${r.body.length.toString(16)}\r\n${r.body}\r\n0\r\n\r\n`;
            const delay = rand() < 0.4 ? 0 : 1 + Math.floor(rand() * 15);
            return `${r.method} ${r.path} HTTP/1.1\r\nHost: h\r\nX-Delay: ${delay}\r\n${framing}${r.close ? 'Connection: close\r\n' : ''}\r\n${body}`;
          })
          .join('');
        const c = await client();
        // in random pieces, so heads and bodies are cut anywhere
        for (let at = 0; at < wire.length;) {
          const n = 1 + Math.floor(rand() * 120);
          c.write(wire.slice(at, at + n));
          at += n;
          if (rand() < 0.2) await new Promise((r) => setImmediate(r));
        }
        const last = requests.findIndex((r) => r.close);
        const expected = last === -1 ? requests : requests.slice(0, last + 1);
        for (const r of expected) {
          const a = await c.next(5000, r.method === 'HEAD');
          expect(a).not.toBeNull();
          const text = `${r.method} ${r.path} ${r.body}`;
          if (r.method === 'HEAD') expect(a!.headers['content-length']).toBe(String(text.length));
          else expect(a!.body).toBe(text);
        }
        if (last !== -1) expect(await c.waitClosed()).toBe(true);
        expect(c.rest).toBe('');
        expect(handled).toEqual(expected.map((r) => r.path));
        expect(violations).toEqual([]);
        c.destroy();
      }
    }, 60_000);

    it('answers held behind a slow one count toward maxUnsentBytes: reading stops, and resumes once they are written', async () => {
      const body = 'y'.repeat(6000);
      let slow: HttpResponder | undefined;
      let handled = 0;
      server = createHttpServer({
        handler: (req, res) => {
          handled++;
          if (req.path === '/slow') slow = res;
          else res.send(200, '', body);
        },
        maxUnsentBytes: 10_000,
      });
      port = await server.listen(0, '127.0.0.1');
      const c = await client();
      c.write('GET /slow HTTP/1.1\r\nHost: h\r\n\r\n' + 'GET /x HTTP/1.1\r\nHost: h\r\n\r\n'.repeat(10));
      await until(() => handled >= 3);
      await settle();
      expect(handled).toBe(3); // /slow, then two answers held (over 10,000 bytes): nothing more is read
      slow!.send(200, '', 'slow');
      expect((await c.next())!.body).toBe('slow');
      for (let i = 0; i < 10; i++) expect((await c.next())!.body).toBe(body);
      expect(handled).toBe(11);
    });
  });

  it('reads a request delivered one byte at a time', async () => {
    await start();
    const c = await client();
    const raw = 'PUT /x HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{"a":"é"}';
    expect(Buffer.byteLength(raw) - raw.indexOf('{"a"')).toBe(10);
    for (const byte of Buffer.from(raw)) {
      c.write(Buffer.from([byte]));
      await new Promise((r) => setImmediate(r));
    }
    const a = await c.next();
    expect(JSON.parse(a!.body)).toMatchObject({ method: 'PUT', body: '{"a":"é"}' });
    expect(seen[0]!.headers['content-type']).toBe('application/json');
  });

  it('decodes a chunked body (extensions ignored, trailer dropped) and honours Expect: 100-continue', async () => {
    await start();
    const c = await client();
    c.write(
      'POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n',
    );
    expect(JSON.parse((await c.next())!.body).body).toBe('abc0123456789');

    c.write('POST /e HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n');
    const cont = await c.next();
    expect(cont!.status).toBe(100);
    expect(seen).toHaveLength(1); // the handler has not run before the body
    c.write('body');
    expect(JSON.parse((await c.next())!.body).body).toBe('body');
  });

  it.each([
    ['a malformed request line', 'GET /x\r\nHost: h\r\n\r\n', 400, 'INVALID_REQUEST'],
    ['a lower-case HTTP version', 'GET /x http/1.1\r\nHost: h\r\n\r\n', 400, 'INVALID_REQUEST'],
    ['HTTP/2.0', 'GET /x HTTP/2.0\r\nHost: h\r\n\r\n', 505, 'HTTP_VERSION_NOT_SUPPORTED'],
    ['no Host on HTTP/1.1', 'GET /x HTTP/1.1\r\nAccept: */*\r\n\r\n', 400, 'INVALID_REQUEST'],
    ['an absolute-form target', 'GET http://evil/x HTTP/1.1\r\nHost: h\r\n\r\n', 400, 'INVALID_REQUEST'],
    ['raw UTF-8 in the target', 'GET /users/é HTTP/1.1\r\nHost: h\r\n\r\n', 400, 'INVALID_REQUEST'],
    [
      'a space before the colon',
      'GET /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n\r\n',
      400,
      'INVALID_REQUEST',
    ],
    ['obsolete line folding', 'GET /x HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n  folded\r\n\r\n', 400, 'INVALID_REQUEST'],
    ['a bare LF inside the head', 'GET /x HTTP/1.1\r\nHost: h\nX-A: 1\r\n\r\n', 400, 'INVALID_REQUEST'],
    ['a NUL in a value', 'GET /x HTTP/1.1\r\nHost: h\r\nX-A: a\0b\r\n\r\n', 400, 'INVALID_REQUEST'],
    [
      'Content-Length with Transfer-Encoding',
      'POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      400,
      'INVALID_REQUEST',
    ],
    [
      'a transfer coding other than chunked',
      'POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n',
      501,
      'NOT_IMPLEMENTED',
    ],
    [
      'a non-numeric Content-Length',
      'POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 1e3\r\n\r\n',
      400,
      'INVALID_REQUEST',
    ],
    [
      'conflicting Content-Length values',
      'POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc',
      400,
      'INVALID_REQUEST',
    ],
    ['a body over the limit', 'POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 70000\r\n\r\n', 413, 'PAYLOAD_TOO_LARGE'],
    [
      'a chunked body over the limit',
      `POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n10000\r\n${'a'.repeat(65536)}\r\n10\r\n`,
      413,
      'PAYLOAD_TOO_LARGE',
    ],
    [
      'a malformed chunk size',
      'POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
      400,
      'INVALID_REQUEST',
    ],
    [
      'chunk data without its CRLF',
      'POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n',
      400,
      'INVALID_REQUEST',
    ],
    [
      'an unknown expectation',
      'POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nExpect: magic\r\n\r\n',
      417,
      'EXPECTATION_FAILED',
    ],
    [
      'a head over 16 KiB',
      `GET /x HTTP/1.1\r\nHost: h\r\nX-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`,
      431,
      'HEADERS_TOO_LARGE',
    ],
  ])('refuses %s with a JSON error and closes the connection', async (_name, raw, status, code) => {
    await start();
    const c = await client();
    c.write(raw);
    const a = await c.next();
    expect(a!.status).toBe(status);
    expect(a!.headers['content-type']).toMatch(/^application\/json/);
    expect(a!.headers.connection).toBe('close');
    const body = JSON.parse(a!.body) as { error: string; code: string; request_id: string };
    expect(body.code).toBe(code);
    expect(body.error.length).toBeGreaterThan(5);
    expect(body.request_id).toEqual(expect.any(String));
    expect(await c.waitClosed()).toBe(true);
    expect(seen).toHaveLength(0);
  });

  it('does not let a request hide inside another one (CL.TE and TE.CL shapes never reach the handler)', async () => {
    await start();
    const c = await client();
    // a front end honouring Content-Length would see one request; one honouring chunked, two
    c.write(
      'POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /admin HTTP/1.1\r\nHost: h\r\n\r\n',
    );
    expect((await c.next())!.status).toBe(400);
    expect(await c.waitClosed()).toBe(true);
    expect(seen.map((r) => r.path)).toEqual([]);
  });

  it('answers HEAD with the length but no body, and the connection stays in step', async () => {
    await start();
    const c = await client();
    c.write('HEAD /h HTTP/1.1\r\nHost: h\r\n\r\n');
    const a = await c.next(3000, true);
    expect(a!.status).toBe(200);
    expect(Number(a!.headers['content-length'])).toBeGreaterThan(0);
    c.write('GET /after HTTP/1.1\r\nHost: h\r\n\r\n');
    const b = await c.next();
    expect(b!.status).toBe(200);
    expect(JSON.parse(b!.body).path).toBe('/after');
  });

  it('closes after the answer for HTTP/1.0 and for Connection: close', async () => {
    await start();
    for (const raw of ['GET /old HTTP/1.0\r\n\r\n', 'GET /c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n']) {
      const c = await client();
      c.write(raw);
      const a = await c.next();
      expect(a!.status).toBe(200);
      expect(a!.headers.connection).toBe('close');
      expect(await c.waitClosed()).toBe(true);
    }
  });

  it("takes the request id from the requestId option (given the client's value)", async () => {
    await start();
    const c = await client();
    c.write('GET /r HTTP/1.1\r\nHost: h\r\nX-Request-Id: abc-123\r\n\r\n');
    expect((await c.next())!.headers['x-request-id']).toBe('abc-123');
    c.write('GET /r HTTP/1.1\r\nHost: h\r\nX-Request-Id: has space\r\n\r\n');
    expect((await c.next())!.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('by default makes a new request id and answers refusals with the message as text/plain', async () => {
    await start({ requestId: undefined, errorBody: undefined });
    const c = await client();
    c.write('GET /r HTTP/1.1\r\nHost: h\r\nX-Request-Id: abc-123\r\n\r\n');
    const a = await c.next();
    expect(a!.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(seen[0]!.requestId).toBe(a!.headers['x-request-id']);
    c.write('GET /r HTTP/1.1\r\nHost: h\r\nHost: h\r\n\r\n');
    const refused = await c.next();
    expect(refused!.status).toBe(400);
    expect(refused!.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(refused!.body).toBe('more than one Host header\n');
    expect(refused!.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(await c.waitClosed()).toBe(true);
  });

  it('a handler that throws gives a 500 JSON and the connection keeps working', async () => {
    const errors: unknown[] = [];
    await start({ onHandlerError: (err) => errors.push(err) });
    const c = await client();
    c.write('GET /t HTTP/1.1\r\nHost: h\r\nX-Throw: 1\r\n\r\n');
    const a = await c.next();
    expect(a!.status).toBe(500);
    expect(JSON.parse(a!.body)).toMatchObject({ code: 'INTERNAL' });
    expect(errors).toHaveLength(1);
    c.write('GET /ok HTTP/1.1\r\nHost: h\r\n\r\n');
    expect((await c.next())!.status).toBe(200);
  });

  it('a request that does not arrive in time is a 408; an idle keep-alive connection is closed', async () => {
    await start({ requestTimeoutMs: 200, keepAliveTimeoutMs: 300 });
    const slow = await client();
    slow.write('GET /x HTTP/1.1\r\nHo');
    const a = await slow.next();
    expect(a!.status).toBe(408);
    expect(JSON.parse(a!.body).code).toBe('REQUEST_TIMEOUT');
    expect(await slow.waitClosed()).toBe(true);

    const idle = await client();
    idle.write('GET /x HTTP/1.1\r\nHost: h\r\n\r\n');
    expect((await idle.next())!.status).toBe(200);
    expect(await idle.waitClosed(2000)).toBe(true);
    expect(idle.rest).toBe('');
  });

  it('a keep-alive connection in use is not idle: it outlives the keep-alive timeout, then closes once quiet', async () => {
    await start({ keepAliveTimeoutMs: 300 });
    const busy = await client();
    const openedAt = Date.now();
    // a request every 100 ms for 900 ms: three keep-alive timeouts, none of them quiet
    for (let i = 0; i < 9; i++) {
      busy.write('GET /x HTTP/1.1\r\nHost: h\r\n\r\n');
      expect((await busy.next())!.status).toBe(200);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(busy.closed).toBe(false);
    expect(Date.now() - openedAt).toBeGreaterThan(900);
    const quietFrom = Date.now();
    expect(await busy.waitClosed(2000)).toBe(true);
    expect(Date.now() - quietFrom).toBeGreaterThanOrEqual(150); // not cut the moment it fell quiet
    expect(busy.rest).toBe('');
  });

  it('close() lets an in-flight call finish with Connection: close, closes idle ones and refuses new ones', async () => {
    await start();
    const busy = await client();
    const idle = await client();
    busy.write('GET /busy HTTP/1.1\r\nHost: h\r\nX-Delay: 200\r\n\r\n');
    await new Promise((r) => setTimeout(r, 50));
    expect(server.inFlight).toBe(1);
    const closing = server.close(5000);
    expect(await idle.waitClosed(1000)).toBe(true);
    const a = await busy.next();
    expect(a!.status).toBe(200);
    expect(a!.headers.connection).toBe('close');
    await closing;
    expect(await busy.waitClosed()).toBe(true);
    await expect(
      new Promise((resolve, reject) => {
        const s = net.connect(port, '127.0.0.1');
        s.on('connect', () => resolve('connected'));
        s.on('error', reject);
      }),
    ).rejects.toThrow(/ECONNREFUSED/);
    // afterEach closes again: must be harmless
  });

  it.each([
    ['a request written with bare LF line ends', 'GET /x HTTP/1.1\nHost: h\n\n', 400, 'INVALID_REQUEST'],
    ['a bare CR in a head not complete yet', 'GET /x HTTP/1.1\r\nHost: h\rX', 400, 'INVALID_REQUEST'],
    ['two Host headers', 'GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n', 400, 'INVALID_REQUEST'],
    ['a method llhttp does not know', 'FOO /x HTTP/1.1\r\nHost: h\r\n\r\n', 501, 'NOT_IMPLEMENTED'],
    ['a target over 8 KiB', `GET /${'a'.repeat(8200)} HTTP/1.1\r\nHost: h\r\n\r\n`, 414, 'URI_TOO_LONG'],
  ])('refuses %s at once (no waiting for a timeout) and closes', async (_name, raw, status, code) => {
    await start({ requestTimeoutMs: 20_000 });
    const c = await client();
    c.write(raw);
    const a = await c.next(5000);
    expect(a!.status).toBe(status);
    expect(JSON.parse(a!.body).code).toBe(code);
    expect(await c.waitClosed()).toBe(true);
    expect(seen).toHaveLength(0);
  });

  it('collects a body arriving in many small reads intact', async () => {
    await start();
    const c = await client();
    const body = Buffer.alloc(40_000, 'b');
    body.write('start', 0);
    body.write('end', body.length - 3);
    c.write(`POST /slow HTTP/1.1\r\nHost: h\r\nContent-Length: ${body.length}\r\n\r\n`);
    for (let i = 0; i < body.length; i += 100) {
      c.write(body.subarray(i, i + 100));
      if (i % 2000 === 0) await new Promise((r) => setTimeout(r, 1));
    }
    const a = await c.next(10_000);
    expect(a!.status).toBe(200);
    expect(seen[0]!.body!.equals(body)).toBe(true);
  });

  it('a slow body is appended into a growing buffer, not re-copied whole on every read', async () => {
    await start();
    const c = await client();
    c.socket.setNoDelay(true);
    const body = Buffer.alloc(30_000, 'z');
    c.write(`POST /slow HTTP/1.1\r\nHost: h\r\nContent-Length: ${body.length}\r\n\r\n`);
    await new Promise((r) => setTimeout(r, 20));
    // count the buffers of a kilobyte or more made while the body trickles in (60 reads or so)
    const spy = jest.spyOn(Buffer, 'allocUnsafe');
    try {
      for (let i = 0; i < body.length; i += 500) {
        c.write(body.subarray(i, i + 500));
        await new Promise((r) => setTimeout(r, 3));
      }
      const a = await c.next(10_000);
      expect(a!.status).toBe(200);
      const big = spy.mock.calls.filter(([size]) => size >= 1000).length;
      // doubling from 4 KiB to 30 KB: a handful (re-copying per read: one per read, ~60)
      expect(big).toBeLessThanOrEqual(8);
    } finally {
      spy.mockRestore();
    }
    expect(seen[0]!.body!.equals(body)).toBe(true);
  });

  it('a client that pipelines without reading holds bounded memory: parsing pauses on unsent output and resumes on drain', async () => {
    const big = Buffer.alloc(32 * 1024, 'x');
    let handled = 0;
    server = createHttpServer({
      handler: (_req, res) => {
        handled++;
        res.send(200, 'content-type: text/plain\r\n', big);
      },
    });
    port = await server.listen(0, '127.0.0.1');
    const n = 8000;
    // a plain socket (the RawClient would concatenate 250 MiB)
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => undefined);
    await new Promise((r) => s.once('connect', r));
    s.pause(); // never read
    s.write('GET /api/v1/openapi.json HTTP/1.1\r\nHost: h\r\n\r\n'.repeat(n));
    // wait until the server stops handling (the kernel buffers of both ends fill first)
    let last = -1;
    for (let i = 0; i < 100 && handled !== last; i++) {
      last = handled;
      await new Promise((r) => setTimeout(r, 300));
    }
    // unbounded, all 8000 answers (250 MiB) would be produced; the loopback buffers hold a few MiB
    expect(handled).toBeLessThan(n / 4);
    expect(server.pausedConnections).toBe(1);
    const rss = process.memoryUsage().rss;
    await new Promise((r) => setTimeout(r, 500));
    expect(handled).toBe(last);
    expect(process.memoryUsage().rss - rss).toBeLessThan(100 * 1024 * 1024);
    // the client reads: every answer comes and the connection is not paused any more
    let bytes = 0;
    s.on('data', (d: Buffer) => {
      bytes += d.length;
    });
    s.resume();
    for (let i = 0; i < 600 && bytes < n * big.length; i++) await new Promise((r) => setTimeout(r, 100));
    expect(handled).toBe(n);
    expect(bytes).toBeGreaterThan(n * big.length);
    expect(bytes).toBeLessThan(n * (big.length + 120));
    expect(server.pausedConnections).toBe(0);
    s.destroy();
  }, 90_000);

  it('a client that takes none of its answers for the keep-alive timeout is cut', async () => {
    const big = Buffer.alloc(32 * 1024, 'x');
    server = createHttpServer({
      handler: (_req, res) => res.send(200, '', big),
      keepAliveTimeoutMs: 500,
    });
    port = await server.listen(0, '127.0.0.1');
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => undefined);
    await new Promise((r) => s.once('connect', r));
    s.pause();
    s.write('GET / HTTP/1.1\r\nHost: h\r\n\r\n'.repeat(2000));
    for (let i = 0; i < 100 && server.pausedConnections === 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(server.pausedConnections).toBe(1);
    for (let i = 0; i < 100 && server.pausedConnections === 1; i++) await new Promise((r) => setTimeout(r, 50));
    expect(server.pausedConnections).toBe(0); // closed: nothing of it is held any more
    s.destroy();
  });

  it('stops reading a connection whose buffered input is over the bound while its requests are handled', async () => {
    const held: HttpResponder[] = [];
    await start();
    server.close(0).catch(() => undefined);
    server = createHttpServer({
      handler: (_req, res) => {
        held.push(res);
      },
      maxPipelinedRequests: 4,
    });
    port = await server.listen(0, '127.0.0.1');
    const c = await client();
    c.write('GET /hold HTTP/1.1\r\nHost: h\r\n\r\n');
    c.write('GET /next HTTP/1.1\r\nHost: h\r\n\r\n'.repeat(20_000)); // 720 KB, more than head + body limits
    for (let i = 0; i < 100 && server.pausedConnections === 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(server.pausedConnections).toBe(1);
    // at most maxPipelinedRequests are handed out while none is answered
    expect(held).toHaveLength(4);
    expect(server.inFlight).toBe(4);
    held[0]!.send(200, '', 'ok');
    expect((await c.next())!.body).toBe('ok');
    await new Promise((r) => setTimeout(r, 50));
    expect(held).toHaveLength(5);
  });

  it('a client that shuts its write side after pipelined requests gets every answer, then the end', async () => {
    await start();
    const c = await client();
    c.socket.end(
      'GET /one HTTP/1.1\r\nHost: h\r\nX-Delay: 100\r\n\r\nGET /two HTTP/1.1\r\nHost: h\r\n\r\nGET /three HTTP/1.1\r\nHost: h\r\n\r\n',
    );
    const paths = [];
    for (let i = 0; i < 3; i++) paths.push(JSON.parse((await c.next())!.body).path as string);
    expect(paths).toEqual(['/one', '/two', '/three']);
    expect(await c.waitClosed()).toBe(true);
    expect(c.rest).toBe('');
  });

  it('a half-closed client with an incomplete request is ended without an answer; an HTTP/1.0 one gets its answer', async () => {
    await start();
    const partial = await client();
    partial.socket.end('GET /x HTTP/1.1\r\nHost');
    expect(await partial.waitClosed()).toBe(true);
    expect(partial.rest).toBe('');
    expect(seen).toHaveLength(0);
    const old = await client();
    old.socket.end('GET /old HTTP/1.0\r\n\r\n');
    expect((await old.next())!.status).toBe(200);
    expect(await old.waitClosed()).toBe(true);
  });

  it('a client gone before its answer: the responder says closed', async () => {
    let res: HttpResponder | undefined;
    await start();
    server.close(0).catch(() => undefined);
    server = createHttpServer({
      handler: (_req, r) => {
        res = r;
      },
    });
    port = await server.listen(0, '127.0.0.1');
    const c = await client();
    c.write('GET /x HTTP/1.1\r\nHost: h\r\n\r\n');
    for (let i = 0; i < 100 && res === undefined; i++) await new Promise((r) => setTimeout(r, 20));
    expect(res!.closed).toBe(false);
    c.socket.resetAndDestroy();
    for (let i = 0; i < 100 && !res!.closed; i++) await new Promise((r) => setTimeout(r, 20));
    expect(res!.closed).toBe(true);
    res!.send(200, '', 'late'); // harmless
  });
});
