import {
  ContractError,
  contracts,
  fromAmqpHeaders,
  isRoutingKey,
  parseHeaders,
  parsePayload,
  ROUTING_KEYS,
  toAmqpHeaders,
  type MonitorHitEvent,
} from './contracts';
import { accountEventKey } from './contracts';
import { hitPayload, testPayload } from '../test/payloads';

describe('contracts', () => {
  it('has exactly the monitor, webhook, account and API key routing keys', () => {
    expect([...ROUTING_KEYS].sort()).toEqual([
      'account.quota.threshold',
      'account.target.status',
      'account.trial.ended',
      'account.trial.ending',
      'account.webhook.failing',
      'apikey.changed',
      'monitor.hit',
      'monitor.post_deleted',
      'monitor.profile_changed',
      'monitor.target_unavailable',
      'monitor.test',
      'webhook.redeliver',
      'x.stream.post',
    ]);
    expect(isRoutingKey('monitor.hit')).toBe(true);
    expect(isRoutingKey('monitor.other')).toBe(false);
    expect(isRoutingKey('toString')).toBe(false);
  });

  it('accepts the webhook payloads of docs/webhooks.md with their exact field names', () => {
    const hit = hitPayload();
    expect(parsePayload('monitor.hit', hit)).toEqual(hit);
    expect(parsePayload('monitor.test', testPayload())).toEqual(testPayload());
    const id = '0b5a1e0c-3c4f-4d55-8e4a-3f5b1b7c2d10';
    expect(parsePayload('webhook.redeliver', { attemptId: id })).toEqual({ attemptId: id });
  });

  it("a query monitor's hit carries its query and a null targetUsername; exactly one of the two is set", () => {
    const hit = hitPayload({
      monitor: { id: 'mon_q', targetUsername: null, query: 'launch OR release', keywords: null },
    });
    expect(parsePayload('monitor.hit', hit)).toEqual(hit);
    for (const monitor of [
      { id: 'mon_q', targetUsername: 'alice', query: 'launch', keywords: null },
      { id: 'mon_q', targetUsername: null, query: null, keywords: null },
    ]) {
      expect(() => parsePayload('monitor.hit', hitPayload({ monitor }))).toThrow(ContractError);
    }
    // a payload without the query field (the old shape) is refused: the field is always present
    const { query: _query, ...old } = hitPayload().monitor;
    expect(() => parsePayload('monitor.hit', { ...hitPayload(), monitor: old })).toThrow(ContractError);
  });

  const bad: [string, (h: MonitorHitEvent) => unknown, string][] = [
    ['an unknown top-level field', (h) => ({ ...h, accountId: 'acc' }), 'accountId'],
    ['an unknown monitor field', (h) => ({ ...h, monitor: { ...h.monitor, target_username: 'x' } }), 'monitor'],
    ['snake_case tweet fields', (h) => ({ ...h, tweet: { ...h.tweet, author_username: 'x' } }), 'tweet'],
    [
      'createdAt without milliseconds',
      (h) => ({ ...h, tweet: { ...h.tweet, createdAt: '2024-05-01T12:00:00Z' } }),
      'tweet.createdAt',
    ],
    ['detectedAt with an offset', (h) => ({ ...h, detectedAt: '2024-05-01T12:00:00.000+02:00' }), 'detectedAt'],
    ['keywords as a string', (h) => ({ ...h, monitor: { ...h.monitor, keywords: 'launch' } }), 'monitor.keywords'],
    ['an empty monitor id', (h) => ({ ...h, monitor: { ...h.monitor, id: '' } }), 'monitor.id'],
    ['the wrong event', (h) => ({ ...h, event: 'monitor.test' }), 'event'],
    ['a missing tweet', ({ tweet: _t, ...rest }) => rest, 'tweet'],
  ];
  it.each(bad)('rejects a monitor.hit payload with %s, naming the field', (_name, mutate, path) => {
    let caught: unknown;
    try {
      parsePayload('monitor.hit', mutate(hitPayload()));
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ContractError);
    expect((caught as ContractError).issues.join('\n')).toContain(path);
  });

  it('rejects monitor.test without test: true and redeliver without a uuid', () => {
    expect(() => parsePayload('monitor.test', { ...testPayload(), test: false })).toThrow(ContractError);
    expect(() => parsePayload('webhook.redeliver', { attemptId: 'not-a-uuid' })).toThrow(ContractError);
  });

  it('validates headers per routing key', () => {
    expect(parseHeaders('monitor.hit', { accountId: 'a', hitId: 'h' })).toEqual({ accountId: 'a', hitId: 'h' });
    expect(() => parseHeaders('monitor.hit', { accountId: 'a' })).toThrow(/hitId/);
    expect(parseHeaders('monitor.test', { accountId: 'a', hitId: 'ignored' })).toEqual({ accountId: 'a' });
    expect(() => parseHeaders('webhook.redeliver', {})).toThrow(/accountId/);
    expect(Object.keys(contracts['monitor.hit'].headers.shape)).toEqual(['accountId', 'hitId']);
  });

  it('maps envelope headers to x-account-id / x-hit-id and back', () => {
    expect(toAmqpHeaders({ accountId: 'a', hitId: 'h' })).toEqual({ 'x-account-id': 'a', 'x-hit-id': 'h' });
    expect(() => toAmqpHeaders({ other: 'x' })).toThrow(ContractError);
    expect(fromAmqpHeaders({ 'x-account-id': Buffer.from('a'), 'x-hit-id': 'h', 'x-death': [] })).toEqual({
      accountId: 'a',
      hitId: 'h',
    });
    expect(fromAmqpHeaders(undefined)).toEqual({});
  });

  it('accepts the account events and rejects a bad state, threshold or month', () => {
    const failing = {
      accountId: 'acc',
      monitorId: 'mon',
      state: 'failing' as const,
      consecutiveFailures: 5,
      occurredAt: '2026-11-24T10:00:00.000Z',
    };
    expect(parsePayload('account.webhook.failing', failing)).toEqual(failing);
    expect(() => parsePayload('account.webhook.failing', { ...failing, state: 'sad' })).toThrow(ContractError);
    const quota = {
      accountId: 'acc',
      occurredAt: failing.occurredAt,
      month: '2026-11',
      threshold: 80,
      used: 800,
      quota: 1000,
    };
    expect(parsePayload('account.quota.threshold', quota)).toEqual(quota);
    expect(() => parsePayload('account.quota.threshold', { ...quota, threshold: 90 })).toThrow(ContractError);
    expect(() => parsePayload('account.quota.threshold', { ...quota, month: '2026-13' })).toThrow(ContractError);
    expect(() =>
      parsePayload('account.trial.ended', {
        accountId: 'a',
        occurredAt: failing.occurredAt,
        trialEndedAt: 'x',
        pausedMonitorIds: [],
      }),
    ).toThrow(ContractError);
  });

  it('gives one de-duplication key per notification (month and threshold; monitor, state and day)', () => {
    const quota = {
      accountId: 'a',
      occurredAt: '2026-11-24T10:00:00.000Z',
      month: '2026-11',
      threshold: 80 as const,
      used: 8,
      quota: 10,
    };
    expect(accountEventKey('account.quota.threshold', quota)).toBe('quota:a:2026-11:80');
    expect(
      accountEventKey('account.quota.threshold', { ...quota, used: 9, occurredAt: '2026-11-25T10:00:00.000Z' }),
    ).toBe('quota:a:2026-11:80');
    expect(accountEventKey('account.quota.threshold', { ...quota, threshold: 100 })).toBe('quota:a:2026-11:100');
    const w = {
      accountId: 'a',
      monitorId: 'm',
      state: 'failing' as const,
      consecutiveFailures: 5,
      occurredAt: quota.occurredAt,
    };
    expect(accountEventKey('account.webhook.failing', w)).toBe(
      accountEventKey('account.webhook.failing', {
        ...w,
        consecutiveFailures: 7,
        occurredAt: '2026-11-24T23:59:00.000Z',
      }),
    );
    expect(accountEventKey('account.webhook.failing', w)).not.toBe(
      accountEventKey('account.webhook.failing', { ...w, occurredAt: '2026-11-25T00:00:00.000Z' }),
    );
  });
});
