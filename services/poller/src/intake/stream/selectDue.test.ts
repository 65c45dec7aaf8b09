import { createLogger } from '@sts/common';
import type { TargetState } from '../../domain/schedule';
import { streamSelectDue } from './port';

const logger = createLogger({ service: 'select-due-test', level: 'error' });
const now = new Date('2026-05-01T12:00:00.000Z');
const target = (key: string, plan: 'free' | 'starter'): TargetState => ({
  targetKey: key,
  username: key,
  accounts: [{ plan, trialEndsAt: null }],
  lastPolledAt: null,
});

describe('stream mode selectDue', () => {
  const due = [target('free1', 'free'), target('starter1', 'starter'), target('starter2', 'starter')];

  it('while a stream is alive: only Free-only targets, the streamed ones rescheduled one interval on', async () => {
    const written: { targetKey: string; nextDueAt: Date }[] = [];
    const select = streamSelectDue(
      { reschedule: (rows) => (written.push(...rows), Promise.resolve()) },
      60,
      logger,
      () => true,
    );
    expect(select(due, now).map((t) => t.targetKey)).toEqual(['free1']);
    await Promise.resolve();
    expect(written.map((w) => w.targetKey)).toEqual(['starter1', 'starter2']);
    expect(written[0]!.nextDueAt.getTime()).toBe(now.getTime() + 60_000);
  });

  it('with no stream alive: every due target, nothing rescheduled', () => {
    let calls = 0;
    const select = streamSelectDue({ reschedule: () => (calls++, Promise.resolve()) }, 60, logger, () => false);
    expect(select(due, now)).toEqual(due);
    expect(calls).toBe(0);
  });
});
