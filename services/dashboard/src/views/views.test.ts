import { barChart, niceTop } from '../domain/chart';
import { escapeHtml, html } from './html';
import type { DeliveryView, Overview, TargetStatusName } from '@sts/usecases';
import { deliveryRows } from './logs';
import { planStatus, usageChart } from './overview';
import { targetStatusBadge } from './targetStatus';

describe('html', () => {
  it('escapes every interpolated value and keeps nested templates', () => {
    const evil = `<img src=x onerror="alert('1')">&\``;
    const out = html`<p title="${evil}">${evil}${html`<b>${evil}</b>`}${[evil, 1, null, false]}</p>`.value;
    expect(out).not.toContain('<img');
    expect(out).not.toMatch(/"alert/);
    expect(out).toBe(
      `<p title="${escapeHtml(evil)}">${escapeHtml(evil)}<b>${escapeHtml(evil)}</b>${escapeHtml(evil)}1</p>`,
    );
    expect(escapeHtml(`&<>"'\``)).toBe('&amp;&lt;&gt;&quot;&#39;&#96;');
  });
});

describe('usage chart', () => {
  it('scales bars to a round top and describes the month in text', () => {
    expect([0, 1, 7, 10, 11, 240, 999].map(niceTop)).toEqual([1, 1, 10, 10, 20, 250, 1000]);
    const c = barChart(
      [
        { day: '2026-11-01', used: 0 },
        { day: '2026-11-02', used: 50 },
        { day: '2026-11-03', used: 100 },
      ],
      300,
      100,
    );
    expect(c.top).toBe(100);
    expect(c.bars.map((b) => b.height)).toEqual([0, 50, 100]);
    expect(c.total).toBe(150);
    expect(c.busiest).toEqual({ day: '2026-11-03', used: 100 });
    const svg = usageChart([{ day: '2026-11-01', used: 1234 }]).value;
    expect(svg).toContain('1,234 calls this month; busiest day 2026-11-01 with 1,234.');
    expect(svg).toMatch(/<svg[^>]*role="img"/);
    expect(svg).toMatch(/<td>2026-11-01<\/td>\s*<td>1,234<\/td>/);
  });
});

describe("the overview's plan line", () => {
  const day = (s: string) => new Date(`${s}T12:00:00.000Z`);
  const status = (
    plan: 'free' | 'starter',
    trial: Partial<Overview['trial']> & Pick<Overview['trial'], 'state' | 'offered'>,
  ) =>
    planStatus({
      account: { plan, planSince: day('2026-11-01') } as Overview['account'],
      trial: { startedAt: null, endsAt: null, days: 30, ...trial },
    }).value.replace(/\s+/g, ' ');

  it('says what a Starter account has and offers it no trial', () => {
    const s = status('starter', { state: 'available', offered: false });
    expect(s).toBe('On Starter since <strong>2026-11-01</strong>.');
    expect(s).not.toMatch(/trial/i);
  });

  it('offers the trial to a Free account that never had it, with what it has now', () => {
    expect(status('free', { state: 'available', offered: true })).toBe(
      'On Free since 2026-11-01. A 30-day Starter trial is available. <a href="/plan">Start it</a>.',
    );
  });

  it('a running trial: since when and until when; an ended one: when it ended, no offer', () => {
    expect(
      status('free', { state: 'active', offered: false, startedAt: day('2026-11-10'), endsAt: day('2026-12-10') }),
    ).toBe('Starter trial since 2026-11-10, until <strong>2026-12-10</strong>; then Free.');
    const ended = status('free', {
      state: 'ended',
      offered: false,
      startedAt: day('2026-10-01'),
      endsAt: day('2026-10-31'),
    });
    expect(ended).toBe('On Free since 2026-11-01. Your Starter trial ended on 2026-10-31.');
    expect(ended).not.toContain('Start it');
  });
});

describe('target status badge', () => {
  it('names each status with its date, and shows nothing while the account is ok', () => {
    const at = new Date('2026-11-20T08:30:00Z');
    const text = (targetStatus: TargetStatusName, when: Date | null = at) =>
      String(targetStatusBadge({ targetStatus, targetStatusAt: when }))
        .replace(/<[^>]+>|\s+(?=<)/g, '')
        .trim();
    expect(text('ok')).toBe('');
    expect(text('suspended')).toBe('Suspended since 2026-11-20 08:30 UTC');
    expect(text('protected')).toBe('Protected since 2026-11-20 08:30 UTC');
    expect(text('not_found')).toBe('Not found since 2026-11-20 08:30 UTC');
    expect(text('renamed', null)).toBe('Renamed');
  });
});

describe('delivery log rows', () => {
  it('says when a delivery’s next attempt is held until the webhook is enabled, and only then', () => {
    const attempt = (deliveryId: string, more: Partial<DeliveryView>): DeliveryView => ({
      id: `a-${deliveryId}`,
      event: 'monitor.hit',
      deliveryId,
      hitId: null,
      outcome: 'failed',
      attempt: 2,
      nextAttemptAt: null,
      held: false,
      statusCode: 503,
      latencyMs: 12,
      error: null,
      url: 'https://hooks.test/a',
      responseSnippet: null,
      createdAt: new Date('2026-11-20T08:30:00Z'),
      ...more,
    });
    const notes = String(
      deliveryRows(
        { csrf: 't', path: '/monitors/m/deliveries' },
        {
          items: [
            attempt('d-held', { held: true }),
            attempt('d-waiting', { nextAttemptAt: new Date('2026-11-20T09:00:00Z') }),
          ],
          nextCursor: null,
        },
      ),
    )
      .split('<tr data-delivery=')
      .slice(1)
      .map((row) => /data-testid="retry-note">([^<]*)</.exec(row)?.[1]);
    expect(notes).toEqual([
      'attempt 2 · next attempt held until the webhook is enabled',
      'attempt 2 · next attempt 2026-11-20 09:00 UTC',
    ]);
  });
});
