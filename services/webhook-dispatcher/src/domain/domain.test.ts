import { blockedReason } from './addressPolicy';
import {
  buildBody,
  discordBody,
  DISCORD_LIMITS,
  escapeSlack,
  nativeBody,
  slackBody,
  truncate,
  type HitPayload,
  type TestPayload,
} from './payloads';
import { brokenReasonFor, redactWebhookUrl, skipReason, SKIP_REASONS } from './policy';
import { healthNeedsUpdate, healthState } from './health';
import {
  laneKey,
  PLATFORM_PACE,
  rateLimitGiveUpError,
  rateLimitWait,
  rateLimitWaitError,
  retryAfterMs,
  TokenBucket,
} from './pacing';

const hit: HitPayload = {
  event: 'monitor.hit',
  monitor: { id: 'm1', targetUsername: 'NASA', query: null, keywords: ['launch', 'moon landing'] },
  tweet: {
    id: '1790000000000000000',
    text: 'Launch <!channel> & more @everyone **bold** [click](https://evil.example) https://nasa.gov/a_b',
    authorUsername: 'NASA',
    createdAt: '2026-11-20T10:00:00.000Z',
  },
  detectedAt: '2026-11-20T10:00:01.500Z',
};
const ping: TestPayload = {
  event: 'monitor.test',
  monitor: { id: 'm1', targetUsername: 'NASA', query: null, keywords: null },
  test: true,
};

describe('native payloads', () => {
  it('carry exactly the docs/webhooks.md fields of monitor.hit', () => {
    const extra = { ...hit, accountId: 'a1', tweet: { ...hit.tweet, lang: 'en' } } as unknown as HitPayload;
    const body = JSON.parse(nativeBody(extra)) as Record<string, unknown>;
    expect(body).toEqual({
      event: 'monitor.hit',
      monitor: { id: 'm1', targetUsername: 'NASA', query: null, keywords: ['launch', 'moon landing'] },
      tweet: hit.tweet,
      detectedAt: hit.detectedAt,
    });
    expect(Object.keys(body)).toEqual(['event', 'monitor', 'tweet', 'detectedAt']);
  });

  it('carry exactly the docs/webhooks.md fields of monitor.test, keywords null when empty', () => {
    const body = JSON.parse(nativeBody({ ...ping, monitor: { ...ping.monitor, keywords: [] } })) as unknown;
    expect(body).toEqual({
      event: 'monitor.test',
      monitor: { id: 'm1', targetUsername: 'NASA', query: null, keywords: null },
      test: true,
    });
  });
});

describe('Discord payloads', () => {
  it('mention nobody and link the post', () => {
    const body = discordBody(hit);
    expect(body.allowed_mentions).toEqual({ parse: [] });
    const embed = body.embeds[0]!;
    expect(embed.url).toBe('https://x.com/NASA/status/1790000000000000000');
    expect(embed.author).toEqual({ name: '@NASA', url: 'https://x.com/NASA' });
    expect(embed.timestamp).toBe(hit.tweet.createdAt);
    expect(embed.title).toBe('New post by @NASA');
    expect(embed.footer.text).toBe('Monitor @NASA · keywords: launch, moon landing');
    // markdown and masked links are escaped, plain URLs stay linkable
    expect(embed.description).toContain('\\*\\*bold\\*\\*');
    expect(embed.description).toContain('\\[click\\](https://evil.example)');
    expect(embed.description).toContain('https://nasa.gov/a_b');
    expect(embed.description).toContain('\\<!channel\\>');
  });

  it('stay within Discord limits for huge texts', () => {
    const long = { ...hit, tweet: { ...hit.tweet, text: `${'😀'.repeat(3000)}*`.repeat(2) } };
    const embed = discordBody(long).embeds[0]!;
    expect(embed.description.length).toBeLessThanOrEqual(DISCORD_LIMITS.description);
    expect(embed.description.endsWith('…')).toBe(true);
    // no half surrogate pair before the ellipsis
    expect(() => encodeURIComponent(embed.description)).not.toThrow();
    const total = embed.title.length + embed.description.length + embed.footer.text.length + embed.author!.name.length;
    expect(total).toBeLessThanOrEqual(DISCORD_LIMITS.total);
  });

  it('describe a test ping', () => {
    const body = discordBody(ping);
    expect(body.allowed_mentions).toEqual({ parse: [] });
    expect(body.embeds[0]!.title).toBe('Test webhook');
    expect(body.embeds[0]!.description).toContain('@NASA');
  });
});

