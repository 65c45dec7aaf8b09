import { Client } from 'pg';
import { Redis } from 'ioredis';
import { deleteVhosts, type ServiceUrls } from './services';

export default async function globalTeardown(): Promise<void> {
  const runId = process.env.STS_TEST_RUN_ID;
  const raw = process.env.STS_TEST_URLS;
  if (!runId || !raw) return;
  const urls = JSON.parse(raw) as ServiceUrls;
  await globalThis.__STS_TEST_PGBOUNCER__?.stop();
  const admin = new Client({ connectionString: urls.postgres });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [
      `sts_t_${runId}_%`,
    ]);
    for (const { datname } of rows) await admin.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
  } finally {
    await admin.end();
  }
  await deleteVhosts(urls, `sts_t_${runId}_`).catch((err: unknown) => console.warn('vhost cleanup failed', err));
  const redis = new Redis(urls.redis, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `t:${runId}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
  await globalThis.__STS_TEST_STOP__?.();
}
