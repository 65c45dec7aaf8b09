/**
 * Mail benchmark (`npm run bench:mail`): account mail beside a backlog of notices, and watched
 * accounts reported unavailable all at once.
 *
 * In a database of its own (dropped at the end), with an in-process SMTP server (the dashboard's
 * sink) and the dashboard's outbox, worker and pooled SMTP transport:
 * - per round (MAIL_BENCH_ROUNDS, default 3, alternating): MAIL_BENCH_NOTICES (5,000) notices wait
 *   in the outbox; once they are going out, a sign-up's verification mail is queued the way the
 *   dashboard queues it, and the time until the SMTP server has it is measured, with lanes (the
 *   account lane) and without (the same mail queued behind the notices in one lane, how mail was
 *   queued before the lanes). Figures: medians.
 * - once: MAIL_BENCH_FLAP_TARGETS (2,000) of MAIL_BENCH_FLAP_TARGETS × 1.05 watched accounts of the
 *   local store deleted in one statement and all looked at (the poller's profile repository with
 *   its flap gate, defaults TARGET_FLAP_SHARE 20, TARGET_FLAP_MIN 10, a 60 s window): target
 *   events and account events written (the mails), and the alert's counter.
 * Last line: `verify_ms_lanes <a> verify_ms_one_lane <b> notices <n> flap_targets <t>
 * flap_events <e> flap_mails <m> flap_holds <h>`.
 * Targets: verify_ms_lanes ≤ 5,000; flap_events = flap_mails = 0, flap_holds > 0 (the alert fires).
 */
import { randomUUID } from 'node:crypto';
import { createLogger, createMetricsRegistry } from '../packages/common/src';
import { createDbClient, type Db } from '../packages/db/src';
import { createMailOutbox, type MailLane } from '../services/dashboard/src/mail/outbox';
import { startSmtpSink, type SmtpSink } from '../services/dashboard/src/mail/smtpSink';
import { renderMail } from '../services/dashboard/src/mail/templates';
import { createSmtpTransport } from '../services/dashboard/src/mail/transport';
import { createMailWorker } from '../services/dashboard/src/mail/worker';
import { createTargetFlapGate } from '../services/poller/src/adapters/flap';
import { createProfileRepository } from '../services/poller/src/adapters/profiles';
import { clockLog, median, positiveEnv } from './lib/numbers';
import { createDatabase, dropDatabase, postgresAdminUrl } from './lib/services';

const NOTICES = positiveEnv('MAIL_BENCH_NOTICES', 5000, { whole: true });
const ROUNDS = positiveEnv('MAIL_BENCH_ROUNDS', 3, { whole: true });
const FLAP_TARGETS = positiveEnv('MAIL_BENCH_FLAP_TARGETS', 2000, { whole: true });
const logger = createLogger({ service: 'bench-mail', level: 'error' });

const log = clockLog;

/** one round: the notices queued, the worker sending, then the verification mail; ms until the server has it */
async function round(db: Db, sink: SmtpSink, verifyLane: MailLane): Promise<number> {
  await db.$executeRaw`DELETE FROM mail_outbox`;
  sink.mails.length = 0;
  await db.$executeRaw`
    INSERT INTO mail_outbox (dedup_key, kind, to_address, subject, text_body, html_body, lane)
    SELECT 'notice:' || i || ':' || ${randomUUID()}, 'digest', 'n' || i || '@example.com', 'notice ' || i,
           'text', '<p>html</p>', 'notice'
    FROM generate_series(1, ${NOTICES}) AS i`;
  const outbox = createMailOutbox(db);
  const transport = createSmtpTransport(sink.url);
  const worker = createMailWorker({
    outbox,
    transport,
    from: 'bench <bench@example.com>',
    logger,
    pollMs: 1000,
    retryBaseMs: 2000,
    retryMaxMs: 3_600_000,
  });
  worker.start();
  try {
    await sink.waitFor((m) => m.subject.startsWith('notice '), 120_000);
    const to = `signup-${randomUUID().slice(0, 8)}@example.com`;
    const mail = renderMail(
      { kind: 'verify', token: randomUUID(), expiresAt: new Date(Date.now() + 86_400_000) },
      'http://x',
    );
    const t0 = performance.now();
    await outbox.enqueue({
      dedupKey: `verify:${to}`,
      accountId: null,
      kind: 'verify',
      to,
      mail,
      expiresAt: null,
      lane: verifyLane,
    });
    worker.nudge(verifyLane);
    await sink.waitFor((m) => m.to.includes(to), 1_800_000);
    return performance.now() - t0;
  } finally {
    await worker.stop();
    transport.close();
  }
}

