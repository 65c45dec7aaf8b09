/**
 * Test support: the dashboard started in the test's own process, with its ops server, on a test
 * file's own database, Redis prefix and RabbitMQ vhost (with an SMTP sink for its mail); a cookie-keeping HTTP client for it; the
 * read-api (child process) and gateway (in process) the browser tests call; Debian's Chromium and
 * the click-and-wait of its forms.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startInProcess } from '@sts/common';
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase, createTestRedis, createTestVhost, spawnService } from '@sts/testing';
import { gatewayService } from '../../gateway/src/main';
import { dashboardService } from '../src/main';
import { startSmtpSink, type SmtpSink } from '../src/mail/smtpSink';

export interface RunningDashboard {
  port: number;
  opsPort: number;
  /** `http://127.0.0.1:<port>` */
  base: string;
  stop(): Promise<void>;
}

export async function start(source: NodeJS.ProcessEnv): Promise<RunningDashboard> {
  const s = await startInProcess(dashboardService, source);
  const port = s.info.port as number;
  return { port, opsPort: s.opsPort, base: `http://127.0.0.1:${port}`, stop: () => s.stop() };
}

/** a test file's own PostgreSQL database, Redis key prefix and RabbitMQ vhost, and the env naming them */
export interface TestBackends {
  db: { url: string; directUrl: string; drop(): Promise<void> };
  redis: { url: string; prefix: string; cleanup(): Promise<void> };
  env: {
    DATABASE_URL: string;
    DATABASE_DIRECT_URL: string;
    REDIS_URL: string;
    REDIS_KEY_PREFIX: string;
    AMQP_URL: string;
  };
  /** removes the Redis keys, then drops the database */
  drop(): Promise<void>;
}

export async function createBackends(): Promise<TestBackends> {
  const db = await createTestDatabase();
  const redis = createTestRedis();
  const vhost = await createTestVhost();
  return {
    db,
    redis,
    env: {
      DATABASE_URL: db.url,
      DATABASE_DIRECT_URL: db.directUrl,
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: redis.prefix,
      AMQP_URL: vhost.url,
    },
    async drop() {
      await redis.cleanup();
      await db.drop();
    },
  };
}

/** A dashboard in process that sends its mail to an SMTP sink of its own, and a client of its database. */
export interface MailDashboard {
  backends: TestBackends;
  dash: RunningDashboard;
  /** the sink the dashboard sends to; a test that starts it again on its port sets the new one here */
  sink: SmtpSink;
  db: Db;
  /** stops the dashboard and the sink, closes the client and drops the backends */
  stop(): Promise<void>;
}

/**
 * `env` on top of the test backends', the sink's SMTP_URL and DASHBOARD_PUBLIC_URL
 * http://dash.example.test. What started is stopped again when a later step fails.
 */
export async function startMailDashboard(env: Record<string, string>): Promise<MailDashboard> {
  const backends = await createBackends();
  const mail: Partial<MailDashboard> & Pick<MailDashboard, 'backends' | 'stop'> = {
    backends,
    async stop() {
      await mail.dash?.stop();
      await mail.sink?.stop();
      await mail.db?.$disconnect();
      await backends.drop();
    },
  };
  try {
    mail.sink = await startSmtpSink();
    mail.db = createDbClient({ url: backends.db.url, poolSize: 2 });
    mail.dash = await start({
      ...dashboardEnv(backends),
      SMTP_URL: mail.sink.url,
      DASHBOARD_PUBLIC_URL: 'http://dash.example.test',
      ...env,
    });
  } catch (err) {
    await mail.stop();
    throw err;
  }
  return mail as MailDashboard;
}

/** how every test dashboard listens: ports the system picks, on 127.0.0.1, and a fresh session secret */
export function listenEnv(): Record<string, string> {
  return {
    DASHBOARD_PORT: '0',
    DASHBOARD_HOST: '127.0.0.1',
    OPS_PORT: '0',
    SESSION_SECRET: randomBytes(32).toString('base64url'),
  };
}

/** a fresh SECRETS_ENCRYPTION_KEY */
export const newSecretsKey = (): string => randomBytes(32).toString('base64');

