/** Display formats (no I/O). Times are UTC, written the same on every page. */
export function formatTime(d: Date | null | undefined): string {
  if (!d) return '—';
  return `${d.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

export function formatDay(d: Date | null | undefined): string {
  return d ? d.toISOString().slice(0, 10) : '—';
}

export function formatNumber(n: number): string {
  return n.toLocaleString('en-US');
}

export function formatInterval(sec: number): string {
  if (sec % 3600 === 0) return `${sec / 3600} h`;
  if (sec % 60 === 0) return `${sec / 60} min`;
  return `${sec} s`;
}

export function percent(used: number, quota: number): number {
  if (quota <= 0) return 0;
  return Math.min(100, Math.round((used / quota) * 1000) / 10);
}
