/**
 * Per-test-file isolation on the real services: each call makes a fresh database (cloned from the
 * run's migrated template), a fresh RabbitMQ vhost, or a fresh Redis key prefix. The run's
 * globalTeardown removes everything that carries the run id.
 */
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { Redis } from 'ioredis';
import { createVhost, type ServiceUrls } from './services';

function runInfo(): { runId: string; template: string; urls: ServiceUrls } {
  const runId = process.env.STS_TEST_RUN_ID;
  const template = process.env.STS_TEST_TEMPLATE_DB;
  const raw = process.env.STS_TEST_URLS;
  if (!runId || !template || !raw)
    throw new Error('test services are not set up: run the tests through jest (globalSetup)');
  return { runId, template, urls: JSON.parse(raw) as ServiceUrls };
}

function suffix(): string {
  return randomBytes(4).toString('hex');
}

export function testServiceUrls(): ServiceUrls {
  return runInfo().urls;
}

/** A new, migrated database for this test file. */
export async function createTestDatabase(): Promise<{ url: string; name: string; drop: () => Promise<void> }> {
  const { runId, template, urls } = runInfo();
  const name = `sts_t_${runId}_${suffix()}`;
  const admin = new Client({ connectionString: urls.postgres });
  await admin.connect();
  try {
    // CREATE DATABASE ... TEMPLATE fails while another session is connected to the template; retry briefly.
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.query(`CREATE DATABASE "${name}" TEMPLATE "${template}"`);
        break;
      } catch (err) {
        if (attempt >= 20) throw err;
        await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
      }
    }
  } finally {
    await admin.end();
  }
  const url = new URL(urls.postgres);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: async () => {
      const c = new Client({ connectionString: urls.postgres });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** A new RabbitMQ vhost for this test file; returns its AMQP URL. */
export async function createTestVhost(): Promise<{ url: string; vhost: string }> {
  const { runId, urls } = runInfo();
  const vhost = `sts_t_${runId}_${suffix()}`;
  return { url: await createVhost(urls, vhost), vhost };
}

/** A Redis URL and a key prefix that nothing else in the run uses. */
export function createTestRedis(): { url: string; prefix: string; cleanup: () => Promise<void> } {
  const { runId, urls } = runInfo();
  const prefix = `t:${runId}:${suffix()}:`;
  return {
    url: urls.redis,
    prefix,
    cleanup: async () => {
      const r = new Redis(urls.redis, { maxRetriesPerRequest: 1 });
      try {
        let cursor = '0';
        do {
          const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
          cursor = next;
          if (keys.length) await r.del(...keys);
        } while (cursor !== '0');
      } finally {
        r.disconnect();
      }
    },
  };
}
