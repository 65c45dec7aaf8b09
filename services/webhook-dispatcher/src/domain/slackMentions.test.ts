/** A post with @channel / @here / @everyone pings nobody on Slack. */
import { monitorHitPayload } from '@sts/messaging';
import { buildBody, escapeSlack, slackBody } from './payloads';

const monitor = { id: 'm1', targetUsername: 'alice', query: null, keywords: null };

describe('Slack mention escaping', () => {
  const text = 'Everyone look @channel @here @everyone <!channel> <!here|here> @Channel';
  const payload = monitorHitPayload(
    monitor,
    { id: '1', text, authorUsername: 'alice', createdAt: '2024-05-01T12:00:00.000Z' },
    '2024-05-01T12:00:01.000Z',
  );

  it('leaves no broadcast mention in any text Slack reads', () => {
    const sent = buildBody('slack', payload);
    expect(sent).not.toMatch(/@(channel|here|everyone)\b/i);
    expect(sent).not.toContain('<!channel>');
    expect(sent).not.toContain('<!here');
    // the words are still readable (a word joiner between @ and the word)
    expect(escapeSlack('@here')).toBe('@\u2060here');
    expect(escapeSlack('<!everyone>')).toBe('&lt;!everyone&gt;');
  });

  it('sends every mrkdwn text object verbatim and the fallback text unparsed', () => {
    const body = slackBody(payload);
    expect(body.parse).toBe('none');
    const objects = body.blocks.flatMap((b) => (b.type === 'section' ? [b.text] : b.elements));
    expect(objects.length).toBeGreaterThan(1);
    for (const o of objects) expect(o.verbatim).toBe(true);
  });
});
