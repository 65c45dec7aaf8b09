/** Where a coverage gap sits on the monitor page's timeline (no I/O). */
import type { CoverageGap } from '@sts/usecases';

export const TIMELINE_DAYS = 30;
const DAY_MS = 86_400_000;

interface GapSpan {
  /** start and width as per mille of the window (0–1000), at least 2 wide so a short gap stays visible */
  x: number;
  width: number;
  filled: boolean;
}

/** A gap's place in the window [now − TIMELINE_DAYS, now]; an open gap runs to now; null when outside it. */
export function gapSpan(gap: CoverageGap, now: Date): GapSpan | null {
  const end = now.getTime();
  const start = end - TIMELINE_DAYS * DAY_MS;
  const from = Math.max(gap.from.getTime(), start);
  const to = Math.min(gap.to?.getTime() ?? end, end);
  if (to < start || from > end) return null;
  const x = Math.round(((from - start) / (end - start)) * 1000);
  const width = Math.max(2, Math.round(((to - from) / (end - start)) * 1000));
  return { x: Math.min(x, 998), width: Math.min(width, 1000 - Math.min(x, 998)), filled: gap.filledAt !== null };
}

/** "850 ms", "2.4 s", "—" when there were no samples */
export function formatLatency(ms: number | null): string {
  if (ms === null) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${(ms / 60_000).toFixed(1)} min`;
}
