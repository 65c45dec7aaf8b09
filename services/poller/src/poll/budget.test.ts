/**
 * Two poller processes on the X source share one rate-limit budget through Redis: against the
 * fake X with a timeline window of 12 requests, 30 Starter targets due every second, the fleet
 * sends exactly the window's 12 timeline reads and X never answers 429; the polls it cannot afford
 * show on their targets as `last_error` and wait for the window's reset.
 */
import { spawnService, startFakeX, waitFor } from '@sts/testing';
import { openProcessBed } from '../../test/processBed';

describe('poller: two processes, one X budget', () => {
  it('never exceed the window, and never meet a 429', async () => {
    const bed = await openProcessBed();
    const db = bed.db;
    const fake = await startFakeX({ limits: { timeline: 12 }, windowMs: 60_000 });
    const env = {
      ...bed.env,
      POLL_INTERVAL_SECONDS: '1',
      SOCIAL_SOURCE: 'x',
      X_MONITOR_MODE: 'timeline',
      X_API_BASE_URL: fake.url,
      X_BEARER_TOKEN: 'fleet-token',
      // the tier's limits, as an operator sets them: the first calls of both processes are budgeted too
      X_RATE_LIMITS: 'timeline=12',
      OPS_PORT: '0',
      LOG_LEVEL: 'error',
    };
    const procs = [spawnService('services/poller/src/main.ts', env), spawnService('services/poller/src/main.ts', env)];
    try {
      const account = await db.account.create({ data: { email: 'budget@example.com', plan: 'starter' } });
      for (let i = 0; i < 30; i++) {
        const username = `budget${i}`;
        fake.state.addUser({ username });
        fake.state.post({ author: username, text: `post ${i}` });
        await db.monitor.create({
          data: { accountId: account.id, targetUsername: username, targetKey: username, keywords: [] },
        });
      }
      await Promise.all(procs.map((p) => p.waitForLine(/poller started/)));
      await waitFor(() => fake.requests.count({ family: 'timeline' }) >= 12 || undefined, 30_000);
      // both keep ticking every second for a while: nothing more goes out in this window
      await new Promise((r) => setTimeout(r, 4000));
      expect(fake.requests.count({ family: 'timeline', status: 200 })).toBe(12);
      expect(fake.requests.count({ status: 429 })).toBe(0);
      // the lookups of polls running at the same time are batched (users/by, ≤ 100 names) and
      // cached for both processes: at most half a call per target (POLL_CONCURRENCY 8 bounds how
      // many polls resolve at once), then none
      expect(fake.requests.count({ family: 'users' })).toBeLessThanOrEqual(15);
      const refused = await db.pollCursor.findMany({ where: { lastError: { contains: 'rate limit' } } });
      expect(refused.length).toBeGreaterThan(0);
      expect(refused[0]!.lastError).toMatch(/timeline.*exhausted/);
    } finally {
      for (const p of procs) p.child.kill('SIGKILL');
      await fake.stop();
      await bed.close();
    }
  });

  // timeline: one read per target; search: targets packed two by two (X_QUERY_MAX_LENGTH 32), the
  // Starter/trial ones and the Free-only ones in groups of their own
  it.each([
    { mode: 'timeline', free: 12, perRequest: 1 },
    { mode: 'search', free: 20, perRequest: 2 },
  ] as const)(
    '$mode: when the budget is short, Starter and trial targets are polled before Free-only ones',
    async ({ mode, free: freeCount, perRequest }) => {
      const bed = await openProcessBed();
      const db = bed.db;
      const fake = await startFakeX({ limits: { [mode]: 10 }, windowMs: 60_000 });
      const proc = spawnService('services/poller/src/main.ts', {
        ...bed.env,
        POLL_INTERVAL_SECONDS: '1',
        SOCIAL_SOURCE: 'x',
        X_MONITOR_MODE: mode,
        X_QUERY_MAX_LENGTH: '32',
        X_API_BASE_URL: fake.url,
        X_BEARER_TOKEN: 'fleet-token',
        X_RATE_LIMITS: `${mode}=10`,
        // Free-only polls may use half of each window
        X_LOW_PRIORITY_RESERVE_PERCENT: '50',
        OPS_PORT: '0',
        LOG_LEVEL: 'error',
      });
      try {
        const free = await db.account.create({ data: { email: 'free@example.com', plan: 'free' } });
        const starter = await db.account.create({ data: { email: 'starter@example.com', plan: 'starter' } });
        const trial = await db.account.create({
          data: { email: 'trial@example.com', plan: 'free', trialEndsAt: new Date(Date.now() + 86_400_000) },
        });
        const ids = new Map<string, string>();
        // the Free-only targets first (polled first when nothing else orders them), then 5 paid ones
        const targets = [
          ...Array.from({ length: freeCount }, (_, i) => ({ name: `free${i}`, account: free.id })),
          ...Array.from({ length: 5 }, (_, i) => ({ name: `paid${i}`, account: i % 2 ? trial.id : starter.id })),
        ];
        for (const t of targets) {
          ids.set(fake.state.addUser({ username: t.name }).id, t.name);
          await db.monitor.create({
            data: { accountId: t.account, targetUsername: t.name, targetKey: t.name, keywords: [] },
          });
        }
        await proc.waitForLine(/poller started/);
        await waitFor(() => fake.requests.count({ family: mode }) >= 10 || undefined, 30_000);
        await new Promise((r) => setTimeout(r, 3000));
        const served = fake.requests.log.filter((r) => r.family === mode && r.status === 200);
        const polled = served.flatMap((r) => polledTargets(r, ids));
        expect(served).toHaveLength(10);
        // every paid target got its poll; Free-only ones only the low-priority half of the window
        expect(new Set(polled.filter((n) => n.startsWith('paid'))).size).toBe(5);
        expect(polled.filter((n) => n.startsWith('free')).length).toBeLessThanOrEqual(5 * perRequest);
        expect(fake.requests.count({ status: 429 })).toBe(0);
      } finally {
        proc.child.kill('SIGKILL');
        await fake.stop();
        await bed.close();
      }
    },
  );
});

/** the targets one request polled: a timeline read's user, or a search query's `from:` names */
function polledTargets(r: { path: string; params: URLSearchParams }, ids: Map<string, string>): string[] {
  const timeline = /\/2\/users\/([0-9]+)\/tweets/.exec(r.path);
  if (timeline) return [ids.get(timeline[1]!)!];
  return [...(r.params.get('query') ?? '').matchAll(/from:(\w+)/g)].map((m) => m[1]!);
}