describe('Slack payloads', () => {
  it('have text and blocks with &, < and > escaped', () => {
    const body = slackBody(hit);
    expect(body.text).toContain('Launch &lt;!channel&gt; &amp; more');
    expect(body.text).not.toContain('<!channel>');
    const [section, context] = body.blocks;
    expect(section).toMatchObject({ type: 'section', text: { type: 'mrkdwn' } });
    const text = (section as { text: { text: string } }).text.text;
    expect(text.startsWith('*<https://x.com/NASA/status/1790000000000000000|New post by @NASA>*\n')).toBe(true);
    expect(text).toContain('&lt;!channel&gt;');
    expect(context).toMatchObject({ type: 'context' });
    const ctx = (context as { elements: { text: string }[] }).elements[0]!.text;
    expect(ctx).toContain('Monitor @NASA');
    expect(ctx).toContain('<https://x.com/NASA/status/1790000000000000000|open post>');
  });

  it('never cut an entity in half and stay under the section limit', () => {
    const body = slackBody({ ...hit, tweet: { ...hit.tweet, text: '&'.repeat(5000) } });
    const text = (body.blocks[0] as { text: { text: string } }).text.text;
    expect(text.length).toBeLessThanOrEqual(3000);
    expect(text).toMatch(/(&amp;)+…$/);
  });

  it('escape only the three control characters', () => {
    expect(escapeSlack('a & b < c > d *e*')).toBe('a &amp; b &lt; c &gt; d *e*');
  });

  it('are chosen by endpoint kind', () => {
    expect(JSON.parse(buildBody('slack', ping))).toHaveProperty('blocks');
    expect(JSON.parse(buildBody('discord', ping))).toHaveProperty('embeds');
    expect(JSON.parse(buildBody('native', ping))).toHaveProperty('test', true);
  });
});

describe('truncate', () => {
  it('leaves short text alone and ends long text with an ellipsis', () => {
    expect(truncate('abc', 3)).toBe('abc');
    expect(truncate('abcdef', 4)).toBe('abc…');
  });
});

