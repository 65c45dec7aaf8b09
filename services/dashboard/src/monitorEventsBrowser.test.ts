/**
 * What a monitor sends and its target's health, in real Chromium (Debian's, via playwright-core)
 * against the real dashboard on PostgreSQL, Redis and RabbitMQ: the form's "Profile changes"
 * checkbox next to new posts (refused on a query monitor, saved on a username monitor, untick to
 * go back to posts only), and the target's status badge on the list and the monitor page (written
 * straight to the database, as the poller would). Every state is checked with axe-core.
 */
import { readFileSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { createDbClient, type Db } from '@sts/db';
import { waitFor } from '@sts/testing';
import {
  createBackends,
  dashboardEnv,
  launchChromium,
  start,
  submit,
  type RunningDashboard,
  type TestBackends,
} from '../test/dashboard';

const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const EMAIL = 'profile-events@example.com';
const PASSWORD = 'a good long password';

jest.setTimeout(120_000);

let backends: TestBackends;
let db: Db;
let dash: RunningDashboard;
let browser: Browser;
let page: Page;
let monitorId = '';

beforeAll(async () => {
  backends = await createBackends();
  db = createDbClient({ url: backends.db.url, poolSize: 2 });
  dash = await start({ ...dashboardEnv(backends), LOG_LEVEL: 'error' });
  browser = await launchChromium();
  page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
  page.on('dialog', (d) => void d.accept());
}, 180_000);

afterAll(async () => {
  await browser?.close().catch(() => undefined);
  await dash?.stop().catch(() => undefined);
  await db?.$disconnect();
  await backends?.drop();
});

const go = async (pathname: string) => (await page.goto(dash.base + pathname))?.status() ?? 0;

async function axeCheck(name: string): Promise<void> {
  await page.evaluate(AXE);
  // (a string: this file is compiled without the DOM types; it runs in the page)
  const result = await page.evaluate<{ id: string; impact: string; help: string }[]>(
    'axe.run(document).then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help })))',
  );
  const bad = result.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect({ page: name, violations: bad }).toEqual({ page: name, violations: [] });
}

const profileBox = () => page.getByRole('checkbox', { name: 'Profile changes' });
const postsBox = () => page.getByRole('checkbox', { name: 'New posts' });

describe('monitor events and target status in a browser', () => {
  it('signs up and in (the address marked verified as its link would)', async () => {
    await go('/signup');
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    expect(await submit(page, 'Sign up')).toBe(200);
    const verified = async () =>
      (await db.account.updateMany({ where: { email: EMAIL }, data: { emailVerifiedAt: new Date() } })).count;
    await waitFor(async () => ((await verified()) > 0 ? true : null), 10_000);
    await go('/signin');
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    expect(await submit(page, 'Sign in')).toBe(200);
  });

  it('the form offers "Profile changes" next to new posts; a query monitor is refused it, a username monitor saves it', async () => {
    expect(await go('/monitors/new')).toBe(200);
    await expect(postsBox().isChecked()).resolves.toBe(true);
    await expect(profileBox().isChecked()).resolves.toBe(false);
    await axeCheck('monitor-form-events');

    await page.getByLabel('Or a search query to watch').fill('launch');
    await profileBox().check();
    expect(await submit(page, 'Create monitor')).toBe(422);
    await expect(page.locator('#f-events-error').textContent()).resolves.toBe(
      'A query monitor watches no account, so it has no profile: use posts',
    );
    await expect(profileBox().isChecked()).resolves.toBe(true); // the form keeps what was ticked
    expect(await db.monitor.count()).toBe(0);
    await axeCheck('monitor-form-events-error');

    await page.getByLabel('Or a search query to watch').fill('');
    await page.getByLabel('Account to watch').fill('@watched');
    expect(await submit(page, 'Create monitor')).toBe(200);
    monitorId = page.url().split('/').pop() ?? '';
    expect((await db.monitor.findUniqueOrThrow({ where: { id: monitorId } })).events).toEqual(['posts', 'profile']);
    await expect(page.getByTestId('events-sent').textContent()).resolves.toBe('new posts and profile changes');
  });

  it('shows the target status as a badge with its date on the list and the monitor page', async () => {
    await go('/monitors');
    await expect(page.getByTestId('target-status').count()).resolves.toBe(0);
    await db.monitor.update({
      where: { id: monitorId },
      data: { targetStatus: 'suspended', targetStatusAt: new Date('2026-11-20T08:30:00Z') },
    });
    await go('/monitors');
    await expect(page.getByTestId('target-status').textContent()).resolves.toBe('Suspended since 2026-11-20 08:30 UTC');
    await axeCheck('monitors-target-status');
    await go(`/monitors/${monitorId}`);
    await expect(page.getByTestId('target-status').textContent()).resolves.toBe('Suspended since 2026-11-20 08:30 UTC');
    await expect(page.getByTestId('target-status-notice').textContent()).resolves.toMatch(/@watched is suspended/);
    await axeCheck('monitor-target-status');
  });

  it('an edit shows the ticks as saved; unticking profile changes goes back to posts only', async () => {
    expect(await go(`/monitors/${monitorId}/edit`)).toBe(200);
    await expect(profileBox().isChecked()).resolves.toBe(true);
    await profileBox().uncheck();
    expect(await submit(page, 'Save changes')).toBe(200);
    expect((await db.monitor.findUniqueOrThrow({ where: { id: monitorId } })).events).toEqual(['posts']);
    await expect(page.getByTestId('events-sent').textContent()).resolves.toBe('new posts');
  });
});