/** FLAP_TARGETS of the watched accounts gone at once, every one looked at: what was told */
async function flap(db: Db): Promise<{ events: number; mails: number; holds: number }> {
  const watched = Math.ceil(FLAP_TARGETS * 1.05);
  const account = await db.account.create({ data: { email: `flap-${randomUUID().slice(0, 8)}@example.com` } });
  await db.$executeRaw`
    INSERT INTO social_users (id, username, username_key, name)
    SELECT 1000 + i, 'w' || i, 'w' || i, 'w' || i FROM generate_series(1, ${watched}) AS i`;
  await db.$executeRaw`
    INSERT INTO monitors (account_id, target_username, target_key)
    SELECT ${account.id}::uuid, username, username_key FROM social_users`;
  const registry = createMetricsRegistry('bench-mail');
  const policy = { sharePercent: 20, windowMs: 60_000, minTargets: 10 };
  const profiles = createProfileRepository(db, createTargetFlapGate({ db, policy, source: 'local', registry }));
  await db.$executeRaw`DELETE FROM social_users WHERE id <= 1000 + ${FLAP_TARGETS}`;
  const keys = Array.from({ length: FLAP_TARGETS }, (_, i) => `w${i + 1}`);
  let next = 0;
  const worker = async () => {
    while (next < keys.length) await profiles.look(keys[next++]!, new Date());
  };
  await Promise.all(Array.from({ length: 4 }, worker));
  const holds = (await registry.getSingleMetric('poller_target_flap_holds_total')!.get()).values;
  return {
    events: await db.monitorEvent.count(),
    mails: await db.accountEvent.count({ where: { routingKey: 'account.target.status' } }),
    holds: holds.reduce((n: number, v: { value: number }) => n + v.value, 0),
  };
}

async function main(): Promise<void> {
  const admin = postgresAdminUrl();
  const name = `bench_mail_${Date.now()}`;
  const url = await createDatabase(admin, name);
  const db = createDbClient({ url, poolSize: 8 });
  const sink = await startSmtpSink();
  try {
    const lanes: number[] = [];
    const oneLane: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const order: MailLane[] = r % 2 === 0 ? ['account', 'notice'] : ['notice', 'account'];
      for (const lane of order) {
        const ms = await round(db, sink, lane);
        (lane === 'account' ? lanes : oneLane).push(ms);
        log(
          `round ${r + 1}: verification ${lane === 'account' ? 'in its lane' : 'behind the notices'}: ${ms.toFixed(0)} ms`,
        );
      }
    }
    const f = await flap(db);
    log(
      `${FLAP_TARGETS} watched accounts gone at once: ${f.events} events, ${f.mails} account events, ${f.holds} holds`,
    );
    console.log(
      `verify_ms_lanes ${median(lanes).toFixed(0)} verify_ms_one_lane ${median(oneLane).toFixed(0)} notices ${NOTICES} ` +
        `flap_targets ${FLAP_TARGETS} flap_events ${f.events} flap_mails ${f.mails} flap_holds ${f.holds}`,
    );
  } finally {
    await sink.stop();
    await db.$disconnect();
    await dropDatabase(admin, name);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