describe('delivery policy', () => {
  const webhook = {
    url: 'https://example.com/h',
    kind: 'native' as const,
    isBroken: false,
    brokenReason: null,
    consecutiveFailures: 0,
    firstFailureAt: null as Date | null,
    disabledAt: null as Date | null,
  };
  const starter = { isActive: true, plan: 'starter' as const, trialEndsAt: null, webhook };
  const now = new Date('2026-11-20T00:00:00Z');

  it('sends live hits on Starter and during a trial, not on Free', () => {
    expect(skipReason('monitor.hit', starter, now)).toBeNull();
    const trial = { ...starter, plan: 'free' as const, trialEndsAt: new Date('2026-12-01T00:00:00Z') };
    expect(skipReason('monitor.hit', trial, now)).toBeNull();
    const expired = { ...trial, trialEndsAt: new Date('2026-11-01T00:00:00Z') };
    expect(skipReason('monitor.hit', expired, now)).toBe(SKIP_REASONS.freePlan);
    expect(SKIP_REASONS.freePlan).toMatch(/live webhooks need the Starter plan/);
  });

  it('sends test pings on every plan, and to a broken endpoint', () => {
    const free = { ...starter, plan: 'free' as const, webhook: { ...webhook, isBroken: true, brokenReason: 'x' } };
    expect(skipReason('monitor.test', free, now)).toBeNull();
    expect(skipReason('monitor.hit', { ...starter, webhook: free.webhook }, now)).toMatch(/marked broken \(x\)/);
  });

  it('skips live hits to a disabled endpoint, saying since when; test pings still go out', () => {
    const disabled = {
      ...webhook,
      consecutiveFailures: 40,
      firstFailureAt: new Date('2026-11-16T08:00:00Z'),
      disabledAt: new Date('2026-11-19T09:00:00Z'),
    };
    expect(skipReason('monitor.hit', { ...starter, webhook: disabled }, now)).toBe(
      'endpoint disabled: only failures since 2026-11-16T08:00:00.000Z (40 in a row); the hit is recorded; send a test webhook, a success re-enables it',
    );
    expect(skipReason('monitor.test', { ...starter, webhook: disabled }, now)).toBeNull();
    // failing (5 in a row) but not disabled: still sent
    expect(skipReason('monitor.hit', { ...starter, webhook: { ...disabled, disabledAt: null } }, now)).toBeNull();
    expect(healthState(disabled)).toBe('disabled');
    expect(healthState({ ...disabled, disabledAt: null })).toBe('failing');
    expect(healthState({ ...disabled, disabledAt: null, consecutiveFailures: 4 })).toBe('ok');
    expect(healthNeedsUpdate(webhook, true)).toBe(false);
    expect(healthNeedsUpdate(webhook, false)).toBe(true);
    expect(healthNeedsUpdate({ ...webhook, consecutiveFailures: 1 }, true)).toBe(true);
  });

  it('skips monitors without webhook or inactive ones', () => {
    expect(skipReason('monitor.test', { ...starter, webhook: null }, now)).toBe(SKIP_REASONS.noWebhook);
    expect(skipReason('monitor.hit', { ...starter, isActive: false }, now)).toBe(SKIP_REASONS.inactive);
  });

  it('marks Discord and Slack endpoints broken on 404 and 410 only', () => {
    expect(brokenReasonFor('discord', 404)).toMatch(/Discord answered HTTP 404/);
    expect(brokenReasonFor('slack', 410)).toMatch(/Slack answered HTTP 410/);
    expect(brokenReasonFor('native', 404)).toBeNull();
    expect(brokenReasonFor('discord', 500)).toBeNull();
    expect(brokenReasonFor('slack', null)).toBeNull();
    // revoked or invalid tokens
    expect(brokenReasonFor('discord', 401)).toMatch(/Discord answered HTTP 401: the webhook token was revoked/);
    expect(brokenReasonFor('slack', 403)).toMatch(/Slack answered HTTP 403/);
    expect(brokenReasonFor('native', 401)).toBeNull();
    expect(brokenReasonFor('discord', 429)).toBeNull();
  });

  describe('platform flow control (pacing.ts)', () => {
    it('keys Discord and Slack by webhook, native endpoints by host and port', () => {
      expect(laneKey('discord', 'https://discord.com/api/webhooks/123/tok')).toBe('discord:123');
      expect(laneKey('discord', 'https://discord.com/api/webhooks/456/tok')).toBe('discord:456');
      expect(laneKey('slack', 'https://hooks.slack.com/services/T1/B2/x')).toBe('slack:/services/T1/B2/x');
      expect(laneKey('native', 'https://Example.com/a?b=1')).toBe('example.com:443');
      expect(laneKey('native', 'https://example.com:8443/a')).toBe('example.com:8443');
    });

    it('waits out a Discord/Slack 429 at most 3 times and 60 s in all; a native 429 is final', () => {
      const answer = (status: number, retryAfter?: string) => ({
        statusCode: status,
        headers: retryAfter === undefined ? {} : { 'retry-after': retryAfter },
        responseSnippet: null,
      });
      expect(rateLimitWait('discord', answer(429, '1.5'), 0, 0, 0)).toBe(1500);
      expect(rateLimitWait('slack', answer(429), 0, 0, 0)).toBe(1000); // no wait named: the default
      expect(rateLimitWait('discord', answer(429, '1'), 3, 3000, 0)).toBeNull(); // 3 waits already
      expect(rateLimitWait('discord', answer(429, '30'), 1, 31_000, 0)).toBeNull(); // over 60 s in all
      expect(rateLimitWait('discord', answer(429, '29'), 1, 31_000, 0)).toBe(29_000);
      expect(rateLimitWait('native', answer(429, '1'), 0, 0, 0)).toBeNull();
      expect(rateLimitWait('discord', answer(500, '1'), 0, 0, 0)).toBeNull();
      expect(rateLimitWaitError('discord', 1500, 1)).toBe(
        'Discord answered HTTP 429 (rate limited); sending again in 1.5 s (wait 1 of 3)',
      );
      expect(rateLimitGiveUpError('slack', 3, 3000)).toBe(
        'Slack answered HTTP 429 (rate limited); gave up after 3 wait(s) of 3 s in all',
      );
    });

    it('paces with a token bucket (Discord: 5 at once, then 2.5/s) and honours a block', () => {
      const b = new TokenBucket(PLATFORM_PACE.discord, 0);
      for (let i = 0; i < 5; i++) expect(b.tryTake(0)).toBe(true);
      expect(b.tryTake(0)).toBe(false);
      expect(b.waitMs(0)).toBe(400);
      expect(b.tryTake(400)).toBe(true);
      b.blockUntil(3000, 500);
      expect(b.waitMs(2999)).toBe(1);
      expect(b.tryTake(3000)).toBe(true); // one token at the end of the block, refilling from then
      expect(b.tryTake(3000)).toBe(false);
      expect(b.tryTake(3400)).toBe(true);
      expect(b.isFull(3400)).toBe(false);
      expect(b.isFull(10_000)).toBe(true);
    });

    it('reads the wait of a 429 from Retry-After (seconds, fractions, HTTP date) or retry_after in the body', () => {
      expect(retryAfterMs({ 'retry-after': '2' }, null, 0)).toBe(2000);
      expect(retryAfterMs({ 'retry-after': '0.35' }, null, 0)).toBe(350);
      expect(retryAfterMs({ 'retry-after': new Date(5000).toUTCString() }, null, 1000)).toBe(4000);
      expect(retryAfterMs({}, '{"message":"You are being rate limited.","retry_after":0.632,"global":false}', 0)).toBe(
        632,
      );
      expect(retryAfterMs({}, 'rate limited', 0)).toBeNull();
      expect(retryAfterMs({ 'retry-after': 'soon' }, '{"retry_after":-1}', 0)).toBeNull();
    });
  });

  it('redacts webhook tokens in logged URLs', () => {
    expect(redactWebhookUrl('https://discord.com/api/webhooks/123/abcDEF-_x', 'discord')).toBe(
      'https://discord.com/api/webhooks/123/[REDACTED]',
    );
    expect(redactWebhookUrl('https://hooks.slack.com/services/T000/B000/XXXXSECRET', 'slack')).toBe(
      'https://hooks.slack.com/services/T000/B000/[REDACTED]',
    );
    expect(redactWebhookUrl('https://example.com/hook?token=s3cret#x', 'native')).toBe(
      'https://example.com/hook?[REDACTED]',
    );
    expect(redactWebhookUrl('https://example.com/hook', 'native')).toBe('https://example.com/hook');
  });
});

