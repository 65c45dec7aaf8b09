/**
 * The Discord and Slack formats name what a monitor watches: the username, or a query monitor's
 * query; the native body carries `query` in the documented place.
 */
import { discordBody, nativeBody, slackBody } from './webhookBodies';
import { hitPayload, testPayload } from '../test/payloads';

const queryMonitor = { id: 'mon_q', targetUsername: null, query: '"new release" OR launch -giveaway', keywords: null };

describe('webhook bodies of a query monitor', () => {
  it('native: monitor.query is the query and targetUsername null, in the documented order', () => {
    const body = JSON.parse(nativeBody(hitPayload({ monitor: queryMonitor }))) as Record<string, unknown>;
    expect(Object.keys(body.monitor as object)).toEqual(['id', 'targetUsername', 'query', 'keywords']);
    expect(body.monitor).toEqual(queryMonitor);
    expect(JSON.parse(nativeBody(hitPayload())).monitor).toMatchObject({ targetUsername: 'alice', query: null });
  });

  it('Discord and Slack show the query where a username monitor shows the username', () => {
    const hit = hitPayload({ monitor: queryMonitor });
    expect(discordBody(hit).embeds[0]!.footer.text).toBe('Monitor query: "new release" OR launch -giveaway');
    expect(discordBody(hitPayload()).embeds[0]!.footer.text).toBe('Monitor @alice · keywords: launch, big news');
    const slack = slackBody(hit);
    const context = slack.blocks.find((b) => b.type === 'context');
    expect(context && 'elements' in context ? context.elements[0]!.text : '').toMatch(
      /^Monitor query: "new release" OR launch -giveaway · posted /,
    );
    const test = { ...testPayload(), monitor: queryMonitor };
    expect(discordBody(test).embeds[0]!.description).toContain('watching the query "new release" OR launch');
    expect(slackBody(test).text).toContain('watching the query "new release" OR launch -giveaway.');
    expect(slackBody(testPayload()).text).toContain('watching @bob.');
  });
});

describe('webhook bodies of monitor.post_deleted', () => {
  const deleted = {
    event: 'monitor.post_deleted' as const,
    monitor: { id: 'mon_d', targetUsername: 'alice', query: null, keywords: null },
    postId: '1790000000000000001',
    username: 'alice',
    hit: {
      id: '6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f',
      text: 'launch <day> @channel',
      createdAt: '2026-11-20T10:00:00.000Z',
    },
    deletedAt: '2026-11-20T10:07:12.340Z',
  };

  it('native: the documented fields in order, hit null when none was sent', () => {
    const body = JSON.parse(nativeBody(deleted)) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(['event', 'monitor', 'postId', 'username', 'hit', 'deletedAt']);
    expect(body.hit).toEqual(deleted.hit);
    expect(JSON.parse(nativeBody({ ...deleted, hit: null })).hit).toBeNull();
  });

  it('Discord and Slack: a notice naming the account and the post, its text escaped', () => {
    const embed = discordBody(deleted).embeds[0]!;
    expect(embed.title).toBe('@alice deleted a post');
    expect(embed.description).toContain('Post 1790000000000000001');
    const slack = slackBody(deleted);
    expect(slack.text).toContain('@alice deleted a post');
    expect(slack.text).toContain('launch &lt;day&gt; @\u2060channel');
  });
});
