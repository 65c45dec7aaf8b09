/**
 * Differential fuzzing of this package's HTTP/1.1 request parser against llhttp (node:http, which
 * the servers behind a proxy typically run): the same bytes go to both, and every request our
 * server hands its handler must be one llhttp framed the same way (same method, target, Host and
 * body, at the same position on the connection). Where the two disagree ours must be the one
 * refusing: it may stop earlier (a 4xx and close), never hand on a request llhttp would read
 * differently — that is what request smuggling needs.
 *
 * Both servers are fed in memory (a Duplex standing in for the socket, `server.emit('connection')`)
 * so thousands of cases run in a few seconds. Used by src/differential.test.ts (a fixed seed and one
 * random seed per run) and by `pnpm fuzz:gateway` (bench/fuzz-gateway.ts; FUZZ_ITERATIONS,
 * FUZZ_SEED) for longer runs.
 */
import http from 'node:http';
import { Duplex } from 'node:stream';
import { createHttpServer } from '../src/server';

/** a seeded PRNG (mulberry32): the same seed gives the same cases */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** what a server handed its handler: one request */
interface Seen {
  method: string;
  target: string;
  host: string | undefined;
  body: string;
  complete: boolean;
}

export interface FuzzResult {
  disagreements: Disagreement[];
  /** cases where our server took at least one request (the rest it refused from the start) */
  accepted: number;
  /** requests our server took, all cases together */
  requests: number;
}

interface Disagreement {
  input: string;
  ours: Seen[];
  llhttp: Seen[];
  reason: string;
}

