/**
 * The security review's account items, over HTTP against the real dashboard (in
 * process), PostgreSQL, Redis, RabbitMQ and an in-process SMTP server. TRUST_PROXY=1, so each
 * request says which client address it comes from (X-Forwarded-For). Each test failed on the code
 * before the fix (see the commit messages).
 */
import type { Db } from '@sts/db';
import { spawnService, waitFor } from '@sts/testing';
import { startSmtpSink, type SinkMail, type SmtpSink } from './mail/smtpSink';
import { dashboardClient, startMailDashboard, type MailDashboard, type RunningDashboard } from '../test/dashboard';

let mail: MailDashboard;
let dash: RunningDashboard;
let sink: SmtpSink;
let db: Db;
const PASSWORD = 'a good long password';

beforeAll(async () => {
  mail = await startMailDashboard({
    TRUST_PROXY: '1',
    MAIL_POLL_MS: '50',
    // lower than the default 100 so the distributed-guessing test needs fewer password checks
    SIGNIN_MAX_PER_EMAIL_HOURLY: '40',
    LOG_LEVEL: 'error',
  });
  ({ dash, sink, db } = mail);
});

afterAll(() => mail?.stop());

type Client = ReturnType<typeof dashboardClient>;
/** a client whose requests come from `address` (X-Forwarded-For, TRUST_PROXY=1) */
const from = (address: string): Client => dashboardClient(dash.base, { 'x-forwarded-for': address });
const to = (email: string) => (m: SinkMail) => m.to.includes(email);
/** the dashboard path of a mail's link (the links use DASHBOARD_PUBLIC_URL) */
const linkPath = (m: SinkMail, part: string) =>
  m.links.find((l) => l.includes(part))!.replace('http://dash.example.test', '');

/** signs up from `address`, marks the address verified as its link would, signs in */
async function join(email: string, address = '192.0.2.200'): Promise<Client> {
  const c = from(address);
  expect((await c.post('/signup', '/signup', { email, password: PASSWORD })).status).toBe(200);
  // the sign-up's work runs after its answer
  const verified = async () =>
    (await db.account.updateMany({ where: { email: email.toLowerCase() }, data: { emailVerifiedAt: new Date() } }))
      .count;
  await waitFor(async () => ((await verified()) > 0 ? true : null), 10_000);
  expect((await c.post('/signin', '/signin', { email, password: PASSWORD })).location).toBe('/');
  return c;
}

const signIn = (address: string, email: string, password: string) =>
  from(address).post('/signin', '/signin', { email, password });

