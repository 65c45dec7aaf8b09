/** The watched account's health as the poller last saw it: a badge on the list, a notice on the monitor page. */
import type { MonitorView, TargetStatusName } from '@sts/usecases';
import { formatTime } from '../domain/format';
import { html, type SafeHtml } from './html';

const LABELS: Record<Exclude<TargetStatusName, 'ok'>, { badge: string; why: string }> = {
  suspended: { badge: 'Suspended', why: 'is suspended' },
  protected: { badge: 'Protected', why: 'is protected: its posts are not public' },
  not_found: { badge: 'Not found', why: 'was not found (deleted or deactivated)' },
  renamed: { badge: 'Renamed', why: 'changed its username' },
};

/** "Suspended since 2026-11-26 10:00 UTC"; nothing when the account is ok (or the monitor watches a query) */
export function targetStatusBadge(m: Pick<MonitorView, 'targetStatus' | 'targetStatusAt'>): SafeHtml | string {
  if (m.targetStatus === 'ok') return '';
  const label = LABELS[m.targetStatus];
  return html` <span class="badge failed" data-testid="target-status" data-status="${m.targetStatus}"
    >${label.badge}${m.targetStatusAt ? html` since ${formatTime(m.targetStatusAt)}` : ''}</span
  >`;
}

/** the monitor page's explanation of a badge; nothing when the account is ok */
export function targetStatusNotice(m: MonitorView): SafeHtml | string {
  if (m.targetStatus === 'ok') return '';
  const label = LABELS[m.targetStatus];
  return html`<p class="alert" data-testid="target-status-notice">
    @${m.targetUsername ?? ''} ${label.why}${m.targetStatusAt ? html` (since ${formatTime(m.targetStatusAt)})` : ''}.
    Its posts cannot be read as watched, so it is checked less often (at most hourly) until it is back. Each change of
    status is sent once as a monitor.target_unavailable event.
  </p>`;
}
