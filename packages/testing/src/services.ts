/**
 * Where the test run finds PostgreSQL, Redis and RabbitMQ. Environment first (CI points these at
 * the local services); where none is set and a Docker engine answers, testcontainers starts them.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface ServiceUrls {
  postgres: string; // admin URL (database `postgres`)
  redis: string;
  amqp: string; // URL of the default vhost
  amqpManagement?: string; // http(s)://user:pass@host:port of the management API
}

export const LOCAL_DEFAULTS: ServiceUrls = {
  postgres: 'postgresql://postgres@127.0.0.1:5432/postgres',
  redis: 'redis://127.0.0.1:6379',
  amqp: 'amqp://guest:guest@127.0.0.1:5672',
  amqpManagement: 'http://guest:guest@127.0.0.1:15672',
};

export function urlsFromEnv(env: NodeJS.ProcessEnv = process.env): Partial<ServiceUrls> {
  const out: Partial<ServiceUrls> = {};
  if (env.TEST_POSTGRES_URL) out.postgres = env.TEST_POSTGRES_URL;
  if (env.TEST_REDIS_URL) out.redis = env.TEST_REDIS_URL;
  if (env.TEST_AMQP_URL) out.amqp = env.TEST_AMQP_URL;
  if (env.TEST_AMQP_MANAGEMENT_URL) out.amqpManagement = env.TEST_AMQP_MANAGEMENT_URL;
  return out;
}

export function dockerAvailable(): boolean {
  return existsSync('/var/run/docker.sock') || Boolean(process.env.DOCKER_HOST);
}

/** Starts the missing services with testcontainers; returns their URLs and a stop function. */
export async function startContainers(
  missing: (keyof ServiceUrls)[],
): Promise<{ urls: Partial<ServiceUrls>; stop: () => Promise<void> }> {
  const { GenericContainer, Wait } = await import('testcontainers');
  const started: { stop: () => Promise<unknown> }[] = [];
  const urls: Partial<ServiceUrls> = {};
  if (missing.includes('postgres')) {
    const c = await new GenericContainer('postgres:16-alpine')
      .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust' })
      .withExposedPorts(5432)
      .withWaitStrategy(Wait.forLogMessage(/database system is ready to accept connections/, 2))
      .start();
    started.push(c);
    urls.postgres = `postgresql://postgres@${c.getHost()}:${c.getMappedPort(5432)}/postgres`;
  }
  if (missing.includes('redis')) {
    const c = await new GenericContainer('redis:7-alpine').withExposedPorts(6379).start();
    started.push(c);
    urls.redis = `redis://${c.getHost()}:${c.getMappedPort(6379)}`;
  }
  if (missing.includes('amqp')) {
    const c = await new GenericContainer('rabbitmq:3-management-alpine')
      .withExposedPorts(5672, 15672)
      .withWaitStrategy(Wait.forLogMessage(/Server startup complete/))
      .start();
    started.push(c);
    urls.amqp = `amqp://guest:guest@${c.getHost()}:${c.getMappedPort(5672)}`;
    urls.amqpManagement = `http://guest:guest@${c.getHost()}:${c.getMappedPort(15672)}`;
  }
  return { urls, stop: async () => void (await Promise.all(started.map((c) => c.stop()))) };
}

/** True when something accepts TCP connections at the URL's host and port. */
export async function reachable(url: string, defaultPort: number): Promise<boolean> {
  const { createConnection } = await import('node:net');
  const u = new URL(url);
  return new Promise((resolve) => {
    const sock = createConnection({ host: u.hostname, port: Number(u.port || defaultPort) });
    sock.setTimeout(1000);
    sock.once('connect', () => (sock.destroy(), resolve(true)));
    sock.once('error', () => resolve(false));
    sock.once('timeout', () => (sock.destroy(), resolve(false)));
  });
}

// ---- RabbitMQ vhosts: management API when it answers, else rabbitmqctl on this machine ----

async function mgmt(base: string, method: string, path: string, body?: unknown): Promise<Response> {
  const u = new URL(base);
  const auth = Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64');
  u.username = '';
  u.password = '';
  return fetch(new URL(path, u), {
    method,
    headers: { authorization: `Basic ${auth}`, 'content-type': 'application/json' },
    body: body === undefined ? null : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
}

function amqpUser(amqpUrl: string): string {
  return decodeURIComponent(new URL(amqpUrl).username || 'guest');
}

export async function createVhost(urls: ServiceUrls, vhost: string): Promise<string> {
  const user = amqpUser(urls.amqp);
  let viaApi = false;
  if (urls.amqpManagement) {
    try {
      const r = await mgmt(urls.amqpManagement, 'PUT', `/api/vhosts/${encodeURIComponent(vhost)}`, {});
      if (r.ok) {
        const p = await mgmt(
          urls.amqpManagement,
          'PUT',
          `/api/permissions/${encodeURIComponent(vhost)}/${encodeURIComponent(user)}`,
          {
            configure: '.*',
            write: '.*',
            read: '.*',
          },
        );
        viaApi = p.ok;
      }
    } catch {
      viaApi = false;
    }
  }
  if (!viaApi) {
    await run('rabbitmqctl', ['add_vhost', vhost]).catch((err: { stderr?: string }) => {
      if (!String(err.stderr ?? '').includes('already exists')) throw err;
    });
    await run('rabbitmqctl', ['set_permissions', '-p', vhost, user, '.*', '.*', '.*']);
  }
  const u = new URL(urls.amqp);
  u.pathname = `/${encodeURIComponent(vhost)}`;
  return u.toString();
}

export async function deleteVhosts(urls: ServiceUrls, prefix: string): Promise<void> {
  let names: string[] = [];
  let viaApi = false;
  if (urls.amqpManagement) {
    try {
      const r = await mgmt(urls.amqpManagement, 'GET', '/api/vhosts');
      if (r.ok) {
        names = ((await r.json()) as { name: string }[]).map((v) => v.name);
        viaApi = true;
      }
    } catch {
      viaApi = false;
    }
  }
  if (!viaApi) {
    const { stdout } = await run('rabbitmqctl', ['list_vhosts', '--quiet', '--no-table-headers']);
    names = stdout.split('\n').map((s) => s.trim());
  }
  for (const name of names.filter((n) => n.startsWith(prefix))) {
    if (viaApi && urls.amqpManagement)
      await mgmt(urls.amqpManagement, 'DELETE', `/api/vhosts/${encodeURIComponent(name)}`);
    else await run('rabbitmqctl', ['delete_vhost', name]).catch(() => undefined);
  }
}
