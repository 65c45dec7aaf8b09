import { mapXTweet } from './wire';

describe('X wire mapping', () => {
  const base = { id: '5', text: 'post 5', author_id: '1', created_at: '2026-01-01T00:00:00.000Z' };

  it("maps X's referenced_tweets (replies, quotes, reposts) and leaves out types it may add later", () => {
    const t = mapXTweet(
      {
        ...base,
        referenced_tweets: [
          { type: 'replied_to', id: '1' },
          { type: 'quoted', id: '2' },
          { type: 'retweeted', id: '3' },
          { type: 'something_new', id: '4' },
          { type: 'quoted' },
        ],
      },
      [],
    );
    expect(t.referencedTweets).toEqual([
      { type: 'replied_to', id: '1' },
      { type: 'quoted', id: '2' },
      { type: 'retweeted', id: '3' },
    ]);
    expect(mapXTweet(base, []).referencedTweets).toEqual([]);
  });
});
