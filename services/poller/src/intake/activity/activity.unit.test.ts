import { createLogger } from '@sts/common';
import { spawnService } from '@sts/testing';
import { XActivityError, type XaaEvent } from '@sts/x-activity';
import { applyProfileEvent, wantedTypes } from '../../domain/activity';
import type { Profile } from '../../domain/profiles';
import { loadPollerEnv } from '../../env';
import { ActivityIntake } from './intake';
import { activityStubs } from '../../../test/activityStubs';

describe('X Activity API variables', () => {
  it('defaults: profiles, 2,500 subscriptions (X Pro), hourly health lookups', () => {
    expect(loadPollerEnv({})).toMatchObject({
      X_INTAKE_ACTIVITY: 'profiles',
      X_ACTIVITY_MAX_SUBS: 2500,
      X_HEALTH_LOOKUP_SECONDS: 3600,
    });
  });

  it.each([
    ['X_INTAKE_ACTIVITY', 'posts'],
    ['X_ACTIVITY_MAX_SUBS', 'many'],
    ['X_ACTIVITY_MAX_SUBS', '-1'],
    ['X_HEALTH_LOOKUP_SECONDS', '0'],
  ])('%s=%s stops the poller at start with exit code 2 naming the variable', async (name, value) => {
    const proc = spawnService('services/poller/src/main.ts', { [name]: value, LOG_LEVEL: 'error' });
    expect(await proc.exited).toBe(2);
    expect(proc.lines.join('\n')).toContain(name);
  });
});

describe('the event types monitors want and what a profile event changes', () => {
  const wants = { profile: true, deletes: true, posts: true };
  it('subscribes only to what the monitors ask for, post.create only with X_INTAKE_ACTIVITY=all', () => {
    expect(wantedTypes(wants, 'off')).toEqual([]);
    expect(wantedTypes({ profile: false, deletes: false, posts: true }, 'profiles')).toEqual([]);
    expect(wantedTypes(wants, 'profiles')).toHaveLength(6);
    expect(wantedTypes(wants, 'all')).toContain('post.create');
    expect(wantedTypes({ ...wants, profile: false }, 'profiles')).toEqual(['post.delete']);
  });

  const last: Profile = {
    userId: '1',
    username: 'a',
    name: 'A',
    description: 'bio',
    profileImageUrl: 'https://x/1.jpg',
    verified: false,
  };
  it.each([
    ['profile.update.bio', { before: 'bio', after: 'new' }, { description: 'new' }],
    ['profile.update.bio', { before: 'bio', after: '' }, { description: null }],
    ['profile.update.screenname', { after: 'B' }, { name: 'B' }],
    ['profile.update.handle', { after: 'b2' }, { username: 'b2' }],
    ['profile.update.profile_picture', { after: 'https://x/2.jpg' }, { profileImageUrl: 'https://x/2.jpg' }],
    ['profile.update.verified_badge', { after: 'blue' }, { verified: true }],
    ['profile.update.verified_badge', { after: 'none' }, { verified: false }],
  ] as const)('%s %j', (type, payload, changed) => {
    expect(applyProfileEvent(last, type, payload)).toEqual({ ...last, ...changed });
  });

  it('an event without a usable `after` changes nothing', () => {
    expect(applyProfileEvent(last, 'profile.update.handle', { after: '' })).toBeNull();
    expect(applyProfileEvent(last, 'profile.update.bio', {})).toBeNull();
  });
});

