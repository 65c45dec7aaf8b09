import type { HitPayload } from './payloads';
import { MAX_BODY_BYTES } from '@sts/messaging';
import { planDelivery, type PlanInput } from './plan';

const now = new Date('2026-12-02T10:00:00.000Z');
const payload: HitPayload = {
  event: 'monitor.hit',
  monitor: { id: 'm1', targetUsername: 'NASA', query: null, keywords: null },
  tweet: { id: '1', text: 'launch', authorUsername: 'NASA', createdAt: '2026-12-02T09:59:59.000Z' },
  detectedAt: '2026-12-02T10:00:00.000Z',
  sequence: 7,
};
const webhook = {
  url: 'https://hooks.example/in?token=secret',
  kind: 'native' as const,
  isBroken: false,
  brokenReason: null,
  consecutiveFailures: 0,
  firstFailureAt: null,
  disabledAt: null as Date | null,
  heldCount: 0,
  ordering: 'unordered' as 'unordered' | 'fifo',
};
type Hook = typeof webhook;

function input(over: Partial<PlanInput<Hook>> = {}, hook: Partial<Hook> | null = {}): PlanInput<Hook> {
  return {
    event: 'monitor.hit',
    monitor: { isActive: true, plan: 'starter', trialEndsAt: null, webhook: hook && { ...webhook, ...hook } },
    payload,
    origin: 'message',
    redelivery: false,
    holding: true,
    now,
    ...over,
  };
}

describe('planDelivery', () => {
  it('a live hit goes out, scheduled, with its body, sequence, lane and the URL the log stores', () => {
    const plan = planDelivery(input());
    expect(plan).toMatchObject({
      kind: 'send',
      scheduled: true,
      sequence: 7,
      url: 'https://hooks.example/in?[REDACTED]',
    });
    if (plan.kind !== 'send') throw new Error(plan.kind);
    expect(JSON.parse(plan.body)).toMatchObject({ event: 'monitor.hit', sequence: 7 });
    expect(plan.bytes.equals(Buffer.from(plan.body))).toBe(true);
    expect(plan.pacing.laneKey).toContain('hooks.example');
  });

  it('a fifo webhook queues a live message, not a redelivery nor its own due turn', () => {
    expect(planDelivery(input({}, { ordering: 'fifo' })).kind).toBe('queued');
    expect(planDelivery(input({ redelivery: true }, { ordering: 'fifo' }))).toMatchObject({
      kind: 'send',
      scheduled: false,
    });
    expect(planDelivery(input({ origin: 'due' }, { ordering: 'fifo' }))).toMatchObject({
      kind: 'send',
      scheduled: true,
    });
  });

  it('a disabled endpoint: held where holding is on and not for a held event; skipped otherwise', () => {
    const disabled = { disabledAt: new Date('2026-12-01T00:00:00.000Z'), consecutiveFailures: 9 };
    expect(planDelivery(input({}, disabled)).kind).toBe('held');
    expect(planDelivery(input({ holding: false }, disabled))).toMatchObject({ kind: 'unsent', outcome: 'skipped' });
    expect(planDelivery(input({ origin: 'held' }, disabled))).toMatchObject({ kind: 'unsent', outcome: 'skipped' });
  });

  it('no webhook, or a body over the limit: logged without a request', () => {
    expect(planDelivery(input({}, null))).toMatchObject({
      kind: 'unsent',
      outcome: 'skipped',
      error: 'monitor has no webhook',
      webhookKind: 'none',
    });
    const big = { ...payload, tweet: { ...payload.tweet, text: 'x'.repeat(MAX_BODY_BYTES) } };
    expect(planDelivery(input({ payload: big }))).toMatchObject({ kind: 'unsent', outcome: 'failed' });
  });
});
