/**
 * REDIS_MODE / REDIS_URL / REDIS_KEY_PREFIX: parsed once at start with clear errors (no values
 * echoed), and createRedis() building the client each mode asks for (against the real Redis for
 * standalone; the cluster client against a real cluster is tested by the gateway and the poller).
 */
import { Writable } from 'node:stream';
import { Cluster, Redis } from 'ioredis';
import { z } from 'zod';
import { createTestRedis, waitFor } from '@sts/testing';
import { commonEnv, ConfigError, createLogger, createRedis, parseEnv, redisConfigFromEnv } from './index';

const schema = z.object({ ...commonEnv });

function problems(env: Record<string, string>): string[] {
  try {
    parseEnv(schema, env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe('Redis settings', () => {
  it('defaults to one local server in standalone mode', () => {
    const env = parseEnv(schema, {});
    expect([env.REDIS_MODE, env.REDIS_URL, env.REDIS_KEY_PREFIX]).toEqual([
      'standalone',
      'redis://127.0.0.1:6379',
      'sts:',
    ]);
  });

  it('cluster mode takes one or more seed URLs, with password and TLS from the first', () => {
    const env = parseEnv(schema, {
      REDIS_MODE: 'cluster',
      REDIS_URL: 'rediss://app:s%40cret@node-a:7000, rediss://node-b:7001,rediss://node-c',
    });
    const config = redisConfigFromEnv(env);
    expect(config.mode).toBe('cluster');
    expect(config.urls.map((u) => `${u.hostname}:${u.port || 6379}`)).toEqual([
      'node-a:7000',
      'node-b:7001',
      'node-c:6379',
    ]);
    const client = createRedis(env, { lazyConnect: true }) as Cluster;
    try {
      expect(client).toBeInstanceOf(Cluster);
      expect(client.options.keyPrefix).toBe('sts:');
      expect(client.options.redisOptions).toMatchObject({ username: 'app', password: 's@cret', tls: {} });
      // the seed nodes the client starts from (ioredis keeps them in a private field)
      expect((client as unknown as { startupNodes: unknown }).startupNodes).toEqual([
        { host: 'node-a', port: 7000 },
        { host: 'node-b', port: 7001 },
        { host: 'node-c', port: 6379 },
      ]);
    } finally {
      client.disconnect();
    }
  });

  it('names the variable of every bad setting without echoing it', () => {
    expect(problems({ REDIS_MODE: 'sentinel' })).toEqual([expect.stringMatching(/^REDIS_MODE: /)]);
    const several = problems({ REDIS_URL: 'redis://:hunter2@a:6379,redis://:hunter2@b:6379' });
    expect(several).toEqual([expect.stringMatching(/^REDIS_URL: lists several addresses.*REDIS_MODE=cluster/)]);
    expect(several.join()).not.toContain('hunter2');
    expect(problems({ REDIS_MODE: 'cluster', REDIS_URL: 'redis://a:6379/2' })).toEqual([
      expect.stringMatching(/^REDIS_URL: a Redis Cluster has only database 0/),
    ]);
    expect(problems({ REDIS_MODE: 'cluster', REDIS_URL: 'redis://a:6379,rediss://b:6379' })).toEqual([
      expect.stringMatching(/^REDIS_URL: mixes redis:\/\/ and rediss:\/\//),
    ]);
    expect(problems({ REDIS_MODE: 'cluster', REDIS_KEY_PREFIX: '{sts}:' })).toEqual([
      expect.stringMatching(/^REDIS_KEY_PREFIX: must not contain \{ or \}/),
    ]);
    expect(problems({ REDIS_MODE: 'cluster', REDIS_URL: 'redis://a:6379,http://b' })).toEqual([
      expect.stringMatching(/^REDIS_URL: must be a URL with scheme redis or rediss/),
    ]);
    // createRedis checks too (callers that read the raw environment, such as the admin CLI)
    expect(() => createRedis({ REDIS_URL: 'redis://a,redis://b' })).toThrow(ConfigError);
  });

  it('standalone mode builds the single-server client with the key prefix, against the real Redis', async () => {
    const handle = createTestRedis();
    const client = createRedis({ REDIS_URL: handle.url, REDIS_KEY_PREFIX: handle.prefix });
    const raw = new Redis(handle.url);
    try {
      expect(client).toBeInstanceOf(Redis);
      await client.set('k', 'v');
      expect(await raw.get(`${handle.prefix}k`)).toBe('v');
    } finally {
      client.disconnect();
      raw.disconnect();
      await handle.cleanup();
    }
  });

  it("with a service's logger, a connection error is a 'redis connection error' warning naming the cause", async () => {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const logger = createLogger({ service: 'redis-test', stream, level: 'warn' });
    // nothing listens on port 1: the connection is refused (the client connects at once)
    const client = createRedis(
      { REDIS_URL: 'redis://127.0.0.1:1', REDIS_KEY_PREFIX: 't:' },
      { logger, reconnect: false },
    );
    // winston writes through its transport stream: the line arrives on a later tick
    await waitFor(() => lines.some((l) => l.includes('redis connection error')));
    client.disconnect();
    const warning = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.message === 'redis connection error');
    expect(warning).toMatchObject({ level: 'warn', service: 'redis-test' });
    expect(String(warning!.err)).toMatch(/ECONNREFUSED/);
  });
});
