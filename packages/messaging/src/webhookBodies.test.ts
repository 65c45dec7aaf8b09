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
