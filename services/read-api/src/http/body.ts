/** Reading a small JSON request body with a size limit and a media-type check. */
import type http from 'node:http';
import { InvalidRequestError } from '@sts/common';
import { PayloadTooLargeError, UnsupportedMediaTypeError } from './errors';

const MAX_BODY_BYTES = 16 * 1024;

function isJsonMediaType(header: string): boolean {
  const [type, ...params] = header.split(';');
  const media = (type ?? '').trim().toLowerCase();
  if (media !== 'application/json' && !/^application\/[a-z0-9.+-]+\+json$/.test(media)) return false;
  for (const p of params) {
    const [k, v] = p.split('=');
    if (k?.trim().toLowerCase() === 'charset') {
      const cs = (v ?? '').trim().replace(/^"|"$/g, '').toLowerCase();
      if (cs !== 'utf-8' && cs !== 'utf8') return false;
    }
  }
  return true;
}

function readRaw(req: http.IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) {
      reject(new PayloadTooLargeError(limit));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (err: Error | null, value?: Buffer) => {
      if (done) return;
      done = true;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
      if (err) reject(err);
      else resolve(value!);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) finish(new PayloadTooLargeError(limit));
      else chunks.push(chunk);
    };
    const onEnd = () => finish(null, Buffer.concat(chunks));
    const onError = (err: Error) => finish(err);
    const onAborted = () => finish(new InvalidRequestError('request body was not completed', 'body'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
  });
}

export interface BodyOptions {
  limit?: number;
  /** an absent or empty body is undefined instead of a 400 */
  optional?: boolean;
  /** what the body should be, for the 400 of a missing one; default 'a JSON object with a "text" field' */
  what?: string;
}

/**
 * The parsed JSON body. 415 for a non-JSON Content-Type or a compressed body, 413 over the limit,
 * 400 for an empty body (unless optional) or invalid JSON.
 */
export async function readJsonBody(req: http.IncomingMessage, opts: BodyOptions = {}): Promise<unknown> {
  const limit = opts.limit ?? MAX_BODY_BYTES;
  const required = `request body is required: ${opts.what ?? 'a JSON object with a "text" field'}`;
  const type = req.headers['content-type'];
  const encoding = req.headers['content-encoding'];
  if (encoding && encoding.trim().toLowerCase() !== 'identity') {
    throw new UnsupportedMediaTypeError('compressed request bodies are not supported (Content-Encoding)');
  }
  const hasBody = Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
  if (type === undefined) {
    if (!hasBody) {
      if (opts.optional) return undefined;
      throw new InvalidRequestError(required, 'body');
    }
    throw new UnsupportedMediaTypeError('Content-Type must be application/json');
  }
  if (!isJsonMediaType(type)) throw new UnsupportedMediaTypeError('Content-Type must be application/json');
  const raw = await readRaw(req, limit);
  const text = raw.toString('utf8');
  if (!text.trim()) {
    if (opts.optional) return undefined;
    throw new InvalidRequestError(required, 'body');
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new InvalidRequestError('request body is not valid JSON', 'body');
  }
}
