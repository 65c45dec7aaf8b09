import { isNotice, laneOf, MAX_DIGEST_ITEMS, renderDigest, type NoticeSpec } from './digest';
import { renderMail } from './templates';

describe('notice digests', () => {
  const base = 'https://dash.example';
  const target = (i: number): NoticeSpec => ({
    kind: 'target',
    status: 'suspended',
    username: `acct${i}`,
    newUsername: null,
    monitors: 1,
  });

  it('a digest of one notice is that notice’s own mail', () => {
    expect(renderDigest([target(1)], 1, base)).toEqual(renderMail(target(1), base));
  });

  it('lists the first 50, oldest first, each with its link, then counts the rest', () => {
    const items = Array.from({ length: 120 }, (_, i) => target(i));
    const d = renderDigest(items, 120, base);
    expect(d.subject).toBe('120 notices about your Social Timeline account');
    const lines = d.text.split('\n').filter((l) => l.startsWith('- '));
    expect(lines).toHaveLength(MAX_DIGEST_ITEMS);
    expect(lines[0]).toBe('- @acct0 is suspended: https://dash.example/monitors');
    expect(lines[49]).toBe('- @acct49 is suspended: https://dash.example/monitors');
    expect(d.text).toContain('and 70 more.');
    expect(d.html.match(/<li>/g)).toHaveLength(MAX_DIGEST_ITEMS);
    expect(d.html).toContain('and 70 more.');
  });

  it('mixes kinds, each linking where its own mail does, and escapes what it shows', () => {
    const webhook: NoticeSpec = {
      kind: 'webhook',
      state: 'failing',
      consecutiveFailures: 5,
      monitorId: 'm-1',
      target: 'the query <b>launch</b>',
    };
    const quota: NoticeSpec = { kind: 'quota', threshold: 80, used: 8, quota: 10, month: '2026-12' };
    const d = renderDigest([webhook, quota], 2, base);
    expect(d.text).toContain(
      '- Your webhook for the query <b>launch</b> is failing: https://dash.example/monitors/m-1/deliveries',
    );
    expect(d.text).toContain('- You have used 80 % of your monthly API quota (2026-12): https://dash.example/');
    expect(d.text).not.toContain('more.');
    expect(d.html).toContain('&lt;b&gt;launch&lt;/b&gt;');
    expect(d.html).not.toContain('<b>launch');
  });

  it('notices go to the notice lane; verification, reset and trial mail to the account lane', () => {
    expect(laneOf(target(1))).toBe('notice');
    expect(isNotice({ kind: 'quota', threshold: 100, used: 10, quota: 10, month: '2026-12' })).toBe(true);
    expect(laneOf({ kind: 'verify', token: 't', expiresAt: new Date() })).toBe('account');
    expect(laneOf({ kind: 'reset', token: 't', expiresAt: new Date() })).toBe('account');
    expect(laneOf({ kind: 'already_registered' })).toBe('account');
    expect(laneOf({ kind: 'trial_ending', endsAt: '2026-12-04T00:00:00.000Z' })).toBe('account');
  });
});
