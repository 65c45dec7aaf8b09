/**
 * The filtered stream's posts are post reads X bills (x_billable_total{resource="post_read"}):
 * counted where the stream hands them over (packages/x-stream xStreamApi.ts), against the fake X's
 * stream; its rules calls bill nothing.
 */
import { createXClient, type XBillableRead, type XBilling } from '@sts/social';
import { createFakeStream, startFakeX, waitFor, type FakeX } from '@sts/testing';
import { createXStreamApi } from '@sts/x-stream/src/xStreamApi';

const TOKEN = 'stream-billing-token';

describe('the filtered stream counts what X bills', () => {
  let fake: FakeX;
  const stream = createFakeStream({ keepAliveMs: 200 });

  beforeAll(async () => {
    fake = await startFakeX({ bearerToken: TOKEN, routes: stream.routes });
    fake.state.addUser({ username: 'Alice' });
    fake.state.addUser({ username: 'carol' });
  });
  afterAll(() => fake.stop());

  it('every streamed post is a post read of its author; the rules calls are none', async () => {
    const recorded: XBillableRead[] = [];
    const billing: XBilling = {
      record: (reads) => void recorded.push(...reads),
      flush: () => Promise.resolve(),
      close: () => Promise.resolve(),
    };
    const client = createXClient({ baseUrl: fake.url, bearerToken: TOKEN, billing });
    const api = createXStreamApi({ client, baseUrl: fake.url, bearerToken: TOKEN });
    await api.addRules([{ value: 'from:alice', tag: 'sts' }]);
    expect(await api.listRules()).toHaveLength(1);
    const seen: string[] = [];
    const abort = new AbortController();
    const { closed } = await api.connect(
      { onTweet: (t) => void seen.push(t.id), onActivity: () => undefined },
      abort.signal,
    );
    const posts = [1, 2].map((i) => fake.state.post({ author: 'Alice', text: `streamed ${i}` }));
    fake.state.post({ author: 'carol', text: 'no rule matches' });
    await waitFor(() => seen.length === 2);
    abort.abort();
    await closed.catch(() => undefined);
    expect(recorded).toEqual(posts.map((p) => ({ resource: 'post_read', id: p.id, account: 'alice' })));
  });
});
