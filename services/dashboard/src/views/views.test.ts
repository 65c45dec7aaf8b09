import { barChart, niceTop } from '../domain/chart';
import { escapeHtml, html } from './html';
import { usageChart } from './overview';

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