describe('ActivityIntake gaps', () => {
  const logger = createLogger({ service: 'activity-unit', level: 'error' });
  const seven = [{ userId: '7', targetKey: 'seven', paying: true, types: ['profile.update.bio' as const] }];

  function intakeWith(now: { t: number }, saved: { at: Date | null } = { at: null }) {
    const owed: string[][] = [];
    const starts: (Date | undefined)[] = [];
    const events: string[] = [];
    let handlers: { onEvent(e: XaaEvent): void; onActivity(partial: boolean): void } | null = null;
    let close: ((err?: Error) => void) | null = null;
    /** what recording an event waits for (a test holds it back) */
    const recording = { wait: Promise.resolve() };
    const intake = new ActivityIntake({
      ...activityStubs(seven, {
        owe: (keys) => {
          owed.push([...keys]);
          return Promise.resolve();
        },
        recordedTo: () => Promise.resolve(saved.at),
        saveRecordedTo: (at) => {
          saved.at = at;
          return Promise.resolve();
        },
      }),
      api: {
        connect(h, _signal, replay) {
          handlers = h;
          starts.push(replay?.startTime);
          return Promise.resolve({
            closed: new Promise<void>((resolve, reject) => (close = (err) => (err ? reject(err) : resolve()))),
          });
        },
      },
      onEvent: (e) => {
        events.push(e.uuid);
        return recording.wait;
      },
      logger,
      syncMs: 3_600_000,
      now: () => now.t,
    });
    return {
      intake,
      owed,
      starts,
      events,
      recording,
      handlers: () => handlers!,
      close: (err?: Error) => close!(err),
    };
  }

  const event = (uuid: string): XaaEvent => ({
    uuid,
    userId: '7',
    eventType: 'profile.update.bio',
    tag: 'sts',
    payload: {},
    includes: null,
  });

  it('a new holder owes every pushed account a look; a short gap is replayed from the last byte, duplicates dropped', async () => {
    const now = { t: 1_000_000 };
    const t = intakeWith(now);
    t.intake.start();
    await t.intake.sync();
    expect(t.owed).toEqual([['seven']]);
    expect(t.starts[0]!.getTime()).toBe(now.t - 5 * 60_000 + 1000);

    t.handlers().onEvent(event('1'));
    now.t += 10_000;
    t.handlers().onActivity(false);
    t.close(new Error('operational-disconnect'));
    await new Promise((r) => setImmediate(r));
    now.t += 60_000; // past the backoff
    await t.intake.sync();
    expect(t.owed).toHaveLength(1);
    expect(t.starts[1]!.getTime()).toBe(1_000_000 + 10_000 - 5000);
    t.handlers().onEvent(event('1'));
    t.handlers().onEvent(event('2'));
    await t.intake.stop();
    expect(t.events).toEqual(['1', '2']);
  });

  it('bytes of an unfinished line move neither the position nor the stall clock: a trickle is a stall', async () => {
    const now = { t: 3_000_000 };
    const t = intakeWith(now);
    t.intake.start();
    await t.intake.sync();
    now.t += 3000;
    t.handlers().onActivity(false); // a keep-alive: the position is here
    // half an event, then a byte now and then, never its line end
    for (let i = 0; i < 7; i++) {
      now.t += 10_000;
      t.handlers().onActivity(true);
    }
    await t.intake.sync(); // 70 s without a line end: stalled, dropped and replayed
    await new Promise((r) => setImmediate(r));
    now.t += 60_000; // past the backoff
    await t.intake.sync();
    expect(t.starts).toHaveLength(2);
    // from the last line end, so the event whose bytes were trickling is replayed whole
    expect(t.starts[1]!.getTime()).toBe(3_003_000 - 5000);
    await t.intake.stop();
  });

  it('a new holder replays from the position the last one saved once its events were recorded, owing nothing', async () => {
    const now = { t: 2_000_000 };
    const saved: { at: Date | null } = { at: null };
    const first = intakeWith(now, saved);
    first.intake.start();
    await first.intake.sync();
    let release!: () => void;
    first.recording.wait = new Promise((r) => (release = r));
    now.t += 3000;
    first.handlers().onActivity(false);
    first.handlers().onEvent(event('1'));
    await first.intake.sync();
    await new Promise((r) => setImmediate(r));
    // the event before that byte is not recorded yet: the position is not saved
    expect(saved.at).toBeNull();
    release();
    await first.intake.sync();
    await new Promise((r) => setImmediate(r));
    expect(saved.at?.getTime()).toBe(2_003_000);
    await first.intake.stop();

    // a restart 20 s later: the next holder replays from there (less the overlap), not 5 minutes
    now.t += 20_000;
    const next = intakeWith(now, saved);
    next.intake.start();
    await next.intake.sync();
    expect(next.starts[0]!.getTime()).toBe(2_003_000 - 5000);
    expect(next.owed).toEqual([]);
    await next.intake.stop();
  });

  it("an event on a subscription X made before the reconciliation's round ended reaches its targets", async () => {
    const watched = [...seven];
    const got: [string, readonly string[]][] = [];
    let handlers: { onEvent(e: XaaEvent): void } | null = null;
    const stubs = activityStubs(watched, { watched: () => Promise.resolve([...watched]) });
    let midRound: (() => void) | null = null;
    const intake = new ActivityIntake({
      ...stubs,
      reconciler: {
        // X has answered the new subscription's creation; the round's other calls are still out
        reconcile: async (accounts) => {
          if (accounts.length > 1) midRound?.();
          await new Promise((r) => setImmediate(r));
          return stubs.reconciler.reconcile(accounts);
        },
      },
      api: { connect: (h) => ((handlers = h), Promise.resolve({ closed: new Promise<void>(() => undefined) })) },
      onEvent: (e, targets) => {
        got.push([e.uuid, targets]);
        return Promise.resolve();
      },
      logger,
      syncMs: 3_600_000,
    });
    intake.start();
    await intake.sync();
    watched.push({ userId: '8', targetKey: 'eight', paying: true, types: ['profile.update.bio'] });
    midRound = () => handlers!.onEvent({ ...event('new'), userId: '8' });
    await intake.sync();
    handlers!.onEvent({ ...event('later'), userId: '8' });
    await intake.stop();
    expect(got).toEqual([
      ['new', ['eight']],
      ['later', ['eight']],
    ]);
  });

  it('a gap longer than X replays owes the pushed accounts a look', async () => {
    const now = { t: 5_000_000 };
    const t = intakeWith(now);
    t.intake.start();
    await t.intake.sync();
    t.close(new Error('gone'));
    await new Promise((r) => setImmediate(r));
    now.t += 6 * 60_000;
    await t.intake.sync();
    expect(t.owed).toEqual([['seven'], ['seven']]);
    await t.intake.stop();
  });

  it('an app X refuses the Activity API: logged once, nothing pushed, retried after the resync only', async () => {
    const now = { t: 9_000_000 };
    const saved: number[] = [];
    let lists = 0;
    const quiet = createLogger({ service: 'activity-unit', level: 'error' });
    const warn = jest.spyOn(quiet, 'warn');
    const intake = new ActivityIntake({
      ...activityStubs(seven, {
        savePushed: (accounts) => {
          saved.push(accounts.length);
          return Promise.resolve();
        },
      }),
      api: { connect: () => Promise.reject(new Error('not called')) },
      reconciler: {
        reconcile: () => {
          lists++;
          return Promise.reject(new XActivityError('X answered 403: Forbidden', 403, false));
        },
      },
      onEvent: () => Promise.resolve(),
      logger: quiet,
      syncMs: 3_600_000,
      resyncMs: 600_000,
      now: () => now.t,
    });
    intake.start();
    await intake.sync();
    now.t += 60_000;
    await intake.sync();
    expect([lists, saved, warn.mock.calls.length]).toEqual([1, [0], 1]);
    now.t += 600_000;
    await intake.sync();
    expect([lists, warn.mock.calls.length]).toEqual([2, 1]);
    await intake.stop();
  });
});
