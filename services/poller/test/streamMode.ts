/**
 * The X `stream` mode's test set-up, shared by the stream mode's test files: a test
 * database (one per file), a Redis prefix and a fake X with its filtered stream per test, the
 * stream mode built as main.ts builds it, and the modes and RabbitMQ clients a test started stopped
 * after it.
 * `useStreamHarness()` registers the jest hooks; read the fields inside tests and hooks only.
 */
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { createLogger } from '@sts/common';
import { createDbClient, type Db } from '@sts/db';
import { createXSource } from '@sts/social';
import {
  capturingLogger,
  createAccount,
  createFakeStream,
  createTestDatabase,
  createTestRedis,
  startFakeX,
  type FakeStream,
  type FakeX,
  type FakeXOptions,
} from '@sts/testing';
import { AmqpClient } from '@sts/messaging';
import { buildStreamMode, type RecordQueueOptions, type StreamMode, type StreamModeEnv } from '@sts/x-stream';
import { parseRule } from '@sts/x-stream/src/domain/streamRules';
import { createHitWriter, type HitWriter } from '../src/adapters/hitWriter';
import { createProfileRepository } from '../src/adapters/profiles';
import { createScheduleStore } from '../src/adapters/scheduleStore';
import { createStreamPort } from '../src/intake/stream/port';

export interface StartExtra {
  userCheckMs?: number;
  userCacheTtlSeconds?: number;
  /** this replica's own database client (e.g. through a proxy a test cuts) */
  db?: Db;
  /** RabbitMQ: streamed posts go through the record queues (absent: the holder records them) */
  amqp?: AmqpClient;
  recordQueues?: RecordQueueOptions;
  /** wraps the replica's hit writer (e.g. to slow or count its recording) */
  wrapWriter?: (w: HitWriter) => HitWriter;
  /** new hits this replica recorded */
  hits?: (n: number) => void;
  /** the lookup pre-check's wait after a window's end (X_BACKFILL_LOOKUP=auto) */
  backfillLookupLagMs?: number;
}

export class StreamHarness {
  dbHandle!: Awaited<ReturnType<typeof createTestDatabase>>;
  db!: Db;
  redisHandle!: ReturnType<typeof createTestRedis>;
  redis!: Redis;
  fake!: FakeX;
  stream!: FakeStream;
  readonly running: StreamMode[] = [];
  /** the RabbitMQ clients a test opened (amqpClient), stopped after its modes */
  readonly clients: AmqpClient[] = [];
  readonly logger;

  constructor(service: string) {
    this.logger = createLogger({ service, level: process.env.STREAM_TEST_LOG ?? 'error' });
  }

  env(overrides: Partial<StreamModeEnv> = {}): StreamModeEnv {
    return {
      DATABASE_URL: this.dbHandle.url,
      X_API_BASE_URL: this.fake.url,
      X_BEARER_TOKEN: 'test-token',
      X_TIMEOUT_MS: 5000,
      X_RULE_MAX_LENGTH: 64,
      X_MAX_RULES: 100,
      X_RULE_SETTLE_SECONDS: 0,
      X_RULE_COALESCE_SECONDS: 0,
      X_STREAM_BACKFILL_MINUTES: 0,
      X_STREAM_LEASE_SECONDS: 3,
      X_QUERY_MAX_LENGTH: 512,
      // today's path: every owed window searched (the lookup pre-check has its tests: recent.test.ts)
      X_BACKFILL_LOOKUP: 'off',
      POLL_OVERLAP_SECONDS: 2,
      PLAN_FREE_POLL_INTERVAL_SECONDS: 300,
      PLAN_STARTER_POLL_INTERVAL_SECONDS: 60,
      ...overrides,
    };
  }

  /** the environment of a poller process (src/main.ts) in the stream mode on this test's database, Redis and fake X */
  processEnv(): Record<string, string> {
    return {
      DATABASE_URL: this.dbHandle.url,
      REDIS_URL: this.redisHandle.url,
      REDIS_KEY_PREFIX: this.redisHandle.prefix,
      // no broker listens there: these processes run without RabbitMQ
      AMQP_URL: 'amqp://guest:guest@127.0.0.1:1',
      SOCIAL_SOURCE: 'x',
      X_API_BASE_URL: this.fake.url,
      X_BEARER_TOKEN: 'test-token',
      X_RULE_MAX_LENGTH: '64',
      X_RULE_SETTLE_SECONDS: '0',
      X_RULE_COALESCE_SECONDS: '0',
      X_STREAM_LEASE_SECONDS: '3',
      LOG_LEVEL: 'info',
    };
  }

