/**
 * Per-test-file isolation on the real services: each call makes a fresh database (cloned from the
 * run's migrated template), a fresh RabbitMQ vhost, or a fresh Redis key prefix. The run's
 * globalTeardown removes everything that carries the run id.
 *
 * With STS_VIA_PGBOUNCER=1 (globalSetup starts one PgBouncer in transaction mode for the run) a
 * test database's `url` goes through that PgBouncer and `directUrl` straight to PostgreSQL, as
 * DATABASE_URL and DATABASE_DIRECT_URL do in production; otherwise both are the direct URL.
 */
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { Redis } from 'ioredis';
import { applyDatabaseSettingsAt } from '@sts/db';
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

/** the run's PgBouncer port (STS_VIA_PGBOUNCER=1), or undefined */
const pgbouncerPort = () => process.env.STS_TEST_PGBOUNCER_PORT;

/**
 * The URL to hand a service as DATABASE_DIRECT_URL for its DATABASE_URL: a test database's URL
 * through the run's PgBouncer turned back into the direct one; any other URL as it is.
 */
export function directTestDatabaseUrl(databaseUrl: string): string {
  const port = pgbouncerPort();
  const u = new URL(databaseUrl);
  if (port === undefined || u.hostname !== '127.0.0.1' || u.port !== port) return databaseUrl;
  const upstream = new URL(runInfo().urls.postgres);
  u.hostname = upstream.hostname;
  u.port = upstream.port;
  return u.toString();
}

export interface TestDatabase {
  /** DATABASE_URL: through the run's PgBouncer under STS_VIA_PGBOUNCER=1, else direct */
  url: string;
  /** DATABASE_DIRECT_URL: always straight to PostgreSQL (LISTEN, session advisory locks) */
  directUrl: string;
  name: string;
  drop: () => Promise<void>;
}

/** A new, migrated database for this test file. */
export async function createTestDatabase(): Promise<TestDatabase> {
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
  const directUrl = url.toString();
  // a clone does not inherit its template's database settings (the query timeout)
  await applyDatabaseSettingsAt(directUrl);
  const port = pgbouncerPort();
  if (port !== undefined) {
    url.hostname = '127.0.0.1';
    url.port = port;
  }
  return {
    url: url.toString(),
    directUrl,
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
