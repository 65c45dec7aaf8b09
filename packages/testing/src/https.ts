/**
 * Real HTTPS for tests and benchmarks: a test certificate authority (EC P-256), leaf
 * certificates it signs, and an HTTPS receiver that records every request (headers and raw body).
 *
 * Node trusts extra CAs only through NODE_EXTRA_CA_CERTS, which it reads at process start; so the
 * CA is made ONCE, before jest starts, by scripts/test.mjs (which runs this file:
 * `node --import tsx packages/testing/src/https.ts` prints the CA path) and passed to every test
 * process in NODE_EXTRA_CA_CERTS. It lives in <repo>/.tmp/test-ca/{ca.pem,ca.key.pem} (git
 * ignores .tmp/) and is reused while it is valid. Its key never leaves this machine and nothing
 * but test receivers is ever signed with it.
 */
import { webcrypto } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { isIP, type AddressInfo } from 'node:net';
import path from 'node:path';

// @peculiar/x509 2.x resolves its algorithms through tsyringe, which needs the Reflect metadata API.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto);

const EC = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGN = { name: 'ECDSA', hash: 'SHA-256' } as const;
const DAY = 24 * 3600 * 1000;

/** Where the run's test CA lives: STS_TEST_CA_DIR, else <repo>/.tmp/test-ca. */
export function testCaDir(): string {
  return process.env.STS_TEST_CA_DIR ?? path.resolve(__dirname, '../../../.tmp/test-ca');
}

export interface TestCa {
  dir: string;
  certPath: string;
  keyPath: string;
  certPem: string;
  keyPem: string;
}

function paths(dir: string) {
  return { certPath: path.join(dir, 'ca.pem'), keyPath: path.join(dir, 'ca.key.pem') };
}

async function importKey(pem: string): Promise<webcrypto.CryptoKey> {
  const der = x509.PemConverter.decodeFirst(pem);
  return webcrypto.subtle.importKey('pkcs8', der, EC, true, ['sign']);
}

/** The CA at `dir` when it exists, parses, matches its key and stays valid for another day. */
async function loadCa(dir: string): Promise<TestCa | null> {
  const { certPath, keyPath } = paths(dir);
  if (!existsSync(certPath) || !existsSync(keyPath)) return null;
  try {
    const certPem = readFileSync(certPath, 'utf8');
    const keyPem = readFileSync(keyPath, 'utf8');
    const cert = new x509.X509Certificate(certPem);
    if (cert.notAfter.getTime() < Date.now() + DAY || cert.notBefore.getTime() > Date.now()) return null;
    const key = await importKey(keyPem);
    const probe = new Uint8Array([1, 2, 3]);
    const sig = await webcrypto.subtle.sign(SIGN, key, probe);
    const pub = await cert.publicKey.export(EC, ['verify']);
    if (!(await webcrypto.subtle.verify(SIGN, pub, sig, probe))) return null;
    return { dir, certPath, keyPath, certPem, keyPem };
  } catch {
    return null;
  }
}

/**
 * Makes the test CA at `dir` (default testCaDir()), or reuses a valid one. Safe when several
 * processes race: each writes into its own directory and renames it into place.
 */
