import { renderMail } from './templates';

describe('webhook health mails', () => {
  const base = 'https://dash.example';
  const spec = { kind: 'webhook' as const, consecutiveFailures: 5, monitorId: 'm-1', target: '@NASA' };

  it('say failing, broken or disabled, what it means and where to look', () => {
    const failing = renderMail({ ...spec, state: 'failing' }, base);
    expect(failing.subject).toBe('Your webhook for @NASA is failing');
    expect(failing.text).toContain('has failed 5 times in a row');
    const disabled = renderMail({ ...spec, state: 'disabled', consecutiveFailures: 40 }, base);
    expect(disabled.subject).toBe('Your webhook for @NASA is disabled');
    expect(disabled.text).toContain('after 3 days of only failures');
    expect(disabled.text).toContain('new events are held');
    expect(disabled.text).toContain('sent in order once it is enabled again');
    expect(disabled.text).toContain(`${base}/monitors/m-1/deliveries`);
    expect(renderMail({ ...spec, state: 'broken' }, base).subject).toBe('Your webhook for @NASA is broken');
    const dropped = renderMail({ ...spec, state: 'held_dropped' }, base);
    expect(dropped.subject).toBe('Your webhook for @NASA dropped held events');
    expect(dropped.text).toContain('the oldest held ones were dropped and are logged as skipped');
    const waiting = renderMail({ ...spec, state: 'due_dropped' }, base);
    expect(waiting.subject).toBe('Your webhook for @NASA dropped waiting deliveries');
    expect(waiting.text).toContain('the oldest waiting ones were dropped and are logged as skipped');
  });

  it('say recovered: works again, held events go first, no "fix the endpoint"', () => {
    const recovered = renderMail({ ...spec, state: 'recovered', consecutiveFailures: 0 }, base);
    expect(recovered.subject).toBe('Your webhook for @NASA works again');
    expect(recovered.text).toContain('held while it was disabled are sent first');
    expect(recovered.text).toContain(`${base}/monitors/m-1/deliveries`);
    expect(recovered.text).not.toContain('fix the endpoint');
  });
});
