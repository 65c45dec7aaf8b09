import { createHash, randomBytes } from 'node:crypto';
import {
  chunks,
  classifyWebhookUrl,
  compareIds,
  compileKeywords,
  createSecretBox,
  crc32,
  displayPrefix,
  effectivePlan,
  generateApiKey,
  generateWebhookSecret,
  hashApiKey,
  isValidTweetId,
  isValidUsername,
  isWellFormedApiKey,
  KeywordError,
  parseKeywords,
  periodResetEpoch,
  SecretBoxError,
  snowflakeBefore,
  snowflakeId,
  snowflakeTime,
  usagePeriod,
  WebhookUrlError,
} from './index';

describe('API keys', () => {
  it('generates well-formed keys with a display prefix and a sha256 hash', () => {
    const k = generateApiKey();
    expect(k.key).toMatch(/^sts_live_[0-9A-Za-z]{36}$/);
    expect(isWellFormedApiKey(k.key)).toBe(true);
    expect(k.prefix).toBe(k.key.slice(0, 17));
    expect(displayPrefix(k.key)).toBe(k.prefix);
    expect(k.hash).toBe(createHash('sha256').update(k.key).digest('hex'));
    expect(hashApiKey(k.key)).toBe(k.hash);
    expect(generateApiKey().key).not.toBe(k.key);
  });

  it('refuses a key whose checksum or shape is wrong', () => {
    const { key } = generateApiKey();
    const body = key.slice(9, 39);
    const flipped = body[0] === 'a' ? 'b' + body.slice(1) : 'a' + body.slice(1);
    expect(isWellFormedApiKey(`sts_live_${flipped}${key.slice(39)}`)).toBe(false);
    expect(isWellFormedApiKey(key.slice(0, -1))).toBe(false);
    expect(isWellFormedApiKey(key + 'x')).toBe(false);
    expect(isWellFormedApiKey(key.replace('sts_live_', 'sts_test_'))).toBe(false);
    expect(isWellFormedApiKey('')).toBe(false);
    expect(isWellFormedApiKey(key.slice(0, 20) + '-' + key.slice(21))).toBe(false);
  });

  it('crc32 matches the standard check value', () => {
    expect(crc32('123456789')).toBe(0xcbf43926);
  });
});

describe('secret box', () => {
  const box = createSecretBox(randomBytes(32).toString('base64'));

  it('round-trips and never stores the plaintext', () => {
    const secret = generateWebhookSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    const stored = box.encrypt(secret, 'monitor-1');
    expect(stored.startsWith('v2.')).toBe(true);
    expect(stored).not.toContain(secret.slice(6));
    expect(box.decrypt(stored, 'monitor-1')).toBe(secret);
    expect(box.encrypt(secret, 'monitor-1')).not.toBe(stored);
  });

  it('refuses another monitor, another key, and tampering', () => {
    const stored = box.encrypt('whsec_x', 'monitor-1');
    expect(() => box.decrypt(stored, 'monitor-2')).toThrow(SecretBoxError);
    expect(() => createSecretBox(randomBytes(32)).decrypt(stored, 'monitor-1')).toThrow(SecretBoxError);
    const parts = stored.split('.');
    parts[3] = Buffer.from('tampered').toString('base64url');
    expect(() => box.decrypt(parts.join('.'), 'monitor-1')).toThrow(SecretBoxError);
    expect(() => box.decrypt('garbage', 'monitor-1')).toThrow(SecretBoxError);
  });

  it('accepts hex keys and rejects short ones', () => {
    expect(() => createSecretBox('00'.repeat(32))).not.toThrow();
    expect(() => createSecretBox(randomBytes(16).toString('base64'))).toThrow(/32 bytes/);
  });
});

describe('keywords', () => {
  it('matches whole words only, case-insensitively', () => {
    const m = compileKeywords(['cat']);
    expect(m('I love my CAT!')).toBe(true);
    expect(m('concatenate strings')).toBe(false);
    expect(m('cats are great')).toBe(false);
    expect(m('#cat pictures')).toBe(true);
  });

  it('matches phrases across extra white space and punctuation, in order', () => {
    const m = compileKeywords(['new release']);
    expect(m('Our NEW    release is out')).toBe(true);
    expect(m('new\n\trelease')).toBe(true);
    expect(m('new, release')).toBe(true);
    expect(m('release new')).toBe(false);
    expect(m('newest release')).toBe(false);
  });

  it('folds Unicode compatibility forms (NFKC) but keeps accents', () => {
    expect(compileKeywords(['ﬁle'])('the file is here')).toBe(true);
    expect(compileKeywords(['café'])('Meet at the CAFÉ')).toBe(true);
    expect(compileKeywords(['cafe'])('Meet at the Café')).toBe(false);
  });

  it('matches any keyword; no keywords matches everything', () => {
    const m = compileKeywords(['alpha', 'beta gamma']);
    expect(m('beta gamma ray')).toBe(true);
    expect(m('ALPHA')).toBe(true);
    expect(m('beta ray gamma')).toBe(false);
    expect(compileKeywords([])('anything')).toBe(true);
  });

  it('parses comma lists, trims, collapses space and drops duplicates', () => {
    expect(parseKeywords('a,b c')).toEqual(['a', 'b c']);
    expect(parseKeywords(' launch ,  new   release , Launch,')).toEqual(['launch', 'new release']);
    expect(parseKeywords(null)).toEqual([]);
    expect(parseKeywords('')).toEqual([]);
    expect(() => parseKeywords('!!!')).toThrow(KeywordError);
    expect(() => parseKeywords(['x'.repeat(101)])).toThrow(/longer than 100/);
    expect(() => parseKeywords(Array.from({ length: 21 }, (_, i) => `k${i}`))).toThrow(/at most 20/);
  });
});

