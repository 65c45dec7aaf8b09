/**
 * The poller's fleet-wide metrics on two poller replicas started in this process (the real service
 * definition with its ops server, real PostgreSQL and Redis): exactly one replica reports the
 * outbox lag and the poll lag, the other exports none of those series; when the reporter stops,
 * the other takes over at its next scrape. Poll lag follows real polls: a target the poller reads
 * successfully drops to a small lag, one whose polls fail keeps growing.
 */
import { randomUUID } from 'node:crypto';
import { startInProcess, type InProcessService } from '@sts/common';
import type { Db } from '@sts/db';
import { createSocialUser } from '@sts/social';
import { waitFor } from '@sts/testing';
import { pollerService } from './main';
import { openProcessBed, type ProcessBed } from '../test/processBed';
import { scrape } from '../test/scrape';

/** the samples of `name` (exactly that metric name), each as its label text and value */
function samples(text: string, name: string): { labels: string; value: number }[] {
  const out: { labels: string; value: number }[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    out.push({ labels: line.slice(name.length, line.lastIndexOf(' ')), value });
  }
  return out;
}

function value(text: string, name: string, label = ''): number | undefined {
  return samples(text, name).find((s) => s.labels.includes(label))?.value;
}

const FLEET = [
  'poller_outbox_pending',
  'poller_outbox_oldest_pending_seconds',
  'poller_poll_lag_seconds',
  'poller_poll_lag_max_seconds',
  'poller_active_targets',
  'poller_targets_by_poll_lag',
];

describe('poller fleet metrics (one reporter among replicas)', () => {
  let bed: ProcessBed;
  let db: Db;
  const replicas: InProcessService[] = [];

  beforeAll(async () => {
    // the broker's vhost does not exist: nothing is ever published
    bed = await openProcessBed({ amqpUrl: `amqp://guest:guest@127.0.0.1:5672/sts-no-such-vhost-${randomUUID()}` });
    db = bed.db;
  });

  afterAll(async () => {
    for (const r of replicas) await r.stop().catch(() => undefined);
    await bed.close();
  });

  it('exactly one replica reports outbox and poll lag; when it stops the other takes over', async () => {
    const account = await db.account.create({ data: { email: 'lag@example.com', plan: 'starter' } });
    const tenMinutesAgo = new Date(Date.now() - 600_000);
    // "reachable" exists in the local social source (its polls succeed), "missing" does not (they fail)
    await createSocialUser(db, { username: 'reachable', name: 'Reachable' });
    for (const target of ['reachable', 'missing'])
      await db.monitor.create({
        data: {
          accountId: account.id,
          targetUsername: target,
          targetKey: target,
          keywords: ['x'],
          createdAt: tenMinutesAgo,
        },
      });
    // an event nobody can publish (the broker's vhost does not exist): the outbox lag is its age
    await db.outboxEvent.create({
      data: {
        routingKey: 'monitor.hit',
        messageId: randomUUID(),
        payload: {},
        createdAt: new Date(Date.now() - 120_000),
      },
    });
    const env = {
      ...bed.env,
      POLL_INTERVAL_SECONDS: '3600',
      OPS_PORT: '0',
      LOG_LEVEL: 'error',
    };
    replicas.push(await startInProcess(pollerService, env), await startInProcess(pollerService, env));
    const [a, b] = replicas as [InProcessService, InProcessService];

    // the reachable target is polled once (by either replica), successfully
    await waitFor(
      async () => (await db.pollCursor.findUnique({ where: { targetKey: 'reachable' } }))?.lastSuccessAt != null,
      20_000,
    );
    // unpublished rows: the seeded event, and the failing target's status events once its profile
    // look has run (the gauge is read at scrape time, between these two counts)
    const pending = () => db.outboxEvent.count({ where: { publishedAt: null } });
    const pendingBefore = await pending();
    const [textA, textB] = await Promise.all([scrape(a.opsPort), scrape(b.opsPort)]);
    const pendingAfter = await pending();
    const reporting = [textA, textB].map((t) => value(t, 'poller_metrics_reporter'));
    expect(reporting.sort()).toEqual([0, 1]);
    const [reporter, other] = value(textA, 'poller_metrics_reporter') === 1 ? [a, b] : [b, a];
    const [reporterText, otherText] = reporter === a ? [textA, textB] : [textB, textA];
    for (const name of FLEET) {
      expect([name, samples(otherText, name)]).toEqual([name, []]);
      expect([name, samples(reporterText, name).length > 0]).toEqual([name, true]);
    }
    expect(pendingBefore).toBeGreaterThanOrEqual(1);
    expect(value(reporterText, 'poller_outbox_pending')).toBeGreaterThanOrEqual(pendingBefore);
    expect(value(reporterText, 'poller_outbox_pending')).toBeLessThanOrEqual(pendingAfter);
    expect(value(reporterText, 'poller_outbox_oldest_pending_seconds')).toBeGreaterThanOrEqual(120);
    // poll lag: the failing target waits since its monitor's creation; the polled one is fresh
    const missingLag = value(reporterText, 'poller_poll_lag_seconds', 'target="missing"')!;
    const reachableLag = value(reporterText, 'poller_poll_lag_seconds', 'target="reachable"')!;
    expect(missingLag).toBeGreaterThanOrEqual(600);
    expect(reachableLag).toBeGreaterThanOrEqual(0);
    expect(reachableLag).toBeLessThan(600);
    expect(value(reporterText, 'poller_poll_lag_max_seconds')).toBe(missingLag);
    expect(value(reporterText, 'poller_active_targets')).toBe(2);
    expect(value(reporterText, 'poller_targets_by_poll_lag', 'le="+Inf"')).toBe(2);
    expect(value(reporterText, 'poller_targets_by_poll_lag', 'le="86400"')).toBe(2);
    const under = (le: number) => value(reporterText, 'poller_targets_by_poll_lag', `le="${le}"`);
    expect(under(300)).toBe(reachableLag <= 300 ? 1 : 0);
    // computed at scrape time: a later scrape sees a larger lag with no poll in between
    await waitFor(async () => {
      const later = await scrape(reporter.opsPort);
      return value(later, 'poller_poll_lag_seconds', 'target="missing"')! > missingLag;
    }, 10_000);

    // the reporter stops: its lock goes with its connection, the other replica takes over
    await reporter.stop();
    const pendingAtTakeOver = await pending();
    const takenOver = await waitFor(async () => {
      const text = await scrape(other.opsPort);
      return value(text, 'poller_metrics_reporter') === 1 ? text : undefined;
    }, 15_000);
    expect(value(takenOver, 'poller_outbox_pending')).toBeGreaterThanOrEqual(pendingAtTakeOver);
    expect(value(takenOver, 'poller_outbox_pending')).toBeLessThanOrEqual(await pending());
    expect(value(takenOver, 'poller_outbox_oldest_pending_seconds')).toBeGreaterThanOrEqual(120);
    expect(value(takenOver, 'poller_active_targets')).toBe(2);
  });
});
