import type { ProfileChangedPayload, TargetUnavailablePayload } from '@sts/messaging';
import { buildBody, discordBody, nativeBody, slackBody } from './payloads';

const monitor = { id: 'm1', targetUsername: 'NASA', query: null, keywords: null };
const profile: ProfileChangedPayload = {
  event: 'monitor.profile_changed',
  monitor,
  userId: '11348282',
  changed: ['name', 'description'],
  before: { username: 'NASA', name: 'NASA', description: null, profileImageUrl: null, verified: true },
  after: {
    username: 'NASA',
    name: 'NASA **official** @everyone',
    description: '<!channel> moon',
    profileImageUrl: null,
    verified: true,
  },
  detectedAt: '2026-11-20T10:00:01.500Z',
};
const suspended: TargetUnavailablePayload = {
  event: 'monitor.target_unavailable',
  monitor,
  status: 'renamed',
  previousStatus: 'ok',
  username: 'NASA',
  newUsername: 'NASA2',
  detail: '@NASA was renamed to @NASA2; the monitor follows the account',
  detectedAt: '2026-11-20T10:00:01.500Z',
};

describe('profile-change and target-health bodies', () => {
  it('native: exactly the documented fields, in order', () => {
    const extra = { ...profile, accountId: 'a1' } as unknown as ProfileChangedPayload;
    const body = JSON.parse(nativeBody(extra)) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(['event', 'monitor', 'userId', 'changed', 'before', 'after', 'detectedAt']);
    expect(body).toEqual(profile);
    const health = JSON.parse(nativeBody(suspended)) as Record<string, unknown>;
    expect(Object.keys(health)).toEqual([
      'event',
      'monitor',
      'status',
      'previousStatus',
      'username',
      'newUsername',
      'detail',
      'detectedAt',
    ]);
  });

  it('Discord: one embed naming each changed field before → after, markdown escaped, mentioning nobody', () => {
    const d = discordBody(profile);
    expect(d.allowed_mentions).toEqual({ parse: [] });
    expect(d.embeds[0]!.title).toBe('@NASA changed their profile');
    expect(d.embeds[0]!.description).toBe(
      'Display name: NASA → NASA \\*\\*official\\*\\* @everyone\nBio: (none) → \\<!channel\\> moon',
    );
    expect(d.embeds[0]!.url).toBe('https://x.com/NASA');
    expect(discordBody(suspended).embeds[0]!.title).toBe('@NASA was renamed');
    expect(discordBody(suspended).embeds[0]!.url).toBe('https://x.com/NASA2');
  });

  it('Slack: control characters escaped, broadcasts broken, verbatim', () => {
    const s = slackBody(profile);
    expect(s.text).toContain('&lt;!channel&gt; moon');
    expect(s.text).toContain('@\u2060everyone');
    expect(s.blocks[0]).toMatchObject({ type: 'section', text: { verbatim: true } });
    expect(JSON.parse(buildBody('slack', suspended))).toMatchObject({
      text: expect.stringContaining('@NASA was renamed: @NASA was renamed to @NASA2') as unknown,
    });
  });
});
