/**
 * Payload preview: the monitor page's body per format equals, byte for byte, what the
 * webhook-dispatcher really sends for the same hit — native, Discord and Slack, each received by
 * a real HTTPS receiver — and a monitor without hits gets a valid example hit.
 */
import { randomBytes } from 'node:crypto';
import { createLogger } from '@sts/common';
import { createSecretBox } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { MonitorHitPayload } from '@sts/messaging';
import {
  createAccount,
  createHit,
  createMonitor,
  createTestDatabase,
  hitEnvelope,
  startHttpsReceiver,
  type HttpsReceiver,
} from '@sts/testing';
import { createUseCases, EXAMPLE_TWEET_ID, planConfigFromEnv, secretBoxFromEnv, type UseCases } from '@sts/usecases';
import { createDispatcher, type Dispatcher } from '../../webhook-dispatcher/src/app';
import { createPrismaRepository } from '../../webhook-dispatcher/src/adapters/repository';

const KEY = randomBytes(32).toString('base64');
const box = createSecretBox(KEY);

describe('payload preview', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let receiver: HttpsReceiver;
  let dispatcher: Dispatcher;
  let uc: UseCases;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    db = createDbClient({ url: testDb.url, poolSize: 4 });
    receiver = await startHttpsReceiver();
    dispatcher = createDispatcher({
      repository: createPrismaRepository(db),
      logger: createLogger({ service: 'payload-preview-test', level: 'error' }),
      secretsKey: KEY,
      timeoutMs: 2000,
      maxConcurrencyPerEndpoint: 4,
      allowPrivateHosts: ['localhost'],
      senderOverrides: {
        // Discord and Slack URLs really go to the local receiver (the body is still chosen by kind)
        urlOverride: (url) =>
          ['discord.com', 'hooks.slack.com'].includes(url.hostname) ? new URL(`${receiver.url}${url.pathname}`) : url,
      },
    });
    uc = createUseCases({ db, ...planConfigFromEnv({}), secretBox: secretBoxFromEnv(KEY) });
  });

  afterAll(async () => {
    dispatcher.close();
    await receiver.close();
    await db.$disconnect();
    await testDb.drop();
  });

  it.each([
    ['native', (r: string) => `${r}/native`],
    ['discord', () => 'https://discord.com/api/webhooks/123/tok-en'],
    ['slack', () => 'https://hooks.slack.com/services/T0/B0/xyz'],
  ] as const)('the %s body shown is the body the dispatcher sends for the same hit', async (kind, url) => {
    const account = await createAccount(db, 'starter');
    const monitor = await createMonitor(db, box, {
      accountId: account.id,
      url: url(receiver.url),
      keywords: ['launch', '-"dry run"'],
    });
    const hit = await createHit(db, monitor, 'Launch <today> & *bold* @everyone "quoted" ✓ 🎉 <!channel>');
    const preview = await uc.webhooks.payloadPreview(account.id, monitor.id);
    expect(preview.sample).toBe('latest-hit');
    expect(preview.kind).toBe(kind);

    const before = receiver.requests.length;
    await expect(dispatcher.handle(hitEnvelope(monitor, hit))).resolves.toBe('ack');
    const got = receiver.requests[before]!;
    expect(got.rawBody.equals(Buffer.from(preview.bodies[kind], 'utf8'))).toBe(true);
    // the three formats differ: the comparison above picks the right one
    expect(new Set(Object.values(preview.bodies)).size).toBe(3);
  });

  it('a monitor without hits gets an example hit that matches its first keyword; other accounts get 404', async () => {
    const account = await createAccount(db, 'starter');
    const monitor = await createMonitor(db, box, { accountId: account.id, keywords: ['-noise', 'rocket'] });
    const preview = await uc.webhooks.payloadPreview(account.id, monitor.id);
    expect(preview.sample).toBe('example');
    expect(preview.kind).toBeNull();
    expect(MonitorHitPayload.parse(preview.payload)).toEqual(preview.payload);
    expect(preview.payload.tweet).toMatchObject({ id: EXAMPLE_TWEET_ID, authorUsername: monitor.targetUsername });
    expect(preview.payload.tweet.text).toContain('rocket');
    expect(JSON.parse(preview.bodies.native)).toEqual(preview.payload);

    const other = await createAccount(db, 'starter');
    await expect(uc.webhooks.payloadPreview(other.id, monitor.id)).rejects.toMatchObject({ name: 'NotFoundError' });
  });
});
