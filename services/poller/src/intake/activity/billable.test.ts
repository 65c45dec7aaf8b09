/**
 * The X Activity API events X bills (`profile.update.*`, `post.create`; `post.delete` is free)
 * are counted as they arrive on the activity stream (x_billable_total{resource="activity_event"}),
 * for the watched account they are about: the intake against the fake X's activity stream.
 */
import { createLogger } from '@sts/common';
import { createProcessGovernor, type XBillableRead } from '@sts/social';
import { createFakeActivity, startFakeX, waitFor, type FakeX } from '@sts/testing';
import { createXActivityApi, type XaaEvent } from '@sts/x-activity';
import { ActivityIntake } from './intake';
import { activityStubs } from '../../../test/activityStubs';

const TOKEN = 'activity-billing-token';

describe('the activity stream counts the events X bills', () => {
  let fake: FakeX;
  const activity = createFakeActivity({ keepAliveMs: 200 });

  beforeAll(async () => {
    fake = await startFakeX({ bearerToken: TOKEN, routes: activity.routes });
  });
  afterAll(() => fake.stop());

  it('a profile change is one billed event of its account, a deletion none', async () => {
    const alice = fake.state.addUser({ username: 'Alice', description: 'old bio' });
    const post = fake.state.post({ author: 'Alice', text: 'soon gone' });
    const api = createXActivityApi({ baseUrl: fake.url, bearerToken: TOKEN, governor: createProcessGovernor() });
    for (const eventType of ['profile.update.bio', 'post.delete'] as const)
      expect((await api.create({ eventType, userId: alice.id }, 'sts')).ok).toBe(true);
    const recorded: XBillableRead[] = [];
    const events: XaaEvent[] = [];
    const watched = {
      userId: alice.id,
      targetKey: 'alice',
      paying: true,
      types: ['profile.update.bio', 'post.delete'] as const,
    };
    const intake = new ActivityIntake({
      ...activityStubs([watched]),
      api,
      onEvent: (e) => {
        events.push(e);
        return Promise.resolve();
      },
      logger: createLogger({ service: 'activity-billing', level: 'error' }),
      billing: { record: (reads) => void recorded.push(...reads) },
      syncMs: 3_600_000,
    });
    intake.start();
    await intake.sync();
    await waitFor(() => activity.connections() === 1);
    fake.state.update('Alice', { description: 'new bio' });
    fake.state.deletePost(post.id);
    await waitFor(() => events.length === 2);
    await intake.stop();
    const bio = events.find((e) => e.eventType === 'profile.update.bio')!;
    expect(events.map((e) => e.eventType).sort()).toEqual(['post.delete', 'profile.update.bio']);
    expect(recorded).toEqual([{ resource: 'activity_event', id: bio.uuid, account: 'alice' }]);
  });
});
