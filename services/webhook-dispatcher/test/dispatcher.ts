/**
 * The dispatcher's own test support (the general helpers are @sts/testing's): the service as a
 * child process, as it runs in production, so tests can SIGKILL or SIGTERM it; or in process, with
 * its database and an HTTPS receiver (startInProcessDispatcher).
 */
import { PassThrough } from 'node:stream';
import type client from 'prom-client';
import { createLogger } from '@sts/common';
import { createDbClient, type Db } from '@sts/db';
import {
  createTestDatabase,
  spawnService,
  startHttpsReceiver,
  type HttpsReceiver,
  type ServiceProcess,
} from '@sts/testing';
import { createPrismaRepository } from '../src/adapters/repository';
import { createDispatcher, type Dispatcher } from '../src/app';
import { createHoldingStore } from '../src/adapters/holding';
import type { HoldBounds } from '../src/domain/hold';

/** Starts src/main.ts with `env`; resolves once it consumes (its "started" line is printed). */
export async function spawnDispatcher(env: Record<string, string>, timeoutMs = 30_000): Promise<ServiceProcess> {
  const p = spawnService('services/webhook-dispatcher/src/main.ts', env);
  try {
    await p.waitForLine(/webhook-dispatcher started/, timeoutMs);
  } catch (err) {
    p.child.kill('SIGKILL');
    throw err;
  }
  return p;
}

/** The ops port the process printed at start. */
export function opsPort(p: ServiceProcess): number {
  const line = p.lines.find((l) => l.includes('webhook-dispatcher started'));
  const port = line === undefined ? undefined : (JSON.parse(line) as { opsPort?: number }).opsPort;
  if (!port) throw new Error('the dispatcher printed no ops port');
  return port;
}

/**
 * A dispatcher in process on its own test database, delivering to a real HTTPS receiver on
 * localhost: the set-up the end-to-end delivery tests share. `close()` undoes all of it.
 */
export interface InProcessDispatcher {
  db: Db;
  receiver: HttpsReceiver;
  dispatcher: Dispatcher;
  /** the dispatcher's log lines (JSON), when started with `captureLogs` */
  logLines: string[];
  close(): Promise<void>;
}

export interface InProcessOptions {
  /** default 2000 */
  timeoutMs?: number;
  /** default 4 */
  maxConcurrencyPerEndpoint?: number;
  /** log at debug into `logLines` instead of at error to stdout */
  captureLogs?: boolean;
  /** these hosts' webhook URLs (Discord, Slack) really go to the local receiver, path kept */
  routeToReceiver?: readonly string[];
  /** WEBHOOK_HOLD_DAYS / WEBHOOK_HOLD_MAX (default 3 days, 10,000) */
  holdBounds?: HoldBounds;
  /** the dispatcher's metrics are registered here */
  registry?: client.Registry;
}

export async function startInProcessDispatcher(
  service: string,
  secretsKey: string,
  opts: InProcessOptions = {},
): Promise<InProcessDispatcher> {
  const testDb = await createTestDatabase();
  const db = createDbClient({ url: testDb.url, poolSize: 4 });
  const receiver = await startHttpsReceiver();
  const logLines: string[] = [];
  const stream = opts.captureLogs ? new PassThrough() : undefined;
  stream?.on('data', (chunk: Buffer) => logLines.push(...chunk.toString('utf8').split('\n').filter(Boolean)));
  const routed = new Set(opts.routeToReceiver ?? []);
  const dispatcher = createDispatcher({
    repository: createPrismaRepository(db),
    holding: createHoldingStore(db),
    ...(opts.holdBounds && { holdBounds: opts.holdBounds }),
    ...(opts.registry && { registry: opts.registry }),
    logger: stream ? createLogger({ service, level: 'debug', stream }) : createLogger({ service, level: 'error' }),
    secretsKey,
    timeoutMs: opts.timeoutMs ?? 2000,
    maxConcurrencyPerEndpoint: opts.maxConcurrencyPerEndpoint ?? 4,
    allowPrivateHosts: ['localhost'],
    ...(routed.size > 0 && {
      senderOverrides: {
        urlOverride: (url: URL) => (routed.has(url.hostname) ? new URL(`${receiver.url}${url.pathname}`) : url),
      },
    }),
  });
  return {
    db,
    receiver,
    dispatcher,
    logLines,
    async close() {
      dispatcher.close();
      await receiver.close();
      await db.$disconnect();
      await testDb.drop();
    },
  };
}