describe('address policy', () => {
  it.each([
    '127.0.0.1',
    '10.0.0.1',
    '172.31.255.255',
    '192.168.0.1',
    '169.254.169.254',
    '100.64.0.1',
    '100.127.255.255',
    '0.0.0.0',
    '255.255.255.255',
    '224.0.0.251',
    '240.0.0.1',
    '198.18.0.1',
    '192.0.2.1',
    '198.51.100.1',
    '203.0.113.1',
    '::',
    '::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '[::ffff:7f00:1]',
    '::ffff:0a00:0001',
    '::127.0.0.1',
    '64:ff9b::7f00:1',
    '64:ff9b::192.168.1.1',
    '64:ff9b:1::1',
    '2002:7f00:1::1',
    'fc00::1',
    'fd12:3456::1',
    'fe80::1',
    'fe80::1%eth0',
    'ff02::1',
    '2001:db8::1',
    'not-an-ip',
  ])('refuses %s', (address) => {
    expect(blockedReason(address)).not.toBeNull();
  });

  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '100.128.0.1',
    '172.32.0.1',
    '2606:4700:4700::1111',
    '64:ff9b::808:808',
    '::ffff:8.8.8.8',
  ])('allows public %s', (address) => {
    expect(blockedReason(address)).toBeNull();
  });
});
