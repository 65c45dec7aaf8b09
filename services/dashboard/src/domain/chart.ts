/**
 * Geometry of the per-day usage bar chart (no I/O, no markup): one bar per day of the month so
 * far, scaled to the busiest day, with a "nice" top value for the axis label.
 */
interface Bar {
  day: string;
  used: number;
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface Chart {
  width: number;
  height: number;
  /** value of the top grid line */
  top: number;
  bars: Bar[];
  total: number;
  busiest: { day: string; used: number } | null;
}

export function niceTop(max: number): number {
  if (max <= 0) return 1;
  const pow = 10 ** Math.floor(Math.log10(max));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * pow >= max) return step * pow;
  return 10 * pow;
}

export function barChart(daily: readonly { day: string; used: number }[], width = 620, height = 160): Chart {
  const top = niceTop(Math.max(0, ...daily.map((d) => d.used)));
  const slots = Math.max(daily.length, 1);
  const slot = width / slots;
  const barWidth = Math.max(2, slot * 0.7);
  let busiest: Chart['busiest'] = null;
  const bars = daily.map((d, i) => {
    if (d.used > 0 && (!busiest || d.used > busiest.used)) busiest = { day: d.day, used: d.used };
    const h = d.used > 0 ? Math.max(1, (d.used / top) * height) : 0;
    return { day: d.day, used: d.used, x: i * slot + (slot - barWidth) / 2, y: height - h, width: barWidth, height: h };
  });
  return { width, height, top, bars, total: daily.reduce((s, d) => s + d.used, 0), busiest };
}
