/**
 * monitor.post_deleted on the local store, with the real PostgreSQL, Redis and RabbitMQ and the
 * real webhook-dispatcher: a deleted tweet (deleteSocialTweet, what `npm run cli -- social delete
 * ID` runs) is noticed through the tweets' channel, the same push as new tweets, and sent to the
 * monitors whose events name deletes, with the hit each had sent for it (or null), once.
 */
import { createLogger } from '@sts/common';
import type { Db } from '@sts/db';
import { createLocalSource, createSocialTweet, createSocialUser, deleteSocialTweet } from '@sts/social';
import { waitFor, waitForMany, openTestStore, type TestStore } from '@sts/testing';
import { createRedisLeases } from './adapters/lease';
import { createPostDeletes } from './adapters/postDeletes';
import { createProfileRepository } from './adapters/profiles';
import { createHitWriter } from './adapters/hitWriter';
import { createScheduleStore } from './adapters/scheduleStore';
import { openDeliveryBed, type DeliveryBed } from '../test/deliveryBed';
import { createPoller, type Poller } from './poller';

const logger = createLogger({ service: 'deletes-test', level: 'error' });

describe('deleted posts on the local store', () => {
  let bed: TestStore;
  let db: Db;
  let poller: Poller;
  let deliveries: DeliveryBed;

  beforeAll(async () => {
    bed = await openTestStore({ poolSize: 6 });
    db = bed.db;
    deliveries = await openDeliveryBed({ ...bed, logger, name: 'deletes' });
    poller = createPoller({
      schedule: createScheduleStore(db),
      writer: createHitWriter(db),
      source: createLocalSource({ db }),
      leases: createRedisLeases(bed.redis),
      logger,
      // an hour between polls: what is seen here comes by the push
      intervals: { plans: { free: { pollIntervalSec: 3600 }, starter: { pollIntervalSec: 3600 } } },
      tickMs: 100,
      concurrency: 8,
      batchSize: 100,
      pollTimeoutMs: 30_000,
      claimLimit: 200,
      databaseUrl: bed.dbDirectUrl,
      profiles: createProfileRepository(db),
      postDeletes: createPostDeletes(db),
    });
    await poller.start();
  });

  afterAll(async () => {
    await poller.stop();
    await deliveries.close();
    await bed.close();
  });

  const deletedTo = (path: string) => deliveries.delivered('monitor.post_deleted', path);

  it('a deleted tweet is one signed monitor.post_deleted with the hit it had sent, only where deletes were asked', async () => {
    await createSocialUser(db, { username: 'Deleter', name: 'Deleter' });
    const wants = await deliveries.watch('Deleter', 'deleter', ['posts', 'deletes']);
    const postsOnly = await deliveries.watch('Deleter', 'deleter-posts', ['posts']);
    // the first poll sets the position: tweets after it are hits
    await waitFor(async () => (await db.pollCursor.findUnique({ where: { targetKey: 'deleter' } })) ?? null, 20_000);
    const tweet = await createSocialTweet(db, { authorUsername: 'Deleter', text: 'posted in haste' });
    const hit = await waitFor(() => db.hit.findFirst({ where: { monitorId: wants, tweetId: tweet.id } }), 20_000);

    expect(await deleteSocialTweet(db, tweet.id)).toEqual({ id: tweet.id, authorUsername: 'Deleter' });
    const [req] = await waitForMany(() => deletedTo('deleter'), 1, 20_000);
    expect(deliveries.signedBy(req!, wants)).toBe(true);
    const body = JSON.parse(req!.rawBody.toString()) as Record<string, unknown>;
    expect(body).toMatchObject({
      event: 'monitor.post_deleted',
      monitor: { id: wants, targetUsername: 'Deleter' },
      postId: tweet.id,
      username: 'Deleter',
      hit: { id: hit.id, text: 'posted in haste', createdAt: tweet.createdAt.toISOString() },
    });
    expect(Date.parse(body.deletedAt as string)).toBeGreaterThan(tweet.createdAt.getTime());
    // the monitor's next number after the hit's, in the body and the header
    expect(hit.sequence).not.toBeNull();
    expect(body.sequence).toBe(Number(hit.sequence) + 1);
    expect(req!.headers['x-service-sequence']).toBe(String(body.sequence));
    expect(await db.monitorEvent.count({ where: { monitorId: postsOnly } })).toBe(0);
    await expect(deleteSocialTweet(db, tweet.id)).rejects.toThrow(/unknown tweet/);
  });

  it('a tweet that matched nothing: hit null; told once however often the deletion is seen', async () => {
    await createSocialUser(db, { username: 'Quiet', name: 'Quiet' });
    const m = await deliveries.watch('Quiet', 'quiet', ['deletes']);
    const tweet = await createSocialTweet(db, { authorUsername: 'Quiet', text: 'no monitor sends posts' });
    await deleteSocialTweet(db, tweet.id);
    await waitFor(() => deletedTo('quiet').length === 1 || null, 20_000);
    expect(JSON.parse(deletedTo('quiet')[0]!.rawBody.toString())).toMatchObject({ postId: tweet.id, hit: null });
    // the same deletion seen again (X replaying a gap, a second notification) writes nothing
    expect(await createPostDeletes(db).record('quiet', tweet.id, new Date())).toBe(0);
    expect(await db.monitorEvent.count({ where: { monitorId: m, kind: 'monitor.post_deleted' } })).toBe(1);
  });
});