/** an in-memory socket: what is pushed is read by the server, what the server writes is dropped */
class MemorySocket extends Duplex {
  remoteAddress = '127.0.0.1';
  remotePort = 40000;
  localAddress = '127.0.0.1';
  localPort = 80;
  constructor() {
    super({ allowHalfOpen: true });
  }
  override _read(): void {}
  override _write(_chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    cb();
  }
  override _final(cb: (err?: Error | null) => void): void {
    cb();
  }
  setNoDelay(): this {
    return this;
  }
  setTimeout(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
}

const turn = () => new Promise<void>((r) => setImmediate(r));

/** Feeds every input to both parsers; returns the inputs where ours accepted something llhttp framed otherwise. */
export async function differential(inputs: readonly string[]): Promise<FuzzResult> {
  const ours = new Map<MemorySocket, Seen[]>();
  const llhttp = new Map<MemorySocket, Seen[]>();
  const gw = createHttpServer({
    handler: (req, res) => {
      const socket = (res as unknown as { conn: { socket: MemorySocket } }).conn.socket;
      ours.get(socket)!.push({
        method: req.method,
        target: req.target,
        host: req.headers.host,
        body: req.body?.toString('latin1') ?? '',
        complete: true,
      });
      res.send(200, '', 'ok');
    },
    requestTimeoutMs: 60_000,
  });
  const nodeRequests = new Map<Seen, http.IncomingMessage>();
  const node = http.createServer({ maxHeaderSize: 64 * 1024 }, (req, res) => {
    const seen: Seen = {
      method: req.method ?? '',
      target: req.url ?? '',
      host: req.headers.host,
      body: '',
      complete: false,
    };
    nodeRequests.set(seen, req);
    llhttp.get(req.socket as unknown as MemorySocket)!.push(seen);
    req.on('data', (c: Buffer) => (seen.body += c.toString('latin1')));
    req.on('end', () => res.end('ok'));
  });
  // a parse error: leave the socket be, so the requests read before it still deliver their bodies
  node.on('clientError', () => undefined);
  const pairs: Array<[string, MemorySocket, MemorySocket]> = [];
  for (const input of inputs) {
    const g = new MemorySocket();
    const n = new MemorySocket();
    g.on('error', () => undefined);
    n.on('error', () => undefined);
    ours.set(g, []);
    llhttp.set(n, []);
    gw.server.emit('connection', g);
    node.emit('connection', n);
    const bytes = Buffer.from(input, 'latin1');
    g.push(bytes);
    n.push(bytes);
    g.push(null);
    n.push(null);
    pairs.push([input, g, n]);
  }
  // let both servers read everything (node:http's bodies arrive over a few turns)
  let last = '';
  for (let i = 0; i < 50; i++) {
    await turn();
    let sig = '';
    for (const [, g, n] of pairs) {
      sig += `${ours.get(g)!.length}.`;
      for (const seen of llhttp.get(n)!) sig += `${seen.body.length}.`;
    }
    if (sig === last && i > 3) break;
    last = sig;
  }
  // llhttp read a request whole when node:http marked it complete (set as the parser ends the message)
  for (const [seen, req] of nodeRequests) seen.complete = req.complete;
  const out: FuzzResult = { disagreements: [], accepted: 0, requests: 0 };
  for (const [input, g, n] of pairs) {
    const gs = ours.get(g)!;
    const ls = llhttp.get(n)!;
    if (gs.length > 0) out.accepted++;
    out.requests += gs.length;
    const reason = compare(gs, ls);
    if (reason !== null) out.disagreements.push({ input, ours: gs, llhttp: ls, reason });
    g.destroy();
    n.destroy();
  }
  await gw.close(0);
  node.close();
  return out;
}

/** null when every request our server took is the request llhttp read at the same position */
function compare(gs: Seen[], ls: Seen[]): string | null {
  for (let i = 0; i < gs.length; i++) {
    const g = gs[i]!;
    const l = ls[i];
    if (l === undefined || !l.complete) return `request ${i}: our server took it, llhttp did not read it whole`;
    if (g.method !== l.method) return `request ${i}: method ${g.method} vs ${l.method}`;
    if (g.target !== l.target) return `request ${i}: target ${g.target} vs ${l.target}`;
    if ((g.host ?? '') !== (l.host ?? '')) return `request ${i}: host ${g.host} vs ${l.host}`;
    if (g.body !== l.body) return `request ${i}: body ${JSON.stringify(g.body)} vs ${JSON.stringify(l.body)}`;
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// generating requests

type Rand = () => number;
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;

const METHODS = ['GET', 'GET', 'GET', 'HEAD', 'POST', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'TRACE'];
const ODD_METHODS = ['CONNECT', 'get', 'FOO', 'PRI', 'M-SEARCH', 'PROPFIND', 'G ET', '', 'GET\t', 'SOURCE'];
const TARGETS = ['/', '/a', '/api/v1/users/alice?x=1', '/a%20b', '/?q=a,b;c', '/#f', '//x', '/a/../b', '/~u'];
const ODD_TARGETS = ['*', 'http://h/x', '/\xe9', '/a b', '/a\tb', 'h:443', '', '/a\x7f', '/\x00'];
const VERSIONS = ['HTTP/1.1', 'HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0'];
const ODD_VERSIONS = ['HTTP/1.2', 'HTTP/2.0', 'HTTP/0.9', 'http/1.1', 'HTTP/11', 'HTTP/1.1 ', 'HTTP/1', 'HTTP/1.01'];
const CL_NAMES = ['Content-Length', 'content-length', 'CONTENT-LENGTH'];
const ODD_CL_NAMES = ['Content-Length ', ' Content-Length', 'Content_Length', 'Content-Length\t', 'Content-Lengt'];
const TE_NAMES = ['Transfer-Encoding', 'transfer-encoding'];
const ODD_TE_NAMES = ['Transfer-Encoding ', ' Transfer-Encoding', 'Transfer_Encoding', 'Transfer-Encoding\t'];
const TE_VALUES = ['chunked', 'Chunked', 'CHUNKED', ' chunked', 'chunked ', '\tchunked'];
const ODD_TE_VALUES = ['chunked, chunked', 'gzip, chunked', 'chunked, gzip', 'identity', 'chunked;q=1', 'xchunked', ''];
const HOSTS = ['h', 'a.example:80', '[::1]:8080', '', 'h h', 'h\t', 'h,h'];
const OTHER_HEADERS: Array<[string, string[]]> = [
  ['Connection', ['close', 'keep-alive', 'Close', 'upgrade', 'close, foo', 'keep-alive, close']],
  ['Expect', ['100-continue', '100-Continue', 'foo']],
  ['Upgrade', ['websocket', 'h2c']],
  ['Accept', ['*/*', 'application/json', 'a\x80b', '"q"']],
  ['X-Request-Id', ['abc', 'a b', '']],
  ['Trailer', ['X-T']],
  ['Keep-Alive', ['timeout=5']],
];
const NOISE = [
  '\r',
  '\n',
  ' ',
  '\t',
  ':',
  ',',
  ';',
  '0',
  'a',
  '=',
  '"',
  '\x00',
  '\x7f',
  '\x80',
  '\xff',
  '\r\n',
  '\v',
  '\f',
];

function chunkedBody(r: Rand, data: string, eol: string): string {
  let out = '';
  let pos = 0;
  while (pos < data.length) {
    const n = Math.min(data.length - pos, 1 + Math.floor(r() * 12));
    let size = n.toString(16);
    const q = r();
    if (q < 0.1) size = size.toUpperCase();
    else if (q < 0.2) size = `00${size}`;
    else if (q < 0.25) size = `${size} `;
    else if (q < 0.3) size = ` ${size}`;
    let ext = '';
    const e = r();
    if (e < 0.08) ext = ';a';
    else if (e < 0.12) ext = ';a=b';
    else if (e < 0.15) ext = ';a="b c"';
    else if (e < 0.17) ext = '; a';
    else if (e < 0.19) ext = ';a =b';
    else if (e < 0.2) ext = ';';
    out += `${size}${ext}${eol}${data.slice(pos, pos + n)}${r() < 0.97 ? eol : ''}`;
    pos += n;
  }
  out += `0${r() < 0.05 ? ';x=y' : ''}${eol}`;
  const t = r();
  if (t < 0.1) out += `X-T: v${eol}`;
  else if (t < 0.13) out += `X T: v${eol}`;
  else if (t < 0.15) out += `Content-Length: 5${eol}`;
  if (r() < 0.97) out += eol;
  return out;
}

/** one request (or several pipelined, some smuggling-shaped), as latin1 text */
function generate(r: Rand): string {
  const odd = () => r() < 0.08;
  const eol = r() < 0.93 ? '\r\n' : pick(r, ['\n', '\r', '\r\r\n', '\n\r']);
  const method = odd() ? pick(r, ODD_METHODS) : pick(r, METHODS);
  const target = odd() ? pick(r, ODD_TARGETS) : pick(r, TARGETS);
  const version = odd() ? pick(r, ODD_VERSIONS) : pick(r, VERSIONS);
  const sep = r() < 0.97 ? ' ' : pick(r, ['  ', '\t']);
  let head = `${method}${sep}${target} ${version}${eol}`;
  const lines: string[] = [];
  if (r() < 0.93) lines.push(`Host: ${r() < 0.9 ? 'h' : pick(r, HOSTS)}`);
  if (r() < 0.05) lines.push(`Host: ${pick(r, HOSTS)}`);
  const data = Array.from({ length: Math.floor(r() * 30) }, () => String.fromCharCode(32 + Math.floor(r() * 95))).join(
    '',
  );
  const framing = r();
  let body = '';
  if (framing < 0.35) {
    const name = odd() ? pick(r, ODD_CL_NAMES) : pick(r, CL_NAMES);
    const d = r();
    const value =
      d < 0.75
        ? String(data.length)
        : pick(r, [
            String(data.length + 1),
            String(Math.max(0, data.length - 1)),
            ` ${data.length}`,
            `${data.length} `,
            `+${data.length}`,
            `0${data.length}`,
            `${data.length},${data.length}`,
            `${data.length}, ${data.length}`,
            '-1',
            '0x5',
            '',
            '99999999999999999999',
          ]);
    lines.push(`${name}: ${value}`);
    if (r() < 0.05) lines.push(`${pick(r, CL_NAMES)}: ${r() < 0.5 ? value : data.length + 2}`);
    body = data;
  } else if (framing < 0.6) {
    const name = odd() ? pick(r, ODD_TE_NAMES) : pick(r, TE_NAMES);
    lines.push(`${name}: ${odd() ? pick(r, ODD_TE_VALUES) : pick(r, TE_VALUES)}`);
    if (r() < 0.06) lines.push(`${pick(r, TE_NAMES)}: ${pick(r, [...TE_VALUES, ...ODD_TE_VALUES])}`);
    if (r() < 0.06) lines.push(`Content-Length: ${data.length}`);
    body = chunkedBody(r, data, r() < 0.95 ? '\r\n' : eol);
  } else if (framing < 0.65) body = data; // a body without framing: the next request's bytes
  for (let i = Math.floor(r() * 3); i > 0; i--) {
    const [name, values] = pick(r, OTHER_HEADERS);
    lines.push(`${name}: ${pick(r, values)}`);
  }
  if (r() < 0.05) lines.push(pick(r, ['X-A: 1\r\n  folded', 'NoColon', ': v', 'X-A:v', 'X-A :v', 'X-A:\tv\t']));
  for (let i = lines.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [lines[i], lines[j]] = [lines[j]!, lines[i]!];
  }
  for (const line of lines) head += `${line}${eol}`;
  let text = `${r() < 0.03 ? '\r\n' : ''}${head}${eol}${body}`;
  // often a second request behind it: where the first one ends is what matters
  if (r() < 0.6) text += `GET /second HTTP/1.1${eol}Host: h${eol}${eol}`;
  return text;
}

/** 1–3 random edits: insert, delete, replace, duplicate a line, drop a CR or LF */
function mutate(r: Rand, text: string): string {
  for (let k = 1 + Math.floor(r() * 3); k > 0; k--) {
    const at = Math.floor(r() * (text.length + 1));
    const op = r();
    if (op < 0.35) text = text.slice(0, at) + pick(r, NOISE) + text.slice(at);
    else if (op < 0.55) text = text.slice(0, at) + text.slice(at + 1);
    else if (op < 0.75) text = text.slice(0, at) + pick(r, NOISE) + text.slice(at + 1);
    else if (op < 0.88) {
      const lines = text.split('\r\n');
      const i = Math.floor(r() * lines.length);
      lines.splice(i, 0, lines[i]!);
      text = lines.join('\r\n');
    } else {
      const i = text.indexOf(r() < 0.5 ? '\r' : '\n', at);
      if (i !== -1) text = text.slice(0, i) + text.slice(i + 1);
    }
  }
  return text;
}

/** `count` cases from `seed`: about half generated, half generated then mutated */
export function cases(seed: number, count: number): string[] {
  const r = prng(seed);
  return Array.from({ length: count }, () => (r() < 0.5 ? generate(r) : mutate(r, generate(r))));
}

/** runs `count` cases of `seed` in batches; the disagreements found */
export async function fuzz(seed: number, count: number, batch = 500): Promise<FuzzResult> {
  const all = cases(seed, count);
  const total: FuzzResult = { disagreements: [], accepted: 0, requests: 0 };
  for (let i = 0; i < all.length; i += batch) {
    const r = await differential(all.slice(i, i + batch));
    total.disagreements.push(...r.disagreements);
    total.accepted += r.accepted;
    total.requests += r.requests;
  }
  return total;
}
