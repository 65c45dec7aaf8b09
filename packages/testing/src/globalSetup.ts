import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { migrate } from '@sts/db';
import { pgbouncerAvailable, PGBOUNCER_BIN, startPgBouncer, type PgBouncer } from './pgbouncer';
import { dockerAvailable, LOCAL_DEFAULTS, reachable, startContainers, urlsFromEnv, type ServiceUrls } from './services';

declare global {
  // kept for globalTeardown, which runs in the same process
  var __STS_TEST_STOP__: (() => Promise<void>) | undefined;
  // STS_VIA_PGBOUNCER=1: the run's PgBouncer, stopped by globalTeardown
  var __STS_TEST_PGBOUNCER__: PgBouncer | undefined;
}

export default async function globalSetup(): Promise<void> {
  const fromEnv = urlsFromEnv();
  const urls: ServiceUrls = { ...LOCAL_DEFAULTS, ...fromEnv };
  const explicit = Object.keys(fromEnv).length > 0;
  if (!explicit) {
    // No URLs given: use local services when they answer, else containers where Docker exists.
    const missing: (keyof ServiceUrls)[] = [];
    if (!(await reachable(urls.postgres, 5432))) missing.push('postgres');
    if (!(await reachable(urls.redis, 6379))) missing.push('redis');
    if (!(await reachable(urls.amqp, 5672))) missing.push('amqp');
    if (missing.length) {
      if (!dockerAvailable()) {
        throw new Error(
          `tests need PostgreSQL, Redis and RabbitMQ: ${missing.join(', ')} not reachable and no Docker engine; set TEST_POSTGRES_URL, TEST_REDIS_URL, TEST_AMQP_URL`,
        );
      }
      const started = await startContainers(missing);
      Object.assign(urls, started.urls);
      globalThis.__STS_TEST_STOP__ = started.stop;
    }
  }
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const template = `sts_t_${runId}_tpl`;
  const admin = new Client({ connectionString: urls.postgres });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${template}"`);
  } finally {
    await admin.end();
  }
  const templateUrl = new URL(urls.postgres);
  templateUrl.pathname = `/${template}`;
  await migrate(templateUrl.toString());

  // STS_VIA_PGBOUNCER=1: every test database is handed out through one PgBouncer in transaction
  // mode (isolation.ts); what needs a session gets the direct URL (DATABASE_DIRECT_URL)
  if (process.env.STS_VIA_PGBOUNCER === '1') {
    if (!pgbouncerAvailable())
      throw new Error(`STS_VIA_PGBOUNCER=1 but ${PGBOUNCER_BIN} is not installed (apt-get install pgbouncer)`);
    const pgbouncer = await startPgBouncer({ upstream: urls.postgres });
    globalThis.__STS_TEST_PGBOUNCER__ = pgbouncer;
    process.env.STS_TEST_PGBOUNCER_PORT = String(pgbouncer.port);
    console.log(`\ntests: through PgBouncer (transaction mode) on 127.0.0.1:${pgbouncer.port}`);
  }

  // Workers are spawned after this and inherit these.
  process.env.STS_TEST_RUN_ID = runId;
  process.env.STS_TEST_TEMPLATE_DB = template;
  process.env.STS_TEST_URLS = JSON.stringify(urls);
}
