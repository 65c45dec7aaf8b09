import { PassThrough } from 'node:stream';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import {
  ApiError,
  commonEnv,
  ConfigError,
  createLogger,
  createMetricsRegistry,
  envFields,
  InvalidRequestError,
  parseEnv,
  redact,
  redactText,
  startOpsServer,
  toErrorResponse,
  UnauthorizedError,
} from './index';

describe('parseEnv', () => {
  const schema = z.object({
    ...commonEnv,
    PORT: envFields.port(3000),
    TOKEN: z.string().min(16),
    FLAG: envFields.bool(false),
    HOSTS: envFields.list(),
  });

  it('applies defaults and coerces values', () => {
    const env = parseEnv(schema, { TOKEN: 'x'.repeat(16), PORT: '8080', FLAG: 'yes', HOSTS: 'a, b,,c' });
    expect(env.PORT).toBe(8080);
    expect(env.FLAG).toBe(true);
    expect(env.HOSTS).toEqual(['a', 'b', 'c']);
    expect(env.DATABASE_URL).toMatch(/^postgresql:/);
  });

  it('names every missing or bad variable at once, without echoing values', () => {
    let caught: unknown;
    try {
      parseEnv(schema, { PORT: '99999', REDIS_URL: 'http://secret-host:1', TOKEN: '' });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    const e = caught as ConfigError;
    expect(e.problems).toEqual(
      expect.arrayContaining([
        'TOKEN is required but not set',
        expect.stringMatching(/^PORT: /),
        expect.stringMatching(/^REDIS_URL: must be a URL with scheme redis or rediss/),
      ]),
    );
    expect(e.message).not.toContain('secret-host');
  });
});

describe('logger', () => {
  function capture() {
    const stream = new PassThrough();
    const lines: Record<string, unknown>[] = [];
    stream.on('data', (chunk: Buffer) => {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
    });
    return { stream, lines };
  }

  it('writes JSON lines with the service name and redacts secrets', async () => {
    const { stream, lines } = capture();
    const log = createLogger({ service: 'gw', stream, level: 'info' });
    log.info('request', {
      requestId: 'r1',
      headers: { authorization: 'Bearer abc.def', 'x-api-key': 'sts_live_123456789012', accept: '*/*' },
      secret: 'whsec_abc',
      note: 'used key sts_live_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 and amqp://guest:hunter2@host/x',
    });
    await new Promise((r) => setImmediate(r));
    expect(lines).toHaveLength(1);
    const line = lines[0]!;
    expect(line).toMatchObject({
      level: 'info',
      message: 'request',
      service: 'gw',
      requestId: 'r1',
      secret: '[REDACTED]',
    });
    expect(line.headers).toEqual({ authorization: '[REDACTED]', 'x-api-key': '[REDACTED]', accept: '*/*' });
    expect(JSON.stringify(line)).not.toContain('hunter2');
    expect(JSON.stringify(line)).not.toContain('ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789');
    expect(typeof line.timestamp).toBe('string');
  });

  it('redactText masks every kind of secret in free text, whatever its case, and leaves other text as it is', () => {
    const cases: [string, string][] = [
      ['key sts_live_ABCDEFGH12345678 used', 'sts_live_ABCDEFGH12345678'],
      ['auth BEARER abc.def-ghi', 'abc.def-ghi'],
      ['amqp://guest:hunter2@rabbit:5672', 'hunter2'],
      ['POST https://discordapp.com/api/webhooks/12/tok-EN_x', 'tok-EN_x'],
      ['https://hooks.slack.com/services/T1/B2/zzSecret', 'zzSecret'],
    ];
    for (const [text, secret] of cases) {
      const out = redactText(text);
      expect(out).toContain('[REDACTED]');
      expect(out).not.toContain(secret);
    }
    const plain = 'GET /v1/users/bench_user/tweets 200 in 1.2 ms';
    expect(redactText(plain)).toBe(plain);
  });

  it('redact handles errors, arrays and Discord/Slack webhook tokens', () => {
    const out = redact({
      list: [{ password: 'p' }],
      err: new Error('failed for https://discord.com/api/webhooks/1/tok_en'),
      url: 'https://hooks.slack.com/services/T1/B2/abcdef',
    }) as Record<string, unknown>;
    expect(out.list).toEqual([{ password: '[REDACTED]' }]);
    expect(JSON.stringify(out.err)).not.toContain('tok_en');
    expect(out.url).not.toContain('abcdef');
  });
});

describe('errors', () => {
  it('maps ApiErrors to their status, code and extras', () => {
    const r = toErrorResponse(new InvalidRequestError('limit must be an integer from 1 to 100', 'limit'), 'req-1');
    expect(r.status).toBe(400);
    expect(r.body).toEqual({
      error: 'limit must be an integer from 1 to 100',
      code: 'INVALID_REQUEST',
      request_id: 'req-1',
      param: 'limit',
    });
    expect(toErrorResponse(new UnauthorizedError(), 'x').headers['WWW-Authenticate']).toBe('Bearer');
    expect(new ApiError(429, 'QUOTA_EXCEEDED', 'q').status).toBe(429);
  });

  it('maps anything that is not an ApiError to a detail-free 500', () => {
    // a foreign error carrying a status (as body-parser's did) is not trusted either
    expect(toErrorResponse(Object.assign(new Error('x'), { status: 400 }), 'r').status).toBe(500);
    const internal = toErrorResponse(new Error('db password wrong at /srv/app.ts:12'), 'r');
    expect(internal.status).toBe(500);
    expect(JSON.stringify(internal.body)).not.toContain('password');
  });
});

describe('ops server', () => {
  function get(port: number, path: string): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      http
        .get({ port, path, host: '127.0.0.1' }, (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        })
        .on('error', reject);
    });
  }

  it('answers healthz, readyz with each check (ok/failed, no error text), and metrics', async () => {
    let dbUp = true;
    let phase: 'starting' | 'ready' | 'stopping' = 'starting';
    const failures: string[] = [];
    const ops = await startOpsServer({
      port: 0,
      host: '127.0.0.1',
      registry: createMetricsRegistry('test'),
      phase: () => phase,
      onCheckFailed: (name, error) => failures.push(`${name}: ${error}`),
      checks: {
        db: () => (dbUp ? Promise.resolve() : Promise.reject(new Error('connection refused'))),
        slow: () => new Promise<void>((r) => setTimeout(r, 5)),
      },
    });
    try {
      expect((ops.server.address() as AddressInfo).port).toBe(ops.port);
      expect(await get(ops.port, '/healthz')).toEqual({ status: 200, body: '{"status":"ok"}' });
      expect(await get(ops.port, '/readyz')).toEqual({ status: 503, body: '{"status":"starting","checks":{}}' });
      phase = 'ready';
      expect(JSON.parse((await get(ops.port, '/readyz')).body)).toEqual({
        status: 'ok',
        checks: { db: 'ok', slow: 'ok' },
      });
      dbUp = false;
      const down = await get(ops.port, '/readyz');
      expect(down.status).toBe(503);
      expect(JSON.parse(down.body)).toEqual({ status: 'unavailable', checks: { db: 'failed', slow: 'ok' } });
      expect(down.body).not.toContain('refused');
      expect(failures).toEqual(['db: connection refused']);
      phase = 'stopping';
      expect(await get(ops.port, '/readyz')).toEqual({ status: 503, body: '{"status":"stopping","checks":{}}' });
      const metrics = await get(ops.port, '/metrics');
      expect(metrics.body).toContain('process_cpu_user_seconds_total{service="test"}');
      expect((await get(ops.port, '/nope')).status).toBe(404);
    } finally {
      await ops.close();
    }
  });
});
