/**
 * The raw keep-alive client to read-api, against small local servers: node:http ones where a
 * well-behaved server will do, raw TCP ones where the server must misbehave on purpose.
 */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { startHttpsReceiver, testCaTrusted } from '@sts/testing';
import { createUpstreamClient, routeOf, UpstreamFailure, type UpstreamClient } from './upstream';

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

async function httpServer(handler: http.RequestListener) {
  const server = http.createServer(handler);
  const sockets = new Set<net.Socket>();
  let connections = 0;
  server.on('connection', (s: net.Socket) => {
    connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  closers.push(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get connections() {
      return connections;
    },
  };
}

/**
 * A TCP server whose n-th request on a connection (from 1) gets `reply(n, request)` written raw.
 * `requests[i]` lists the requests connection i brought, `reads[i]` how many reads they took,
 * `batches` the requests of each read.
 */
async function rawServer(reply: (n: number, request: string, socket: net.Socket) => void) {
  const sockets = new Set<net.Socket>();
  const requests: string[][] = [];
  const reads: number[] = [];
  /** the requests each read brought (one write of the client's, on loopback) */
  const batches: string[][] = [];
  const server = net.createServer((socket) => {
    const index = requests.length;
    const mine: string[] = [];
    requests.push(mine);
    reads.push(0);
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let n = 0;
    let buf = '';
    socket.on('data', (c: Buffer) => {
      reads[index]!++;
      const batch: string[] = [];
      batches.push(batch);
      buf += c.toString('latin1');
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end === -1) return;
        const head = buf.slice(0, end);
        const len = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
        if (buf.length < end + 4 + len) return;
        const request = buf.slice(0, end + 4 + len);
        buf = buf.slice(end + 4 + len);
        mine.push(request);
        batch.push(request);
        reply(++n, request, socket);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  closers.push(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get connections() {
      return requests.length;
    },
    requests,
    reads,
    batches,
  };
}

function client(url: string, extra: Partial<Parameters<typeof createUpstreamClient>[0]> = {}): UpstreamClient {
  const c = createUpstreamClient({ url, timeoutMs: 2000, ...extra });
  closers.push(() => c.close());
  return c;
}

const ok = (body: string) =>
  `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

async function failure(p: Promise<unknown>): Promise<UpstreamFailure> {
  try {
    await p;
  } catch (err) {
    if (err instanceof UpstreamFailure) return err;
    throw err;
  }
  throw new Error('the call succeeded');
}

describe('upstream client', () => {
  it('closes a socket once it has been idle for idleSocketMs, and not a socket in use', async () => {
    const srv = await rawServer((_n, _req, socket) => socket.write(ok('{}')));
    const c = client(srv.url, { idleSocketMs: 300 });
    // calls every 100 ms for 900 ms: the socket is never idle for 300 ms
    for (let i = 0; i < 9; i++) {
      expect((await c.forward('GET', '/a', '', null)).status).toBe(200);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(srv.connections).toBe(1);
    expect(c.openSockets).toBe(1);
    const quietFrom = Date.now();
    for (let i = 0; i < 100 && c.openSockets > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(c.openSockets).toBe(0);
    expect(Date.now() - quietFrom).toBeGreaterThanOrEqual(150);
    // the next call opens a new socket
    expect((await c.forward('GET', '/a', '', null)).status).toBe(200);
    expect(srv.connections).toBe(2);
  });

  it('reuses one keep-alive socket for sequential calls and sends the headers and body it is given', async () => {
    const seen: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders; body: string }> = [];
    const srv = await httpServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
        res.writeHead(201, { 'content-type': 'application/json', etag: '"v1"' }).end(`{"n":${seen.length}}`);
      });
    });
    const c = client(srv.url);
    for (let i = 1; i <= 20; i++) {
      const a = await c.forward('GET', `/api/v1/x?i=${i}`, 'x-account-id: acc\r\n', null);
      expect(a.status).toBe(201);
      expect(JSON.parse(a.body.toString())).toEqual({ n: i });
      expect(a.headers.etag).toBe('"v1"');
    }
    const posted = await c.forward(
      'POST',
      '/api/v1/tweets',
      'content-type: application/json\r\n',
      Buffer.from('{"t":1}'),
    );
    expect(posted.status).toBe(201);
    expect(srv.connections).toBe(1);
    expect(c.openSockets).toBe(1);
    expect(seen[0]).toMatchObject({ method: 'GET', url: '/api/v1/x?i=1', body: '' });
    expect(seen[0]!.headers['x-account-id']).toBe('acc');
    expect(seen[0]!.headers.host).toBe(new URL(srv.url).host);
    expect(seen[20]).toMatchObject({ method: 'POST', body: '{"t":1}' });
    expect(seen[20]!.headers['content-length']).toBe('7');
  });

  it('with keepHeaders, keeps only those answer headers (and the framing ones)', async () => {
    const srv = await httpServer((_req, res) => {
      res
        .writeHead(200, { 'content-type': 'application/json', 'content-length': 2, etag: '"e"', 'x-detail': 'no' })
        .end('{}');
    });
    const c = client(srv.url, { keepHeaders: ['etag', 'content-type'] });
    const a = await c.forward('GET', '/', '', null);
    expect(a.headers).toEqual({
      'content-type': 'application/json',
      etag: '"e"',
      'content-length': '2',
      connection: 'keep-alive',
    });
    expect(a.body.toString()).toBe('{}');
  });

  it('opens at most maxSockets connections; further calls wait for a free socket', async () => {
    let active = 0;
    let peak = 0;
    const srv = await httpServer((_req, res) => {
      active++;
      peak = Math.max(peak, active);
      setTimeout(() => {
        active--;
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      }, 20);
    });
    const c = client(srv.url, { maxSockets: 3, pipelineDepth: 1 });
    const answers = await Promise.all(Array.from({ length: 12 }, () => c.forward('GET', '/', '', null)));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    expect(peak).toBe(3);
    expect(srv.connections).toBe(3);
  });

  it('reads chunked answers, answers delimited by the connection closing, and skips 100 Continue', async () => {
    const srv = await rawServer((n, _req, socket) => {
      if (n === 1) socket.write('HTTP/1.1 100 Continue\r\n\r\n' + ok('{"first":true}'));
      else if (n === 2)
        socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n3;x=y\r\n:1}\r\n0\r\n\r\n');
      else socket.end('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end');
    });
    const c = client(srv.url);
    expect((await c.forward('GET', '/1', '', null)).body.toString()).toBe('{"first":true}');
    expect((await c.forward('GET', '/2', '', null)).body.toString()).toBe('{"a":1}');
    expect((await c.forward('GET', '/3', '', null)).body.toString()).toBe('until the end');
    expect(srv.connections).toBe(1);
  });

  it('answers arriving a byte at a time on several sockets at once come out intact (reads share one buffer)', async () => {
    const trickle = async (socket: net.Socket, text: string) => {
      for (const byte of Buffer.from(text)) {
        if (socket.destroyed) return;
        socket.write(Buffer.from([byte]));
        await new Promise((r) => setImmediate(r));
      }
    };
    const srv = await rawServer((n, req, socket) => {
      const id = /GET \/(\w+)/.exec(req)![1]!;
      const body = JSON.stringify({ id, pad: id.repeat(40) });
      const answer = id.startsWith('c')
        ? `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`
        : ok(body);
      void trickle(socket, answer);
    });
    // one call per socket: this server writes its answers concurrently, so it cannot take pipelined calls
    const c = client(srv.url, { pipelineDepth: 1 });
    const ids = ['a1', 'b2', 'c3', 'c4', 'e5'];
    const answers = await Promise.all(ids.map((id) => c.forward('GET', `/${id}`, '', null)));
    expect(answers.map((a) => JSON.parse(a.body.toString()) as { id: string; pad: string })).toEqual(
      ids.map((id) => ({ id, pad: id.repeat(40) })),
    );
    // and whole answers in one read, many at once, keep their own bytes after the read buffer is reused
    const fast = await rawServer((_n, req, socket) => {
      const id = /GET \/(\w+)/.exec(req)![1]!;
      socket.write(ok(JSON.stringify({ id })));
    });
    const f = client(fast.url);
    const many = Array.from({ length: 40 }, (_, i) => `x${i}`);
    const got = await Promise.all(many.map((id) => f.forward('GET', `/${id}`, '', null)));
    expect(got.map((a) => (JSON.parse(a.body.toString()) as { id: string }).id)).toEqual(many);
  });

  it('a HEAD answer has no body even with a Content-Length, and the socket stays in step', async () => {
    const srv = await httpServer((req, res) => {
      res
        .writeHead(200, { 'content-type': 'application/json', 'content-length': 13 })
        .end(req.method === 'HEAD' ? undefined : '{"head":"no"}');
    });
    const c = client(srv.url);
    const head = await c.forward('HEAD', '/', '', null);
    expect(head.body.length).toBe(0);
    expect(head.headers['content-length']).toBe('13');
    expect((await c.forward('GET', '/', '', null)).body.toString()).toBe('{"head":"no"}');
    expect(srv.connections).toBe(1);
  });

  it.each([1, 8])(
    'sends a GET again on a new socket when a kept-alive one is closed under it, but not a POST (depth %d)',
    async (pipelineDepth) => {
      // the second request on each connection is met by a close, as when a keep-alive timeout races a call
      const srv = await rawServer((n, _req, socket) => {
        if (n === 1) socket.write(ok('{"ok":1}'));
        else socket.destroy();
      });
      const c = client(srv.url, { pipelineDepth });
      await c.forward('GET', '/', '', null);
      expect((await c.forward('GET', '/', '', null)).status).toBe(200);
      expect(srv.connections).toBe(2);
      const posted = await failure(c.forward('POST', '/', '', Buffer.from('{}')));
      expect(posted.kind).toBe('unavailable');
      expect(srv.connections).toBe(2);
    },
  );

  it('classifies failures: refused → unavailable, no answer → timeout, garbage or oversize → failed', async () => {
    const free = net.createServer();
    await new Promise<void>((r) => free.listen(0, '127.0.0.1', r));
    const port = (free.address() as AddressInfo).port;
    await new Promise<void>((r) => free.close(() => r()));
    expect((await failure(client(`http://127.0.0.1:${port}`).forward('GET', '/', '', null))).kind).toBe('unavailable');

    const silent = await rawServer(() => undefined);
    const t0 = Date.now();
    expect((await failure(client(silent.url, { timeoutMs: 200 }).forward('GET', '/', '', null))).kind).toBe('timeout');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);

    const garbage = await rawServer((_n, _r, s) => s.write('SMTP ready\r\n\r\n'));
    expect((await failure(client(garbage.url).forward('GET', '/', '', null))).kind).toBe('failed');

    const split = await rawServer((_n, _r, s) =>
      s.write('HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Bad: a\nb\r\n\r\nhello'),
    );
    expect((await failure(client(split.url).forward('GET', '/', '', null))).kind).toBe('failed');

    const big = await rawServer((_n, _r, s) => s.write(ok('x'.repeat(2000))));
    expect((await failure(client(big.url, { maxAnswerBytes: 1000 }).forward('GET', '/', '', null))).kind).toBe(
      'failed',
    );
  });

  it('fails an answer followed by unexpected bytes (its length may be too short) and does not reuse the socket', async () => {
    const srv = await rawServer((_n, _r, s) => s.write(ok('{}') + 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}'));
    const c = client(srv.url);
    expect((await failure(c.forward('GET', '/', '', null))).kind).toBe('failed');
    expect((await failure(c.forward('GET', '/', '', null))).kind).toBe('failed');
    expect(srv.connections).toBe(2);
  });

  it('speaks HTTPS to an https:// read-api: certificate checked against the name, one kept-alive TLS connection', async () => {
    expect(testCaTrusted()).toBe(true); // npm test makes a test CA and trusts it (NODE_EXTRA_CA_CERTS)
    const receiver = await startHttpsReceiver({
      hostnames: ['localhost'],
      handler: (req) => ({
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: `{"path":"${req.path}"}`,
      }),
    });
    closers.push(() => receiver.close());
    const c = client(receiver.url);
    for (let i = 0; i < 3; i++) {
      const a = await c.forward('GET', `/api/v1/x${i}`, 'x-account-id: a\r\n', null);
      expect(a.status).toBe(200);
      expect(JSON.parse(a.body.toString())).toEqual({ path: `/api/v1/x${i}` });
    }
    expect(receiver.connectionCount()).toBe(1);
    expect(receiver.requests[0]!.headers['x-account-id']).toBe('a');
    // the same server reached by a name its certificate does not carry is refused
    const wrongName = client(receiver.url.replace('localhost', '127.0.0.1'));
    expect((await failure(wrongName.forward('GET', '/', '', null))).kind).toBe('failed');
    expect(receiver.requests).toHaveLength(3); // the handshake failed: nothing was sent
  });

  describe('pipelining (write coalescing)', () => {
    const idOf = (request: string) => /^[A-Z]+ \/(\S+)/.exec(request)![1]!;
    /** answers every request at once, in order, with its own path in the body */
    const echo = (_n: number, req: string, socket: net.Socket) => socket.write(ok(JSON.stringify({ id: idOf(req) })));
    const ids = (n: number, prefix = 'c') => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
    const bodyId = (a: { body: Buffer }) => (JSON.parse(a.body.toString()) as { id: string }).id;
    /** for the mechanics: every safe call may be pipelined, whatever read-api's time for its route */
    const pclient = (url: string, extra: Partial<Parameters<typeof createUpstreamClient>[0]> = {}) =>
      client(url, { pipelineMaxMs: Infinity, ...extra });

    it('pipelines only routes read-api answers fast (Server-Timing), and only once they have been answered', async () => {
      let searchMs = 5;
      const srv = await rawServer((_n, req, socket) => {
        const path = /^[A-Z]+ (\S+)/.exec(req)![1]!;
        const ms = path.startsWith('/api/v1/search') ? searchMs : path.startsWith('/api/v1/plain') ? null : 0.1;
        const answer = ok(JSON.stringify({ path }));
        socket.write(ms === null ? answer : answer.replace('\r\n', `\r\nServer-Timing: app;dur=${ms}\r\n`));
      });
      const c = client(srv.url); // the default: routes averaging at most 2 ms
      const turn = async (paths: string[]) => {
        srv.batches.length = 0;
        await Promise.all(paths.map((p) => c.forward('GET', p, '', null)));
        return srv.batches.filter((b) => b.length > 0).map((b) => b.map((r) => /^[A-Z]+ (\S+)/.exec(r)![1]!));
      };
      // nothing known yet: each call alone
      expect(await turn(['/api/v1/users/a', '/api/v1/users/b', '/api/v1/search?q=1'])).toEqual([
        ['/api/v1/users/a'],
        ['/api/v1/users/b'],
        ['/api/v1/search?q=1'],
      ]);
      // users answered in 0.1 ms: pipelined (any user: the route is the path's shape)
      expect(await turn(['/api/v1/users/c', '/api/v1/users/d', '/api/v1/users/e'])).toEqual([
        ['/api/v1/users/c', '/api/v1/users/d', '/api/v1/users/e'],
      ]);
      // search answered in 5 ms: never grouped, not even with fast calls; a route without Server-Timing neither
      const mixed = await turn(['/api/v1/search?q=2', '/api/v1/search?q=3', '/api/v1/plain/1', '/api/v1/plain/2']);
      expect(mixed.map((b) => b.length)).toEqual([1, 1, 1, 1]);
      // once search answers fast, its moving average falls under 2 ms within a few answers
      searchMs = 0.1;
      for (let i = 0; i < 6; i++) await c.forward('GET', `/api/v1/search?q=w${i}`, '', null);
      expect(await turn(['/api/v1/search?q=4', '/api/v1/search?q=5'])).toEqual([
        ['/api/v1/search?q=4', '/api/v1/search?q=5'],
      ]);
    });

    it('routeOf: method, first three path segments and the segment count', () => {
      expect(routeOf('GET', '/api/v1/users/alice')).toBe('GET api/v1/users 5');
      expect(routeOf('GET', '/api/v1/users/bob?x=1')).toBe('GET api/v1/users 5');
      expect(routeOf('GET', '/api/v1/users/bob/tweets?limit=5')).toBe('GET api/v1/users 6');
      expect(routeOf('HEAD', '/api/v1/search?q=a/b')).toBe('HEAD api/v1/search 4');
      expect(routeOf('GET', '/')).toBe('GET  2');
      expect(routeOf('GET', '/api/v1/monitors/9b1f/hits')).toBe('GET api/v1/monitors 6');
    });

    it('writes the GET calls of one turn together, up to pipelineDepth per socket, and matches answers in order', async () => {
      const srv = await rawServer(echo);
      const c = pclient(srv.url, { pipelineDepth: 8 });
      const want = ids(20);
      const got = await Promise.all(want.map((id) => c.forward('GET', `/${id}`, 'x-n: 1\r\n', null)));
      expect(got.map(bodyId)).toEqual(want);
      // 8 + 8 + 4 calls on three sockets, each group in one write (so one read on loopback)
      expect(srv.requests.map((r) => r.length)).toEqual([8, 8, 4]);
      expect(srv.requests.flat().map(idOf)).toEqual(want);
      expect(srv.reads).toEqual([1, 1, 1]);
      expect(srv.requests[0]![0]).toContain('x-n: 1\r\n');
      // the next turn reuses the sockets, now idle: still three connections
      const again = await Promise.all(want.map((id) => c.forward('GET', `/${id}`, '', null)));
      expect(again.map(bodyId)).toEqual(want);
      expect(srv.connections).toBe(3);
      expect(c.openSockets).toBe(3);
    });

    it('a socket with calls in flight takes no more: calls of a later turn go to another socket', async () => {
      let hold: (() => void) | null = null;
      const srv = await rawServer((n, req, socket) => {
        if (idOf(req) === 'slow') hold = () => socket.write(ok(JSON.stringify({ id: 'slow' })));
        else echo(n, req, socket);
      });
      const c = pclient(srv.url);
      const slow = c.forward('GET', '/slow', '', null);
      await new Promise((r) => setTimeout(r, 30));
      expect(bodyId(await c.forward('GET', '/fast', '', null))).toBe('fast');
      expect(srv.requests.map((r) => r.map(idOf))).toEqual([['slow'], ['fast']]);
      hold!();
      expect(bodyId(await slow)).toBe('slow');
    });

    it('never pipelines a call with a body, nor with pipelineDepth 1', async () => {
      const srv = await rawServer(echo);
      const c = pclient(srv.url);
      const calls = [
        c.forward('GET', '/g1', '', null),
        c.forward('POST', '/p1', 'content-type: application/json\r\n', Buffer.from('{}')),
        c.forward('GET', '/g2', '', null),
        c.forward('GET', '/g3', '', null),
      ];
      expect((await Promise.all(calls)).map(bodyId)).toEqual(['g1', 'p1', 'g2', 'g3']);
      expect(srv.requests.map((r) => r.map(idOf))).toEqual([['g1'], ['p1'], ['g2', 'g3']]);

      const single = await rawServer(echo);
      const one = pclient(single.url, { pipelineDepth: 1 });
      await Promise.all(ids(5).map((id) => one.forward('GET', `/${id}`, '', null)));
      expect(single.requests.map((r) => r.length)).toEqual([1, 1, 1, 1, 1]);
    });

    it('pipelines GET and HEAD against node:http (read-api) and keeps every answer in step', async () => {
      let handled = 0;
      const srv = await httpServer((req, res) => {
        handled++;
        const body = JSON.stringify({ id: req.url!.slice(1) });
        // answers finish out of order; node:http still sends them in request order
        setTimeout(
          () => {
            res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
            res.end(req.method === 'HEAD' ? undefined : body);
          },
          Math.floor(Math.random() * 5),
        );
      });
      const c = pclient(srv.url, { pipelineDepth: 4 });
      const want = ids(24, 'h');
      const got = await Promise.all(want.map((id, i) => c.forward(i % 3 === 1 ? 'HEAD' : 'GET', `/${id}`, '', null)));
      got.forEach((a, i) => {
        expect(a.status).toBe(200);
        if (i % 3 === 1) expect(a.body.length).toBe(0);
        else expect(bodyId(a)).toBe(want[i]);
      });
      expect(handled).toBe(24);
      expect(srv.connections).toBe(6);
    });

    it('when read-api closes after answering part of a batch, the rest is sent again on a new socket, once', async () => {
      // first connection: answers 2 calls (the second says Connection: close), then closes
      const srv = await rawServer((n, req, socket) => {
        const body = JSON.stringify({ id: idOf(req) });
        if (srv.connections > 1) socket.write(ok(body));
        else if (n === 1) socket.write(ok(body));
        else if (n === 2) socket.end(ok(body).replace('\r\n', '\r\nConnection: close\r\n'));
      });
      const c = pclient(srv.url);
      const want = ids(5);
      expect((await Promise.all(want.map((id) => c.forward('GET', `/${id}`, '', null)))).map(bodyId)).toEqual(want);
      expect(srv.requests.map((r) => r.map(idOf))).toEqual([want, want.slice(2)]);

      // a connection destroyed after one answer (no Connection: close): the same
      const cut = await rawServer((n, req, socket) => {
        if (cut.connections > 1) echo(n, req, socket);
        else if (n === 1) {
          echo(n, req, socket);
          setImmediate(() => socket.destroy());
        }
      });
      const c2 = pclient(cut.url);
      expect((await Promise.all(want.map((id) => c2.forward('GET', `/${id}`, '', null)))).map(bodyId)).toEqual(want);
      expect(cut.requests[1]!.map(idOf)).toEqual(want.slice(1));

      // a socket that keeps failing: each call is sent at most twice, then fails
      const flaky = await rawServer((n, req, socket) => {
        if (n === 1) {
          echo(n, req, socket);
          setImmediate(() => socket.destroy());
        }
      });
      const c3 = pclient(flaky.url);
      const results = await Promise.allSettled(ids(3).map((id) => c3.forward('GET', `/${id}`, '', null)));
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
      // c0 answered on the 1st connection, c1 on the 2nd (its retry); c2 was sent twice and lost twice
      expect(flaky.requests.map((r) => r.map(idOf))).toEqual([
        ['c0', 'c1', 'c2'],
        ['c1', 'c2'],
      ]);
      expect(((results[2] as PromiseRejectedResult).reason as UpstreamFailure).kind).toBe('unavailable');
    });

    it('a broken answer in a batch fails that call only; the calls behind it go to a new socket', async () => {
      const srv = await rawServer((n, req, socket) => {
        if (srv.connections === 1 && n === 2) socket.write('HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n');
        else if (srv.connections === 1 && n > 2) return;
        else echo(n, req, socket);
      });
      const c = pclient(srv.url);
      const results = await Promise.allSettled(ids(4).map((id) => c.forward('GET', `/${id}`, '', null)));
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
      expect(((results[1] as PromiseRejectedResult).reason as UpstreamFailure).kind).toBe('failed');
      expect(srv.requests[1]!.map(idOf)).toEqual(['c2', 'c3']);
    });

    describe('a hostile upstream never hands one call bytes of another', () => {
      const rid = (req: string) => /x-request-id: (\S+)/i.exec(req)?.[1] ?? '';
      /** an answer echoing the request id (like read-api), body `{"id": …}` */
      const answer = (req: string, opts: { id?: string; lengthDelta?: number } = {}) => {
        const body = JSON.stringify({ id: idOf(req), pad: 'p'.repeat(30) });
        return (
          `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Request-Id: ${opts.id ?? rid(req)}\r\n` +
          `Content-Length: ${Buffer.byteLength(body) + (opts.lengthDelta ?? 0)}\r\n\r\n${body}`
        );
      };
      const call = (c: UpstreamClient, id: string) => c.forward('GET', `/${id}`, `x-request-id: ${id}\r\n`, null, id);
      /** every fulfilled answer carries its own call's id only */
      const ownBytesOnly = (results: PromiseSettledResult<{ body: Buffer }>[], want: string[]) =>
        results.forEach((r, i) => {
          if (r.status !== 'fulfilled') return;
          const text = r.value.body.toString();
          expect(JSON.parse(text)).toMatchObject({ id: want[i] });
          for (const other of want) if (other !== want[i]) expect(text).not.toContain(other);
        });

      it('a wrong x-request-id drops the socket: the calls without an answer fail, nothing is sent again', async () => {
        const srv = await rawServer((n, req, socket) =>
          socket.write(answer(req, n === 3 ? { id: 'someone-else' } : {})),
        );
        const c = pclient(srv.url);
        const want = ids(5, 'm');
        const results = await Promise.allSettled(want.map((id) => call(c, id)));
        // m0 was handed over once m1's head was in step; m1 waited for m2's head, which was not
        expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'rejected', 'rejected']);
        for (const r of results.slice(1))
          expect(((r as PromiseRejectedResult).reason as UpstreamFailure).message).toMatch(/out of step/);
        ownBytesOnly(results, want);
        expect(srv.connections).toBe(1);
        expect(c.openSockets).toBe(0);
      });

      it('an answer without the x-request-id it was asked for fails (an error page of the server, say)', async () => {
        const srv = await rawServer((_n, _req, socket) => socket.write(ok('{"error":"x"}')));
        const c = pclient(srv.url);
        expect((await failure(call(c, 'solo'))).kind).toBe('failed');
      });

      it.each([
        ['too short', -7],
        ['too long', 25],
      ])(
        'a Content-Length %s fails the calls on that socket and never hands over a neighbour’s bytes',
        async (_n, delta) => {
          const srv = await rawServer((n, req, socket) =>
            socket.write(answer(req, srv.connections === 1 && n === 2 ? { lengthDelta: delta } : {})),
          );
          const c = pclient(srv.url, { timeoutMs: 1000 });
          const want = ids(4, 'f');
          const results = await Promise.allSettled(want.map((id) => call(c, id)));
          ownBytesOnly(results, want);
          // f1 (the forged length) and f2 (whose head it disturbed) never get an answer
          expect(results[1]!.status).toBe('rejected');
          expect(results[2]!.status).toBe('rejected');
          expect(results[0]!.status).toBe('fulfilled');
        },
      );

      it('a last answer too long waits for bytes that never come (504), and one too long by exactly its neighbour then closed fails', async () => {
        const alone = await rawServer((_n, req, socket) => socket.write(answer(req, { lengthDelta: 10 })));
        expect((await failure(call(client(alone.url, { timeoutMs: 300 }), 'a0'))).kind).toBe('timeout');

        let swallowed = 0;
        const srv = await rawServer((n, req, socket) => {
          if (srv.connections > 1) socket.write(answer(req));
          else if (n === 1) {
            const next = answer(req.replace(/x0/g, 'x1'));
            swallowed = Buffer.byteLength(next);
            socket.write(answer(req, { lengthDelta: swallowed }));
            socket.end(next);
          }
        });
        const c = pclient(srv.url);
        const results = await Promise.allSettled(['x0', 'x1'].map((id) => call(c, id)));
        expect(swallowed).toBeGreaterThan(0);
        expect(results[0]!.status).toBe('rejected');
        ownBytesOnly(results, ['x0', 'x1']);
      });

      it('a call whose caller has gone before it is written is not sent', async () => {
        const srv = await rawServer((_n, req, socket) => socket.write(answer(req)));
        const c = pclient(srv.url);
        const caller = { closed: false };
        const p = c.forward('GET', '/g0', 'x-request-id: g0\r\n', null, 'g0', caller);
        const kept = call(c, 'g1');
        caller.closed = true; // the client went away in the same turn
        expect((await failure(p)).kind).toBe('cancelled');
        expect(JSON.parse((await kept).body.toString())).toMatchObject({ id: 'g1' });
        expect(srv.requests.flat().map(idOf)).toEqual(['g1']);
      });
    });

    it('calls stuck behind a call that read-api never answers time out with it (the price of sharing a socket)', async () => {
      const srv = await rawServer(() => undefined); // c0 heads the batch and is never answered
      const c = pclient(srv.url, { timeoutMs: 150 });
      const t0 = Date.now();
      const results = await Promise.allSettled(ids(3).map((id) => c.forward('GET', `/${id}`, '', null)));
      expect(results.map((r) => (r.status === 'rejected' ? (r.reason as UpstreamFailure).kind : 'ok'))).toEqual([
        'timeout',
        'timeout',
        'timeout',
      ]);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(140);
      expect(srv.requests.flat()).toHaveLength(3); // nothing was sent again: read-api never answered on it
      expect(c.openSockets).toBe(0);
    });
  });

  it('close() fails calls still waiting and refuses new ones', async () => {
    const silent = await rawServer(() => undefined);
    const c = createUpstreamClient({ url: silent.url, timeoutMs: 5000 });
    const pending = failure(c.forward('GET', '/', '', null));
    await new Promise((r) => setTimeout(r, 50));
    c.close();
    expect((await pending).kind).toBe('unavailable');
    expect((await failure(c.forward('GET', '/', '', null))).kind).toBe('unavailable');
  });
});
