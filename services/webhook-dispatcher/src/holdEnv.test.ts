/**
 * The hold's bounds are validated at start: a WEBHOOK_HOLD_DAYS or WEBHOOK_HOLD_MAX that is not a
 * whole number in its range stops the dispatcher with exit 2 naming the variable, before it
 * connects to anything (the process as it runs in production; the URLs point nowhere).
 */
import { randomBytes } from 'node:crypto';
import { spawnService } from '@sts/testing';

const env = {
  DATABASE_URL: 'postgresql://nobody@127.0.0.1:1/none',
  AMQP_URL: 'amqp://nobody:none@127.0.0.1:1',
  SECRETS_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
  LOG_LEVEL: 'error',
};

describe('the hold bounds at start', () => {
  it.each([
    ['WEBHOOK_HOLD_DAYS', '0'],
    ['WEBHOOK_HOLD_DAYS', '-1'],
    ['WEBHOOK_HOLD_DAYS', '31'],
    ['WEBHOOK_HOLD_DAYS', '2.5'],
    ['WEBHOOK_HOLD_DAYS', 'three'],
    ['WEBHOOK_HOLD_MAX', '0'],
    ['WEBHOOK_HOLD_MAX', '1000001'],
    ['WEBHOOK_HOLD_MAX', 'lots'],
  ])(
    '%s=%j stops the start with exit 2 naming it',
    async (name, value) => {
      const p = spawnService('services/webhook-dispatcher/src/main.ts', { ...env, [name]: value });
      try {
        expect(await p.exited).toBe(2);
      } finally {
        if (p.child.exitCode === null) p.child.kill('SIGKILL');
      }
      const out = p.lines.join('\n');
      expect(out).toMatch(new RegExp(`${name}: `));
      expect(out).not.toMatch(/\n\s+at /); // no stack trace
    },
    60_000,
  );
});
