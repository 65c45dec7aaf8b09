/**
 * Issue 29 (security review), the account items, over HTTP against the real dashboard (in
 * process), PostgreSQL, Redis, RabbitMQ and an in-process SMTP server. TRUST_PROXY=1, so each
 * request says which client address it comes from (X-Forwarded-For). Each test failed on the code
 * before the fix (see the commit messages).
 */
import { createDbClient, type Db } from '@sts/db';
import { startSmtpSink, type SmtpSink } from './mail/smtpSink';
import {
  createBackends,
  dashboardClient,
  dashboardEnv,
  start,
  type RunningDashboard,
  type TestBackends,
} from '../test/dashboard';

let backends: TestBackends;
let dash: RunningDashboard;
let sink: SmtpSink;
let db: Db;
const PASSWORD = 'a good long password';

beforeAll(async () => {
  backends = await createBackends();
  sink = await startSmtpSink();
  db = createDbClient({ url: backends.db.url, poolSize: 2 });
  dash = await start({
    ...dashboardEnv(backends),
    TRUST_PROXY: '1',
    SMTP_URL: sink.url,
    DASHBOARD_PUBLIC_URL: 'http://dash.example.test',
    MAIL_POLL_MS: '50',
    // lower than the default 100 so the distributed-guessing test needs fewer password checks
    SIGNIN_MAX_PER_EMAIL_HOURLY: '40',
    LOG_LEVEL: 'error',
  });
});

afterAll(async () => {
  await dash?.stop();
  await sink?.stop();
  await db?.$disconnect();
  await backends?.drop();
});

type Client = ReturnType<typeof dashboardClient>;
/** a client whose requests come from `address` (X-Forwarded-For, TRUST_PROXY=1) */
const from = (address: string): Client => dashboardClient(dash.base, { 'x-forwarded-for': address });

/** signs up from `address`, marks the address verified as its link would, signs in */
async function join(email: string, address = '192.0.2.200'): Promise<Client> {
  const c = from(address);
  expect((await c.post('/signup', '/signup', { email, password: PASSWORD })).status).toBe(200);
  await db.account.update({ where: { email }, data: { emailVerifiedAt: new Date() } });
  expect((await c.post('/signin', '/signin', { email, password: PASSWORD })).location).toBe('/');
  return c;
}

const signIn = (address: string, email: string, password: string) =>
  from(address).post('/signin', '/signin', { email, password });

describe('sign-in throttle by address block (issue 29 item 5)', () => {
  it('ten addresses of one /64 guessing ten times each do not lock the owner out; the throttled answer offers the reset link', async () => {
    const email = 'owner5@example.com';
    await join(email);
    const statuses: number[] = [];
    for (let a = 1; a <= 10; a++) {
      for (let i = 0; i < 10; i++) statuses.push((await signIn(`2001:db8:5:5::${a}`, email, 'wrong password!')).status);
    }
    // the /64 is one block: ten checks, then refused (no password hashed)
    expect(statuses.slice(0, 10)).toEqual(new Array(10).fill(401));
    expect(statuses.slice(10).every((s) => s === 429)).toBe(true);
    // the owner inside the guessing block is refused, and offered the reset link
    const inside = await signIn('2001:db8:5:5:ffff::1', email, PASSWORD);
    expect(inside.status).toBe(429);
    expect(Number(inside.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(inside.text).toContain('href="/reset"');
    expect(inside.text).toMatch(/reset link/);
    // ... from any other block the owner gets in, IPv6 or IPv4 (IPv4-mapped too)
    expect((await signIn('2001:db8:5:6::1', email, PASSWORD)).location).toBe('/');
    expect((await signIn('198.51.100.20', email, PASSWORD)).location).toBe('/');
    expect((await signIn('::ffff:198.51.100.21', email, PASSWORD)).location).toBe('/');
  });

  it('past the hourly bound a block that has not failed gets one check; the owner from such a block gets in', async () => {
    const email = 'owner5b@example.com';
    await join(email);
    // 4 blocks × 10 failures = the hourly bound of 40
    for (let b = 1; b <= 4; b++) {
      for (let i = 0; i < 10; i++) expect((await signIn(`203.0.${b}.1`, email, 'wrong password!')).status).toBe(401);
    }
    const fresh = await signIn('198.18.0.1', email, 'wrong password!');
    expect(fresh.status).toBe(401); // checked once
    expect((await signIn('198.18.0.2', email, 'wrong password!')).status).toBe(429); // same /24: no second check
    expect((await signIn('198.18.0.3', email, PASSWORD)).status).toBe(429); // even the right one, from that block
    expect((await signIn('198.19.0.1', email, PASSWORD)).location).toBe('/');
  });
});

describe('change of password under the sign-in throttle (issue 29 item 7)', () => {
  it('a session guessing the current password is refused after SIGNIN_MAX_PER_EMAIL tries, before any hashing', async () => {
    const email = 'changer7@example.com';
    const c = await join(email, '192.0.2.70');
    const change = (currentPassword: string) =>
      c.post('/account', '/account/password', { currentPassword, newPassword: 'the next password 7' });
    for (let i = 0; i < 10; i++) expect((await change(`wrong guess ${i}`)).status).toBe(422);
    const refused = await change(PASSWORD);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    const row = await db.account.findUniqueOrThrow({ where: { email } });
    expect((await signIn('192.0.2.71', email, PASSWORD)).status).toBe(429); // the same counter as sign-in
    // the password did not change
    expect((await signIn('198.51.100.70', email, PASSWORD)).location).toBe('/');
    expect((await db.account.findUniqueOrThrow({ where: { email } })).passwordHash).toBe(row.passwordHash);
  });
});
