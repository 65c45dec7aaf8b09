import net, { type LookupFunction } from 'node:net';
import tls from 'node:tls';
import { issueCert, startHttpsReceiver, testCaTrusted, type HttpsReceiver } from '@sts/testing';
import { createHttpsSender, type HttpsSender } from './httpsSender';

const headers = { 'Content-Type': 'application/json', 'X-Test': '1' };

/** A resolver that answers from a fixed table (no DNS, no /etc/hosts). */
function tableLookup(table: Record<string, string>): LookupFunction {
  return (hostname, options, callback) => {
    const address = table[hostname];
    if (!address) {
      const err = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
      return callback(err, '', 0);
    }
    const family = net.isIP(address);
    if (options.all) return callback(null, [{ address, family }]);
    return callback(null, address, family);
  };
}

describe('HTTPS sender', () => {
  let receiver: HttpsReceiver;
  let sender: HttpsSender;

  beforeAll(async () => {
    expect(testCaTrusted()).toBe(true);
    receiver = await startHttpsReceiver();
    sender = createHttpsSender({ timeoutMs: 2000, maxConcurrencyPerEndpoint: 4, allowPrivateHosts: ['localhost'] });
  });
  afterAll(async () => {
    sender.close();
    await receiver.close();
  });
  beforeEach(() => {
    receiver.requests.length = 0;
    receiver.setResponder(() => ({ status: 200, body: '{"ok":true}' }));
  });

  it('posts the exact body and headers and keeps the start of the response', async () => {
    receiver.setResponder(() => ({ status: 202, body: `accepted ${'x'.repeat(2000)}` }));
    const body = '{"event":"monitor.test","ünï":"cödé"}';
    const r = await sender.send({ url: `${receiver.url}/hook?a=1`, body, headers });
    expect(r).toMatchObject({ outcome: 'delivered', statusCode: 202, error: null, refused: false });
    expect(r.responseSnippet).toHaveLength(512);
    expect(r.responseSnippet!.startsWith('accepted xxx')).toBe(true);
    expect(typeof r.latencyMs).toBe('number');
    expect(receiver.requests).toHaveLength(1);
    const req = receiver.requests[0]!;
    expect(req.method).toBe('POST');
    expect(req.path).toBe('/hook?a=1');
    expect(req.rawBody.equals(Buffer.from(body, 'utf8'))).toBe(true);
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers['content-length']).toBe(String(Buffer.byteLength(body)));
    expect(req.headers['x-test']).toBe('1');
  });

  it('an answer longer than the 64 KiB read limit keeps its status, latency and snippet', async () => {
    receiver.setResponder(() => ({ status: 200, body: 'y'.repeat(70_000) }));
    const ok = await sender.send({ url: `${receiver.url}/big`, body: '{}', headers });
    expect(ok).toMatchObject({ outcome: 'delivered', statusCode: 200, error: null, truncated: true });
    expect(ok.responseSnippet).toBe('y'.repeat(512));
    expect(ok.latencyMs).toEqual(expect.any(Number));
    receiver.setResponder(() => ({ status: 404, body: 'n'.repeat(70_000) }));
    const missing = await sender.send({ url: `${receiver.url}/big`, body: '{}', headers });
    expect(missing).toMatchObject({ outcome: 'failed', statusCode: 404, truncated: true });
    // the sender still works afterwards (the dropped connection is not reused)
    receiver.setResponder(() => ({ status: 200, body: 'small' }));
    await expect(sender.send({ url: receiver.url, body: '{}', headers })).resolves.toMatchObject({ statusCode: 200 });
  });

  it('reuses keep-alive connections', async () => {
    const before = receiver.connectionCount();
    for (let i = 0; i < 5; i++) {
      const r = await sender.send({ url: receiver.url, body: '{}', headers });
      expect(r.outcome).toBe('delivered');
    }
    expect(receiver.requests).toHaveLength(5);
    expect(receiver.connectionCount() - before).toBeLessThanOrEqual(1);
  });

  it('aborting the shared signal ends every request in flight with it; a request after the abort does not go out', async () => {
    receiver.setResponder(() => ({ status: 200, delayMs: 30_000 }));
    const stop = new AbortController();
    const started = Date.now();
    const inFlight = [1, 2, 3].map((i) =>
      sender.send({ url: `${receiver.url}/slow/${i}`, body: '{}', headers, signal: stop.signal }),
    );
    while (receiver.requests.length < 3) await new Promise((r) => setTimeout(r, 10));
    // a request with another signal is not affected
    const other = new AbortController();
    receiver.setResponder(() => ({ status: 200, body: 'ok' }));
    const unaffected = sender.send({ url: `${receiver.url}/other`, body: '{}', headers, signal: other.signal });
    stop.abort();
    const results = await Promise.all(inFlight);
    for (const r of results) expect(r).toMatchObject({ outcome: 'failed', statusCode: null });
    expect(results[0]!.error).toMatch(/aborted: the dispatcher is stopping/);
    expect(Date.now() - started).toBeLessThan(10_000);
    await expect(unaffected).resolves.toMatchObject({ outcome: 'delivered', statusCode: 200 });
    const before = receiver.requests.length;
    const late = await sender.send({ url: `${receiver.url}/late`, body: '{}', headers, signal: stop.signal });
    expect(late).toMatchObject({ outcome: 'failed', statusCode: null });
    expect(receiver.requests).toHaveLength(before);
  });

  it('logs a non-2xx answer as failed with its status and body', async () => {
    receiver.setResponder(() => ({ status: 500, body: 'boom\u0000 inside' }));
    const r = await sender.send({ url: receiver.url, body: '{}', headers });
    expect(r).toMatchObject({ outcome: 'failed', statusCode: 500, error: 'receiver answered HTTP 500' });
    expect(r.responseSnippet).toBe('boom inside');
  });

  it('does not follow redirects', async () => {
    receiver.setResponder((req) =>
      req.path === '/start' ? { status: 302, headers: { location: `${receiver.url}/elsewhere` } } : { status: 200 },
    );
    const r = await sender.send({ url: `${receiver.url}/start`, body: '{}', headers });
    expect(r).toMatchObject({ outcome: 'failed', statusCode: 302 });
    expect(r.error).toMatch(/redirects are not followed/);
    expect(receiver.requests.map((q) => q.path)).toEqual(['/start']);
  });

  it('gives up after the time limit', async () => {
    const quick = createHttpsSender({ timeoutMs: 300, maxConcurrencyPerEndpoint: 2, allowPrivateHosts: ['localhost'] });
    receiver.setResponder(() => ({ status: 200, delayMs: 3000 }));
    try {
      const r = await quick.send({ url: receiver.url, body: '{}', headers });
      expect(r).toMatchObject({ outcome: 'failed', statusCode: null, error: 'timed out after 300 ms' });
      expect(r.latencyMs).toBeGreaterThanOrEqual(290);
    } finally {
      quick.close();
    }
  });

  it('reports a refused connection', async () => {
    const srv = net.createServer();
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    const port = (srv.address() as net.AddressInfo).port;
    await new Promise((resolve) => srv.close(resolve));
    const r = await sender.send({ url: `https://localhost:${port}/`, body: '{}', headers });
    expect(r).toMatchObject({ outcome: 'failed', statusCode: null, refused: false });
    expect(r.error).toMatch(/^connection refused/);
  });

  it('reports a certificate that does not name the host', async () => {
    const s = createHttpsSender({
      timeoutMs: 2000,
      maxConcurrencyPerEndpoint: 2,
      allowPrivateHosts: ['wrong.example'],
      lookup: tableLookup({ 'wrong.example': '127.0.0.1' }),
    });
    try {
      const r = await s.send({ url: `https://wrong.example:${receiver.port}/`, body: '{}', headers });
      expect(r).toMatchObject({ outcome: 'failed', statusCode: null, refused: false });
      expect(r.error).toMatch(/^TLS error: .*wrong\.example/);
      expect(receiver.requests).toHaveLength(0);
    } finally {
      s.close();
    }
  });

  describe('the one transparent reconnect', () => {
    /**
     * A raw TLS server: `drop(connection, request)` (both counted from 1) says whether that request
     * is answered or its connection destroyed without an answer.
     */
    async function closingServer(drop: (connection: number, request: number) => boolean) {
      const { keyPem, certPem } = await issueCert(['localhost']);
      const seen: string[] = [];
      let connections = 0;
      const server = tls.createServer({ key: keyPem, cert: certPem }, (socket) => {
        const connection = ++connections;
        let requests = 0;
        socket.on('error', () => undefined);
        socket.on('data', (chunk: Buffer) => {
          const request = ++requests;
          seen.push(`${connection}.${request} ${chunk.toString('latin1').split(' ')[1]}`);
          if (drop(connection, request)) socket.destroy();
          else socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nok');
        });
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const port = (server.address() as net.AddressInfo).port;
      return { url: `https://localhost:${port}`, seen, close: () => new Promise((r) => server.close(r)) };
    }

    it('sends again, once, when a reused keep-alive socket is found closed before any answer', async () => {
      // the second request on the first connection finds it gone (a keep-alive race)
      const srv = await closingServer((connection, request) => connection === 1 && request === 2);
      const s = createHttpsSender({ timeoutMs: 2000, maxConcurrencyPerEndpoint: 1, allowPrivateHosts: ['localhost'] });
      try {
        expect(await s.send({ url: `${srv.url}/a`, body: '{}', headers })).toMatchObject({ outcome: 'delivered' });
        expect(await s.send({ url: `${srv.url}/b`, body: '{}', headers })).toMatchObject({ outcome: 'delivered' });
        expect(srv.seen).toEqual(['1.1 /a', '1.2 /b', '2.1 /b']);
      } finally {
        s.close();
        await srv.close();
      }
    });

    it('does not send again when a new connection is closed without an answer, nor a third time', async () => {
      // only the first request of the first connection is answered
      const srv = await closingServer((connection, request) => connection !== 1 || request !== 1);
      const s = createHttpsSender({ timeoutMs: 2000, maxConcurrencyPerEndpoint: 1, allowPrivateHosts: ['localhost'] });
      try {
        expect(await s.send({ url: `${srv.url}/a`, body: '{}', headers })).toMatchObject({ outcome: 'delivered' });
        // the kept socket is found closed, and so is the reconnect's new one: no third try
        const r = await s.send({ url: `${srv.url}/b`, body: '{}', headers });
        expect(r).toMatchObject({ outcome: 'failed', statusCode: null, refused: false });
        const fresh = await s.send({ url: `${srv.url}/c`, body: '{}', headers });
        expect(fresh).toMatchObject({ outcome: 'failed', statusCode: null });
        // a new connection closed without an answer is the receiver's failure: not sent again
        expect(srv.seen).toEqual(['1.1 /a', '1.2 /b', '2.1 /b', '3.1 /c']);
      } finally {
        s.close();
        await srv.close();
      }
    });
  });

  describe('address policy', () => {
    const strict = () => createHttpsSender({ timeoutMs: 2000, maxConcurrencyPerEndpoint: 2 });

    it.each([
      ['loopback IPv4', (p: number) => `https://127.0.0.1:${p}/`],
      ['localhost without the allow list', (p: number) => `https://localhost:${p}/`],
      ['loopback IPv6', (p: number) => `https://[::1]:${p}/`],
      ['IPv4-mapped loopback', (p: number) => `https://[::ffff:127.0.0.1]:${p}/`],
      ['IPv4-mapped loopback, hex form', (p: number) => `https://[::ffff:7f00:1]:${p}/`],
      ['unspecified', (p: number) => `https://0.0.0.0:${p}/`],
      ['decimal loopback', (p: number) => `https://2130706433:${p}/`],
      ['private 10/8', () => 'https://10.1.2.3/'],
      ['private 192.168/16', () => 'https://192.168.1.1/'],
      ['private 172.16/12', () => 'https://172.20.0.1/'],
      ['cloud metadata (link-local)', () => 'https://169.254.169.254/latest/meta-data'],
      ['CGNAT', () => 'https://100.64.0.1/'],
      ['NAT64 of a private address', () => 'https://[64:ff9b::a00:1]/'],
      ['unique-local IPv6', () => 'https://[fd00::1]/'],
      ['IPv6 link-local', () => 'https://[fe80::1]/'],
      ['multicast', () => 'https://224.0.0.1/'],
    ])('refuses %s without connecting', async (_name, url) => {
      const s = strict();
      try {
        const r = await s.send({ url: url(receiver.port), body: '{}', headers });
        expect(r).toMatchObject({ outcome: 'failed', statusCode: null, refused: true });
        expect(r.error).toMatch(/refused to connect to .*not a public address/);
        expect(receiver.requests).toHaveLength(0);
      } finally {
        s.close();
      }
    });

    it('checks the address a name resolves to (the one dialled), not the name', async () => {
      const logged: string[] = [];
      const s = createHttpsSender({
        timeoutMs: 2000,
        maxConcurrencyPerEndpoint: 2,
        allowPrivateHosts: ['localhost'],
        lookup: tableLookup({ 'evil.example': '10.0.0.5', 'rebind.example': '127.0.0.1', 'v6.example': '::1' }),
        onRefused: (host, detail) => logged.push(`${host} ${detail}`),
      });
      try {
        for (const [host, address] of [
          ['evil.example', '10.0.0.5'],
          ['rebind.example', '127.0.0.1'],
          ['v6.example', '::1'],
        ] as const) {
          const r = await s.send({ url: `https://${host}:${receiver.port}/`, body: '{}', headers });
          expect(r).toMatchObject({ outcome: 'failed', refused: true });
          expect(r.error).toContain(`refused to connect to ${host}`);
          // the delivery log does not name the internal address; the server log does
          expect(r.error).not.toContain(address);
          expect(logged.join('\n')).toContain(address);
        }
        expect(receiver.requests).toHaveLength(0);
      } finally {
        s.close();
      }
    });

    it('exempts only the host names on the allow list, not their addresses', async () => {
      const ok = await sender.send({ url: `${receiver.url}/`, body: '{}', headers });
      expect(ok.outcome).toBe('delivered');
      const ip = await sender.send({ url: `https://127.0.0.1:${receiver.port}/`, body: '{}', headers });
      expect(ip).toMatchObject({ refused: true });
      expect(receiver.requests).toHaveLength(1);
    });

    it('refuses plain http', async () => {
      const r = await sender.send({ url: `http://localhost:${receiver.port}/`, body: '{}', headers });
      expect(r).toMatchObject({ outcome: 'failed', refused: true });
      expect(r.error).toMatch(/https/);
    });
  });

  it('keeps at most the configured number of deliveries in flight per endpoint', async () => {
    let active = 0;
    let peak = 0;
    receiver.setResponder(async () => {
      active++;
      peak = Math.max(peak, active);
      await new Promise((r) => setTimeout(r, 30));
      active--;
      return { status: 200 };
    });
    const results = await Promise.all(
      Array.from({ length: 20 }, () => sender.send({ url: receiver.url, body: '{}', headers })),
    );
    expect(results.every((r) => r.outcome === 'delivered')).toBe(true);
    expect(peak).toBeLessThanOrEqual(4);
    expect(peak).toBeGreaterThan(1);
  });
});