  /** builds and starts a stream mode (one replica); it is stopped after the test */
  startMode(overrides: Partial<StreamModeEnv> = {}, registry = new Registry(), extra: StartExtra = {}): StreamMode {
    const e = this.env(overrides);
    const source = createXSource({
      baseUrl: e.X_API_BASE_URL,
      bearerToken: 'test-token',
      redis: this.redis,
      ...(extra.userCacheTtlSeconds !== undefined && { userCacheTtlSeconds: extra.userCacheTtlSeconds }),
    });
    const db = extra.db ?? this.db;
    const writer = createHitWriter(db);
    const port = createStreamPort({
      schedule: createScheduleStore(db),
      writer: extra.wrapWriter ? extra.wrapWriter(writer) : writer,
      profiles: createProfileRepository(db),
      logger: this.logger,
    });
    const mode = buildStreamMode(e, {
      db,
      source,
      port,
      logger: this.logger,
      registry,
      // 50 keep-alives (100 ms each) missed: a loaded test machine's pause of the process is no stall
      stallMs: 5000,
      syncMs: 150,
      ...(extra.userCheckMs !== undefined && { userCheckMs: extra.userCheckMs }),
      ...(extra.amqp && { amqp: extra.amqp }),
      ...(extra.recordQueues && { recordQueues: extra.recordQueues }),
      ...(extra.hits && { hits: extra.hits }),
      ...(extra.backfillLookupLagMs !== undefined && { backfillLookupLagMs: extra.backfillLookupLagMs }),
    });
    this.running.push(mode);
    mode.start();
    return mode;
  }

  /** a new fake X (and stream) for this test: other rate limits, windows or rule lengths */
  async restartFake(
    options: { limits?: FakeXOptions['limits']; windowMs?: number; maxRuleLength?: number } = {},
  ): Promise<void> {
    await this.fake.stop();
    this.stream = createFakeStream({ keepAliveMs: 100, maxRuleLength: options.maxRuleLength ?? 64 });
    this.fake = await startFakeX({
      routes: this.stream.routes,
      ...(options.limits && { limits: options.limits }),
      ...(options.windowMs !== undefined && { windowMs: options.windowMs }),
    });
  }

  /** a started RabbitMQ client on `url` that retries quickly, stopped after the test */
  async amqpClient(url: string, name: string): Promise<AmqpClient> {
    const { logger } = capturingLogger(name);
    const c = new AmqpClient({
      url,
      logger,
      name,
      publishTimeoutMs: 3000,
      reconnectDelayMs: { initial: 100, max: 500 },
    });
    this.clients.push(c);
    await c.start();
    return c;
  }

  async hitsOf(monitorId: string): Promise<string[]> {
    const hits = await this.db.hit.findMany({ where: { monitorId }, select: { tweetId: true } });
    return hits.map((h) => h.tweetId).sort();
  }

  /** a Starter account's monitors of `usernames` (made on the fake X if new), by username */
  async watch(usernames: readonly string[], oneByOne = false): Promise<Map<string, string>> {
    for (const u of usernames) if (!this.fake.state.user(u)) this.fake.state.addUser({ username: u });
    const account = await createAccount(this.db, 'starter');
    const rows = usernames.map((u) => ({ accountId: account.id, targetUsername: u, targetKey: u, keywords: [] }));
    if (oneByOne) for (const data of rows) await this.db.monitor.create({ data });
    else await this.db.monitor.createMany({ data: rows });
    const monitors = await this.db.monitor.findMany({ where: { accountId: account.id } });
    return new Map(monitors.map((m) => [m.targetKey!, m.id]));
  }

  /** the usernames the fake stream's rules cover, sorted */
  ruled(): string[] {
    return this.stream
      .rules()
      .flatMap((r) => parseRule({ value: r.value, tag: r.tag }) ?? [])
      .sort();
  }

  async owedRows(): Promise<number> {
    const [row] = await this.db.$queryRaw<{ n: bigint }[]>`SELECT count(*) AS n FROM x_stream_owed`;
    return Number(row!.n);
  }

  /** every (monitor, tweet) one hit with one event; the hits of each monitor are exactly `expected` */
  async expectExactHits(monitors: Map<string, string>, expected: Map<string, string[]>): Promise<void> {
    for (const [name, id] of monitors) expect(await this.hitsOf(id)).toEqual((expected.get(name) ?? []).sort());
    expect(await this.db.outboxEvent.count()).toBe(await this.db.hit.count());
  }
}

/** the harness of one test file, its jest hooks registered */
export function useStreamHarness(service: string): StreamHarness {
  const h = new StreamHarness(service);
  beforeAll(async () => {
    h.dbHandle = await createTestDatabase();
    h.db = createDbClient({ url: h.dbHandle.url, poolSize: 4 });
  });
  afterAll(async () => {
    await h.db.$disconnect();
    await h.dbHandle.drop();
  });
  beforeEach(async () => {
    h.stream = createFakeStream({ keepAliveMs: 100, maxRuleLength: 64 });
    h.fake = await startFakeX({ routes: h.stream.routes });
    // the fleet's governor and user cache: one Redis prefix per test, shared by its replicas
    h.redisHandle = createTestRedis();
    h.redis = new Redis(h.redisHandle.url, { keyPrefix: h.redisHandle.prefix });
    await h.db
      .$executeRaw`TRUNCATE monitors, accounts, hits, outbox, poll_cursors, x_stream_state, x_stream_lease, x_stream_owed, x_stream_changes, target_profiles CASCADE`;
  });
  afterEach(async () => {
    // the modes finish with their clients still up
    await Promise.all(h.running.splice(0).map((m) => m.stop()));
    for (const c of h.clients.splice(0)) await c.stop();
    await h.fake.stop();
    h.redis.disconnect();
    await h.redisHandle.cleanup();
  });
  return h;
}