describe('webhook URLs', () => {
  it('classifies Discord, Slack and native URLs', () => {
    expect(classifyWebhookUrl('https://discord.com/api/webhooks/123/abc-DEF_1').kind).toBe('discord');
    expect(classifyWebhookUrl('https://discordapp.com/api/webhooks/123/abc').kind).toBe('discord');
    expect(classifyWebhookUrl('https://hooks.slack.com/services/T0/B0/XyZ').kind).toBe('slack');
    expect(classifyWebhookUrl('https://example.com/hooks/in').kind).toBe('native');
    expect(classifyWebhookUrl('https://discord.com/other').kind).toBe('native');
  });

  it('refuses non-HTTPS, credentials, garbage and over-long URLs with a reason', () => {
    expect(() => classifyWebhookUrl('http://example.com/x')).toThrow(/must use https/);
    expect(() => classifyWebhookUrl('https://u:p@example.com/x')).toThrow(/credentials/);
    expect(() => classifyWebhookUrl('not a url')).toThrow(WebhookUrlError);
    expect(() => classifyWebhookUrl('')).toThrow(/empty/);
    expect(() => classifyWebhookUrl(`https://example.com/${'a'.repeat(2050)}`)).toThrow(/longer than/);
  });
});

describe('ids and plans', () => {
  it('snowflake ids are numeric, increase with time and encode it', () => {
    const t1 = new Date('2026-01-01T00:00:00.000Z');
    const t2 = new Date('2026-01-01T00:00:01.000Z');
    const a = snowflakeId(t1);
    const b = snowflakeId(t2);
    expect(isValidTweetId(a)).toBe(true);
    expect(compareIds(a, b)).toBeLessThan(0);
    expect(snowflakeTime(a).toISOString()).toBe(t1.toISOString());
    const before = snowflakeBefore(t2);
    expect(compareIds(before, b)).toBeLessThan(0);
    expect(compareIds(a, before)).toBeLessThan(0);
    expect(snowflakeTime(before).getTime()).toBe(t2.getTime() - 1);
    const same = [snowflakeId(t2), snowflakeId(t2), snowflakeId(t2)];
    expect(new Set(same).size).toBe(3);
  });

  it('validates usernames and tweet ids', () => {
    expect(isValidUsername('jack_1')).toBe(true);
    expect(isValidUsername('a'.repeat(16))).toBe(false);
    expect(isValidUsername('jäck')).toBe(false);
    expect(isValidTweetId('0')).toBe(false);
    expect(isValidTweetId('99999999999999999999')).toBe(false);
    expect(isValidTweetId('9223372036854775808')).toBe(false);
    expect(compareIds('9', '10')).toBeLessThan(0);
  });

  it('a trial counts as Starter until it ends; periods are UTC months', () => {
    const now = new Date('2026-11-30T23:59:59Z');
    expect(effectivePlan({ plan: 'free', trialEndsAt: new Date('2026-12-01T00:00:00Z') }, now)).toBe('starter');
    expect(effectivePlan({ plan: 'free', trialEndsAt: new Date('2026-11-01T00:00:00Z') }, now)).toBe('free');
    expect(effectivePlan({ plan: 'starter', trialEndsAt: null }, now)).toBe('starter');
    expect(usagePeriod(now)).toBe('2026-11');
    expect(periodResetEpoch(now)).toBe(Date.UTC(2026, 11, 1) / 1000);
  });
});

describe('chunks', () => {
  it('cuts a list into runs of the size, in order, the last one shorter', () => {
    expect(chunks([1, 2, 3, 4, 5], 2)).toEqual([[1, 2], [3, 4], [5]]);
    expect(chunks([1, 2, 3, 4], 2)).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(chunks([], 100)).toEqual([]);
  });
});