describe('sign-in throttle by address block', () => {
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

describe('change of password under the sign-in throttle', () => {
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

/**
 * Starts `request` and holds it inside its use-case: the test locks trial_grants, so the request's
 * trial start (POST /plan/trial, which then sets a flash and so re-saves its session) waits for
 * the lock after its session was loaded and checked. `during` runs while it waits.
 */
async function heldTrialStart(c: Client, during: () => Promise<void>): Promise<{ status: number }> {
  const token = c.csrf((await c.req('/plan')).text);
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => (locked = r));
  const holder = db.$transaction(
    async (tx) => {
      await tx.$executeRaw`LOCK TABLE trial_grants IN EXCLUSIVE MODE`;
      locked();
      await released;
    },
    { timeout: 60_000, maxWait: 10_000 },
  );
  await isLocked;
  const inFlight = c.req('/plan/trial', { _csrf: token });
  try {
    await waitFor(async () => {
      const [row] = await db.$queryRaw<{ n: number }[]>`
        SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE '%trial_grants%'`;
      return row && row.n > 0 ? true : null;
    }, 15_000);
    await during();
  } finally {
    release();
    await holder;
  }
  return inFlight;
}

describe('sessions end for good', () => {
  it('a reset while a request is in flight: the session that request re-saves afterwards is refused', async () => {
    const email = 'inflight8@example.com';
    const a = await join(email, '192.0.2.80');
    const b = from('198.51.100.80');
    expect((await b.post('/signin', '/signin', { email, password: PASSWORD })).location).toBe('/');
    const answered = await heldTrialStart(a, async () => {
      expect((await from('198.51.100.81').post('/reset', '/reset', { email })).status).toBe(200);
      const mail = await sink.waitFor((m) => to(email)(m) && /Reset/.test(m.subject));
      const path = linkPath(mail, '/reset/confirm?token=');
      const token = new URL(`http://x${path}`).searchParams.get('token')!;
      const set = await from('198.51.100.81').post(path, '/reset/confirm', { token, password: 'the new password 8' });
      expect(set.status).toBe(200);
      expect((await a.req('/keys')).status).toBe(303);
    });
    // the held request finished after the reset and wrote its session back (the trial flash) ...
    expect(answered.status).toBe(303);
    // ... and that session is refused; the other browser's too; the new password works
    expect((await a.req('/keys')).status).toBe(303);
    expect((await b.req('/keys')).status).toBe(303);
    expect(
      (await from('198.51.100.82').post('/signin', '/signin', { email, password: 'the new password 8' })).location,
    ).toBe('/');
  });

  it('sign out everywhere while a request is in flight: no session of the account survives', async () => {
    const email = 'inflight8b@example.com';
    const a = await join(email, '192.0.2.81');
    const b = from('198.51.100.83');
    expect((await b.post('/signin', '/signin', { email, password: PASSWORD })).location).toBe('/');
    const answered = await heldTrialStart(a, async () => {
      expect((await b.post('/account', '/account/signout-everywhere', {})).location).toBe('/signin');
    });
    expect(answered.status).toBe(303);
    expect((await a.req('/keys')).status).toBe(303);
    expect((await b.req('/keys')).status).toBe(303);
  });
});

describe('links do not stay readable in mail_outbox', () => {
  it('a sent mail keeps kind, recipient, subject and times, not its body; the row expires with the token', async () => {
    const email = 'outbox9@example.com';
    expect((await from('192.0.2.90').post('/signup', '/signup', { email, password: PASSWORD })).status).toBe(200);
    const mail = await sink.waitFor((m) => to(email)(m) && /Verify/.test(m.subject));
    const token = new URL(`http://x${linkPath(mail, '/verify?token=')}`).searchParams.get('token')!;
    const row = await waitFor(async () => {
      const r = await db.mailOutbox.findFirst({ where: { toAddress: email, kind: 'verify' } });
      return r?.sentAt ? r : null;
    }, 10_000);
    expect(row).toMatchObject({ kind: 'verify', toAddress: email, textBody: '', htmlBody: '' });
    expect(row.subject).toMatch(/Verify your email address/);
    expect(JSON.stringify(await db.mailOutbox.findMany())).not.toContain(token);
    const stored = await db.emailToken.findFirstOrThrow({ where: { account: { email } } });
    expect(row.expiresAt?.getTime()).toBe(stored.expiresAt.getTime());
  });

  it('a reset mail that could not be sent before its link expired is never sent, and its body is cleared', async () => {
    const email = 'outbox9b@example.com';
    await join(email, '192.0.2.91');
    const port = sink.port;
    await sink.stop();
    try {
      expect((await from('192.0.2.91').post('/reset', '/reset', { email })).status).toBe(200);
      const queued = await waitFor(async () => {
        const r = await db.mailOutbox.findFirst({ where: { toAddress: email, kind: 'reset' } });
        return r && r.attempts >= 1 ? r : null;
      }, 10_000);
      const token = await db.emailToken.findFirstOrThrow({ where: { account: { email }, purpose: 'reset' } });
      expect(queued.expiresAt?.getTime()).toBe(token.expiresAt.getTime());
      expect(queued.textBody).toContain('/reset/confirm?token=');
      // 30 minutes pass: the token and the mail expire together
      const past = new Date(Date.now() - 1000);
      await db.emailToken.update({ where: { id: token.id }, data: { expiresAt: past } });
      await db.mailOutbox.update({ where: { id: queued.id }, data: { expiresAt: past, nextAttemptAt: past } });
      const cleared = await waitFor(async () => {
        const r = await db.mailOutbox.findUniqueOrThrow({ where: { id: queued.id } });
        return r.textBody === '' && r.htmlBody === '' ? r : null;
      }, 10_000);
      expect(cleared).toMatchObject({ kind: 'reset', toAddress: email, sentAt: null });
    } finally {
      sink = mail.sink = await startSmtpSink({ port });
    }
    await new Promise((r) => setTimeout(r, 1000));
    expect(sink.mails.filter((m) => to(email)(m) && /Reset/.test(m.subject))).toHaveLength(0);
  });
});

/** the time one POST of `form` to `action` takes (the form's page loaded before, not timed) */
async function timedPost(c: Client, page: string, action: string, form: Record<string, string>): Promise<number> {
  const token = c.csrf((await c.req(page)).text);
  const t0 = performance.now();
  const res = await c.req(action, { _csrf: token, ...form });
  const ms = performance.now() - t0;
  expect(res.status).toBe(200);
  return ms;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return (s[(s.length - 1) >> 1]! + s[s.length >> 1]!) / 2;
};

describe('no answer by timing', () => {
  /** the mail_outbox row of that kind to `email` (the work after the answer has finished) */
  const queued = (email: string, kind: string) =>
    waitFor(() => db.mailOutbox.findFirst({ where: { toAddress: email, kind } }), 20_000);

  it('20 sign-ups of taken and of new addresses, interleaved: the medians differ by less than 10 ms; both mail', async () => {
    const taken = Array.from({ length: 20 }, (_, i) => `taken6-${i}@example.com`);
    for (const [i, email] of taken.entries()) {
      expect((await from(`10.6.${i}.1`).post('/signup', '/signup', { email, password: PASSWORD })).status).toBe(200);
      await queued(email, 'verify');
    }
    const times = { taken: [] as number[], fresh: [] as number[] };
    for (let i = 0; i < 20; i++) {
      const fresh = `new6-${i}@example.com`;
      const one = {
        // each waits for its mail in the outbox, so no timed request runs beside the last one's work
        taken: async () => {
          const ms = await timedPost(from(`10.7.${i}.1`), '/signup', '/signup', {
            email: taken[i]!,
            password: PASSWORD,
          });
          await queued(taken[i]!, 'already_registered');
          return ms;
        },
        fresh: async () => {
          const ms = await timedPost(from(`10.8.${i}.1`), '/signup', '/signup', { email: fresh, password: PASSWORD });
          await queued(fresh, 'verify');
          return ms;
        },
      };
      // alternate which goes first, so a drift of the machine's speed weighs on both alike
      for (const kind of i % 2 === 0 ? (['taken', 'fresh'] as const) : (['fresh', 'taken'] as const)) {
        times[kind].push(await one[kind]());
      }
    }
    expect(Math.abs(median(times.taken) - median(times.fresh))).toBeLessThan(10);
    // both went through the outbox and out: the taken address is told so, the new one gets its link
    await sink.waitFor((m) => to(taken[19]!)(m) && /already have/.test(m.subject), 20_000);
    await sink.waitFor((m) => to('new6-19@example.com')(m) && /Verify/.test(m.subject), 20_000);
  });

  it('20 reset requests for known and unknown addresses, interleaved: the medians differ by less than 10 ms', async () => {
    const known = Array.from({ length: 20 }, (_, i) => `known6-${i}@example.com`);
    for (const [i, email] of known.entries()) {
      expect((await from(`10.9.${i}.1`).post('/signup', '/signup', { email, password: PASSWORD })).status).toBe(200);
      await queued(email, 'verify');
    }
    const times = { known: [] as number[], unknown: [] as number[] };
    for (let i = 0; i < 20; i++) {
      const one = {
        known: async () => {
          const ms = await timedPost(from(`10.10.${i}.1`), '/reset', '/reset', { email: known[i]! });
          await queued(known[i]!, 'reset');
          return ms;
        },
        unknown: async () => {
          const ms = await timedPost(from(`10.11.${i}.1`), '/reset', '/reset', { email: `unknown6-${i}@example.com` });
          await new Promise((r) => setTimeout(r, 50));
          return ms;
        },
      };
      for (const kind of i % 2 === 0 ? (['known', 'unknown'] as const) : (['unknown', 'known'] as const)) {
        times[kind].push(await one[kind]());
      }
    }
    expect(Math.abs(median(times.known) - median(times.unknown))).toBeLessThan(10);
    expect(await db.mailOutbox.count({ where: { toAddress: { startsWith: 'unknown6-' } } })).toBe(0);
  });
});

describe('the low items', () => {
  it('POST /reset: at most RESET_MAX_PER_HOUR (3) mails an hour to one address, whatever the source; the same answer', async () => {
    const email = 'reset-limit@example.com';
    await join(email, '192.0.2.95');
    const answers: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await from(`100.64.${i}.1`).post('/reset', '/reset', { email: i % 2 ? email.toUpperCase() : email });
      expect(res.status).toBe(200);
      answers.push(res.text.replace(/value="[^"]+"/g, ''));
    }
    expect(new Set(answers).size).toBe(1);
    await waitFor(
      async () => ((await db.mailOutbox.count({ where: { toAddress: email, kind: 'reset' } })) >= 3 ? true : null),
      20_000,
    );
    await new Promise((r) => setTimeout(r, 1000));
    expect(await db.mailOutbox.count({ where: { toAddress: email, kind: 'reset' } })).toBe(3);
    expect(await db.emailToken.count({ where: { account: { email }, purpose: 'reset' } })).toBe(3);
  });

  it('one Starter trial per inbox: +tag and case fold for the check; mail goes to the address as typed', async () => {
    const first = await join('trial+one@example.com', '192.0.2.96');
    expect((await first.post('/plan', '/plan/trial', {})).location).toBe('/plan');
    expect(
      (await db.account.findUniqueOrThrow({ where: { email: 'trial+one@example.com' } })).trialEndsAt,
    ).not.toBeNull();
    const second = await join('Trial+Two@Example.com', '192.0.2.97');
    expect((await second.post('/plan', '/plan/trial', {})).location).toBe('/plan');
    expect((await second.req('/plan')).text).toMatch(/once per email address/);
    expect((await db.account.findUniqueOrThrow({ where: { email: 'trial+two@example.com' } })).trialEndsAt).toBeNull();
    // the mail went to the +tag address, not to the folded inbox key
    await waitFor(
      () => db.mailOutbox.findFirst({ where: { toAddress: 'trial+two@example.com', kind: 'verify' } }),
      10_000,
    );
    expect(await db.mailOutbox.count({ where: { toAddress: 'trial@example.com' } })).toBe(0);
  });

  it('verification: following the link (GET) changes nothing; its page confirms with a POST', async () => {
    const email = 'scanner@example.com';
    expect((await from('192.0.2.98').post('/signup', '/signup', { email, password: PASSWORD })).status).toBe(200);
    const mail = await sink.waitFor((m) => to(email)(m) && /Verify/.test(m.subject));
    const path = linkPath(mail, '/verify?token=');
    // a mail scanner follows the link, twice
    const scanner = from('203.0.113.98');
    for (let i = 0; i < 2; i++) {
      const page = await scanner.req(path);
      expect(page.status).toBe(200);
      expect(page.text).toContain('action="/verify"');
      expect(page.text).toMatch(/<button[^>]*>\s*Verify my email address/);
    }
    expect((await db.account.findUniqueOrThrow({ where: { email } })).emailVerifiedAt).toBeNull();
    // the person presses the button
    const token = new URL(`http://x${path}`).searchParams.get('token')!;
    const done = await from('192.0.2.98').post(path, '/verify', { token });
    expect(done.status).toBe(200);
    expect(done.text).toContain('Your email address is verified');
    expect((await db.account.findUniqueOrThrow({ where: { email } })).emailVerifiedAt).not.toBeNull();
  });

  it('SESSION_SECRET: an entry shorter than 32 characters or empty (a trailing comma) stops the start with exit 2 naming it', async () => {
    const good = 'k'.repeat(32);
    for (const bad of [`${good},`, `${good},short`, `${good},,${good}`]) {
      const child = spawnService('services/dashboard/src/main.ts', {
        ...mail.backends.env,
        SESSION_SECRET: bad,
        DASHBOARD_PORT: '0',
      });
      try {
        const wait = new Promise<string>((r) => setTimeout(() => r('still running'), 30_000).unref());
        expect(await Promise.race([child.exited, wait])).toBe(2);
      } finally {
        if (child.child.exitCode === null) child.child.kill('SIGKILL');
      }
      expect(child.lines.join('\n')).toMatch(/SESSION_SECRET/);
      expect(child.lines.join('\n')).not.toContain(good);
    }
  });
});
