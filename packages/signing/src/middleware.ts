/**
 * Receiver-side middleware, express-compatible (and usable from a plain node:http server): reads the raw
 * body, verifies the signature, then replaces req.body with the parsed JSON object.
 * Express is not imported; the request and response are described structurally below.
 */
import { WebhookVerificationError } from './errors';
import { verify, type HeadersInput, type SecretInput } from './signature';

/** What the middleware needs from a request: node's IncomingMessage (and so express's Request) fits. */
export interface WebhookRequest {
  headers: HeadersInput;
  /** Unset, or a Buffer left by express.raw(); set to the parsed JSON object on success. */
  body?: unknown;
  /** True once another body parser has consumed the stream. */
  readonly readableEnded?: boolean;
  on(event: string, listener: (...args: never[]) => void): unknown;
  removeListener(event: string, listener: (...args: never[]) => void): unknown;
}

/** What the middleware needs from a response: node's ServerResponse (and so express's Response) fits. */
export interface WebhookResponse {
  statusCode: number;
  readonly headersSent?: boolean;
  setHeader(name: string, value: string | number): unknown;
  end(chunk: string): unknown;
}

export type NextFunction = (err?: unknown) => void;

export type SecretLookup<Req> = (req: Req) => SecretInput | undefined | Promise<SecretInput | undefined>;

export type WebhookMiddlewareOptions<Req extends WebhookRequest = WebhookRequest> = (
  | { /** The endpoint's signing secret (or several during a rotation). */ secret: SecretInput; getSecret?: undefined }
  | {
      /** Looks the secret up per request (e.g. by path); undefined or empty means "unknown endpoint" → 401. */
      getSecret: SecretLookup<Req>;
      secret?: undefined;
    }
) & {
  /** Largest accepted body in bytes; larger bodies are answered 413. Default 1 MiB. */
  maxBodyBytes?: number;
  /** Default 300 s. */
  toleranceSec?: number;
  /** Clock in Unix seconds; for tests. */
  now?: () => number;
};

export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

const TOO_LARGE = Symbol('too large');
const utf8 = new TextDecoder('utf-8', { fatal: true });

function sendError(res: WebhookResponse, status: number, message: string, code: string, close = false): void {
  if (res.headersSent) return;
  const payload = JSON.stringify({ error: message, code });
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(payload));
  // An unread body is not worth draining: close the connection after answering.
  if (close) res.setHeader('Connection', 'close');
  res.end(payload);
}

/** A verified body as a JSON object, or why it is not one (the 400's message). */
function jsonObject(body: Buffer): { value: object } | string {
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    return 'Request body is not valid UTF-8';
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return 'Request body is not valid JSON';
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    return 'Request body must be a JSON object';
  return { value: parsed };
}

function declaredLength(req: WebhookRequest): number | undefined {
  const raw = req.headers['content-length'];
  if (typeof raw !== 'string' || !/^\d+$/.test(raw)) return undefined;
  return Number(raw);
}

/** The raw body: a Buffer/string left by an earlier raw parser, or read from the stream up to `limit` bytes. */
function readRawBody(req: WebhookRequest, limit: number): Promise<Buffer | typeof TOO_LARGE> {
  const preset = req.body;
  if (Buffer.isBuffer(preset)) return Promise.resolve(preset.length > limit ? TOO_LARGE : preset);
  if (typeof preset === 'string') {
    const buf = Buffer.from(preset, 'utf8');
    return Promise.resolve(buf.length > limit ? TOO_LARGE : buf);
  }
  if (req.readableEnded) {
    return Promise.reject(
      new Error(
        'webhookMiddleware: the request body was already consumed by another body parser; mount webhookMiddleware ' +
          'before express.json(), or use express.raw({ type: "application/json" }) on the webhook route',
      ),
    );
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const finish = (): void => {
      settled = true;
      req.removeListener('data', onData);
      req.removeListener('end', onEnd);
      req.removeListener('close', onClose);
      // The error listener stays: a late socket error must not become an uncaught 'error' event.
    };
    const onData = (chunk: Buffer | string): void => {
      if (settled) return;
      const buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
      size += buf.length;
      if (size > limit) {
        finish(); // the stream keeps flowing with no 'data' listener, so the rest is discarded
        resolve(TOO_LARGE);
        return;
      }
      chunks.push(buf);
    };
    const onEnd = (): void => {
      if (settled) return;
      finish();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = (err: Error): void => {
      if (settled) return;
      finish();
      reject(err);
    };
    const onClose = (): void => {
      if (settled) return;
      finish();
      reject(new Error('request closed before its body was fully received'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

type Outcome = 'next' | 'answered';

/**
 * Express-compatible middleware for webhook receivers. On success req.body is the parsed JSON object and
 * next() is called. Answers 401 `{"error", "code": "INVALID_SIGNATURE"}` on a failed verification,
 * 400 `INVALID_REQUEST` for a validly signed body that is not a UTF-8 JSON object, and 413
 * `PAYLOAD_TOO_LARGE` above `maxBodyBytes`. Unexpected errors (getSecret throwing, a body already consumed by
 * another parser) go to next(err).
 */
export function webhookMiddleware<Req extends WebhookRequest = WebhookRequest>(
  options: WebhookMiddlewareOptions<Req>,
): (req: Req, res: WebhookResponse, next: NextFunction) => void {
  const { secret, getSecret, toleranceSec, now } = options;
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  if ((secret === undefined) === (getSecret === undefined)) {
    throw new TypeError('webhookMiddleware needs exactly one of `secret` or `getSecret`');
  }
  if (getSecret !== undefined && typeof getSecret !== 'function') throw new TypeError('getSecret must be a function');
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes <= 0) {
    throw new TypeError('maxBodyBytes must be a positive integer');
  }
  if (secret !== undefined) {
    // Fail at start-up, not on the first delivery.
    const list = typeof secret === 'string' ? [secret] : secret;
    if (list.length === 0 || list.some((s) => typeof s !== 'string' || s.length === 0)) {
      throw new TypeError('webhook secret must be a non-empty string');
    }
  }
  const tooLarge = `Request body exceeds ${maxBodyBytes} bytes`;

  async function handle(req: Req, res: WebhookResponse): Promise<Outcome> {
    const declared = declaredLength(req);
    if (declared !== undefined && declared > maxBodyBytes && !Buffer.isBuffer(req.body)) {
      sendError(res, 413, tooLarge, 'PAYLOAD_TOO_LARGE', true);
      return 'answered';
    }
    const body = await readRawBody(req, maxBodyBytes);
    if (body === TOO_LARGE) {
      sendError(res, 413, tooLarge, 'PAYLOAD_TOO_LARGE', true);
      return 'answered';
    }

    const key = secret ?? (await getSecret?.(req));
    if (key === undefined || key === '' || (Array.isArray(key) && key.length === 0)) {
      sendError(res, 401, 'No signing secret is configured for this endpoint', 'INVALID_SIGNATURE');
      return 'answered';
    }
    try {
      verify({ secret: key, body, headers: req.headers, toleranceSec, now: now?.() });
    } catch (err) {
      if (!(err instanceof WebhookVerificationError)) throw err;
      sendError(res, 401, err.message, err.code);
      return 'answered';
    }

    const parsed = jsonObject(body);
    if (typeof parsed === 'string') {
      sendError(res, 400, parsed, 'INVALID_REQUEST');
      return 'answered';
    }
    req.body = parsed.value;
    return 'next';
  }

  return (req, res, next) => {
    handle(req, res).then((outcome) => {
      if (outcome === 'next') next();
    }, next);
  };
}