export async function ensureTestCa(dir: string = testCaDir()): Promise<TestCa> {
  const existing = await loadCa(dir);
  if (existing) return existing;
  const keys = await webcrypto.subtle.generateKey(EC, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: 'CN=sts test CA (local tests only), O=sts tests',
    keys,
    notBefore: new Date(Date.now() - DAY),
    notAfter: new Date(Date.now() + 365 * DAY),
    signingAlgorithm: SIGN,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  const keyPem = x509.PemConverter.encode(pkcs8, 'PRIVATE KEY');
  const certPem = cert.toString('pem');
  const staging = `${dir}.${process.pid}.${Date.now()}`;
  mkdirSync(staging, { recursive: true });
  writeFileSync(path.join(staging, 'ca.pem'), `${certPem}\n`);
  writeFileSync(path.join(staging, 'ca.key.pem'), `${keyPem}\n`, { mode: 0o600 });
  const stale = existsSync(dir) ? `${dir}.stale.${process.pid}.${Date.now()}` : null;
  try {
    if (stale) renameSync(dir, stale);
    renameSync(staging, dir);
  } catch {
    // another process won the race; use its CA
  } finally {
    rmSync(staging, { recursive: true, force: true });
    if (stale) rmSync(stale, { recursive: true, force: true });
  }
  const ca = await loadCa(dir);
  if (!ca) throw new Error(`could not create the test CA in ${dir}`);
  return ca;
}

let caPromise: Promise<TestCa> | undefined;

function currentCa(): Promise<TestCa> {
  caPromise ??= ensureTestCa();
  return caPromise;
}

/** True when this process trusts the test CA (NODE_EXTRA_CA_CERTS points at it). */
export function testCaTrusted(): boolean {
  const extra = process.env.NODE_EXTRA_CA_CERTS;
  return Boolean(extra && path.resolve(extra) === paths(testCaDir()).certPath);
}

export interface IssuedCert {
  /** leaf certificate followed by the CA certificate */
  certPem: string;
  keyPem: string;
}

/** A server certificate signed by the test CA, valid for the given DNS names and IP addresses. */
export async function issueCert(hostnames: string[]): Promise<IssuedCert> {
  if (hostnames.length === 0) throw new Error('issueCert needs at least one host name');
  const ca = await currentCa();
  const caCert = new x509.X509Certificate(ca.certPem);
  const caKey = await importKey(ca.keyPem);
  const keys = await webcrypto.subtle.generateKey(EC, true, ['sign', 'verify']);
  const names: x509.JsonGeneralName[] = hostnames.map((h) => {
    const bare = h.replace(/^\[|\]$/g, '');
    return isIP(bare) ? { type: 'ip', value: bare } : { type: 'dns', value: h };
  });
  const cert = await x509.X509CertificateGenerator.create({
    subject: `CN=${hostnames[0]!.replace(/[,=+<>#;"\\]/g, '_')}`,
    issuer: caCert.subject,
    notBefore: new Date(Date.now() - DAY),
    notAfter: new Date(Date.now() + 30 * DAY),
    signingAlgorithm: SIGN,
    publicKey: keys.publicKey,
    signingKey: caKey,
    extensions: [
      new x509.SubjectAlternativeNameExtension(names, false),
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth], false),
      await x509.AuthorityKeyIdentifierExtension.create(caCert, false),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return {
    certPem: `${cert.toString('pem')}\n${ca.certPem.trim()}\n`,
    keyPem: `${x509.PemConverter.encode(pkcs8, 'PRIVATE KEY')}\n`,
  };
}

export interface ReceivedRequest {
  method: string;
  /** path and query */
  path: string;
  headers: IncomingHttpHeaders;
  rawBody: Buffer;
  /** Date.now() when the body was complete */
  receivedAt: number;
}

export interface ReceiverResponse {
  status?: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** wait this long before answering (timeouts) */
  delayMs?: number;
  /** destroy the connection without an answer */
  hangUp?: boolean;
}

export type Responder = (req: ReceivedRequest) => ReceiverResponse | Promise<ReceiverResponse>;

export interface HttpsReceiverOptions {
  /** names and IPs in the certificate; default localhost, 127.0.0.1, ::1 */
  hostnames?: string[];
  /** how to answer; default 200 {"ok":true} */
  handler?: Responder;
  /** host used in `url`; default the first host name */
  urlHost?: string;
  /** keep every request in `requests` (default true; benchmarks turn it off) */
  record?: boolean;
  /** called for every complete request, before the answer */
  onRequest?: (req: ReceivedRequest) => void;
  port?: number;
}

export interface HttpsReceiver {
  /** https://<host>:<port> (no trailing slash) */
  url: string;
  port: number;
  requests: ReceivedRequest[];
  setResponder(fn: Responder): void;
  /** TLS connections accepted so far (keep-alive reuse shows as fewer connections than requests) */
  connectionCount(): number;
  /** resolves once at least `n` requests arrived */
  waitForRequests(n: number, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

const DEFAULT_HOSTS = ['localhost', '127.0.0.1', '::1'];

/** An HTTPS server with a test-CA certificate that records requests and answers as told. */
export async function startHttpsReceiver(options: HttpsReceiverOptions = {}): Promise<HttpsReceiver> {
  const hostnames = options.hostnames ?? DEFAULT_HOSTS;
  const { certPem, keyPem } = await issueCert(hostnames);
  let responder: Responder = options.handler ?? (() => ({ status: 200, body: '{"ok":true}' }));
  const record = options.record ?? true;
  const requests: ReceivedRequest[] = [];
  const waiters = new Set<() => void>();
  const delays = new Set<NodeJS.Timeout>();

  const server = https.createServer({ cert: certPem, key: keyPem, keepAliveTimeout: 30_000 }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const received: ReceivedRequest = {
        method: req.method ?? 'GET',
        path: req.url ?? '/',
        headers: req.headers,
        rawBody: Buffer.concat(chunks),
        receivedAt: Date.now(),
      };
      if (record) requests.push(received);
      options.onRequest?.(received);
      for (const w of waiters) w();
      void answer(received, req, res);
    });
  });

  async function answer(received: ReceivedRequest, req: IncomingMessage, res: ServerResponse) {
    let r: ReceiverResponse;
    try {
      r = await responder(received);
    } catch {
      r = { status: 500, body: 'responder failed' };
    }
    if (r.delayMs) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => (delays.delete(t), resolve()), r.delayMs);
        delays.add(t);
      });
    }
    if (r.hangUp) {
      req.socket.destroy();
      return;
    }
    if (res.destroyed) return;
    res.writeHead(r.status ?? 200, { 'content-type': 'application/json', ...r.headers });
    res.end(r.body ?? '');
  }

  let connections = 0;
  server.on('secureConnection', () => connections++);

  const listen = (host: string) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port: options.port ?? 0, host, ipv6Only: false }, () => {
        server.off('error', reject);
        resolve();
      });
    });
  try {
    await listen('::');
  } catch {
    await listen('127.0.0.1');
  }
  const port = (server.address() as AddressInfo).port;
  const host = options.urlHost ?? hostnames[0]!;
  const urlHost = isIP(host) === 6 ? `[${host}]` : host;

  return {
    url: `https://${urlHost}:${port}`,
    port,
    requests,
    connectionCount: () => connections,
    setResponder(fn) {
      responder = fn;
    },
    waitForRequests(n, timeoutMs = 15_000) {
      if (requests.length >= n) return Promise.resolve(requests);
      return new Promise((resolve, reject) => {
        const check = () => {
          if (requests.length >= n) {
            clearTimeout(timer);
            waiters.delete(check);
            resolve(requests);
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`expected ${n} requests, got ${requests.length} within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const t of delays) clearTimeout(t);
        delays.clear();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

// `node --import tsx packages/testing/src/https.ts [dir]`: make (or reuse) the test CA, print its path.
if (require.main === module) {
  ensureTestCa(process.argv[2] ?? testCaDir())
    .then((ca) => process.stdout.write(`${ca.certPath}\n`))
    .catch((err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    });
}