/** the dashboard's env on the test file's backends: listening as {@link listenEnv}, a fresh secrets key */
export function dashboardEnv(backends: TestBackends): Record<string, string> {
  return { ...backends.env, ...listenEnv(), SECRETS_ENCRYPTION_KEY: newSecretsKey() };
}

/**
 * A tiny cookie-keeping client of the dashboard at `base` (a jar: name → value; a cookie set to
 * expire is dropped); `headers` go with every request. Paths starting with http are taken as they are.
 */
export function dashboardClient(base: string, headers: Record<string, string> = {}) {
  const jar = new Map<string, string>();
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  const c = {
    setCookies: [] as string[],
    async req(path: string, form?: Record<string, string | string[]>, extra: RequestInit = {}) {
      let body: string | undefined;
      if (form) {
        const p = new URLSearchParams();
        for (const [k, v] of Object.entries(form)) for (const one of [v].flat()) p.append(k, one);
        body = p.toString();
      }
      const res = await fetch(path.startsWith('http') ? path : base + path, {
        method: form ? 'POST' : 'GET',
        redirect: 'manual',
        headers: {
          ...headers,
          cookie: cookie(),
          ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        },
        body,
        ...extra,
      });
      const set = res.headers.getSetCookie();
      c.setCookies.push(...set);
      for (const one of set) {
        const pair = one.split(';')[0]!;
        const name = pair.slice(0, pair.indexOf('='));
        if (/Expires=Thu, 01 Jan 1970/i.test(one)) jar.delete(name);
        else jar.set(name, pair.slice(pair.indexOf('=') + 1));
      }
      return {
        status: res.status,
        headers: res.headers,
        text: await res.text(),
        location: res.headers.get('location'),
      };
    },
    /** loads the form's page for its CSRF token, then posts the form to `action` */
    async post(pagePath: string, action: string, form: Record<string, string>) {
      const page = await c.req(pagePath);
      return c.req(action, { _csrf: c.csrf(page.text), ...form });
    },
    /** `name=value` of one cookie (default the plain-HTTP session cookie), '' when unset */
    cookie: (name = 'sts_dash') => (jar.has(name) ? `${name}=${jar.get(name)!}` : ''),
    /** every cookie, as a Cookie header */
    cookies: cookie,
    signedIn: () => jar.has('sts_dash'),
    csrf: (text: string) => /name="_csrf" value="([^"]+)"/.exec(text)?.[1] ?? '',
  };
  return c;
}

const CHROMIUM = '/usr/bin/chromium';

/** launch options for Debian's Chromium (never a downloaded one) */
export function chromiumOptions(): { executablePath: string; headless: true; args: string[] } {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`);
  return {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  };
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch(chromiumOptions());
}

/** clicks the page's (first) button of that name and waits for the navigation: the answer's status */
export async function submit(page: Page, button: string): Promise<number> {
  const [res] = await Promise.all([
    page.waitForNavigation(),
    page.getByRole('button', { name: button, exact: true }).first().click(),
  ]);
  return res?.status() ?? 0;
}

export interface RunningGateway {
  url: string;
  stop(): Promise<void>;
}

/** the read-api as a child process and the gateway in this process in front of it */
export async function startGateway(common: Record<string, string>, internalToken: string): Promise<RunningGateway> {
  const readApi = spawnService('services/read-api/src/main.ts', {
    DATABASE_URL: common.DATABASE_URL ?? '',
    READ_API_PORT: '0',
    READ_API_HOST: '127.0.0.1',
    INTERNAL_TOKEN: internalToken,
    LOG_LEVEL: 'error',
  });
  const readApiPort = (JSON.parse(await readApi.waitForLine(/read-api listening/, 60_000)) as { port: number }).port;
  const gateway = await startInProcess(gatewayService, {
    ...common,
    OPS_PORT: '0',
    GATEWAY_PORT: '0',
    GATEWAY_HOST: '127.0.0.1',
    READ_API_URL: `http://127.0.0.1:${readApiPort}`,
    INTERNAL_TOKEN: internalToken,
    USAGE_FLUSH_MS: '200',
  });
  return {
    url: `http://127.0.0.1:${gateway.info.port as number}`,
    async stop() {
      await gateway.stop().catch(() => undefined);
      readApi.child.kill('SIGTERM');
      await readApi.exited;
    },
  };
}
