/**
 * Nothing on a timer reads a whole table: with tens of thousands of rows in place (and ANALYZE),
 * the plans of the timed reads and of every batch of the maintenance step reach their rows
 * through an index, never a sequential scan of the table. The statements are those of
 * services/gateway quotaNotices.ts (quota notices, every second on every gateway),
 * services/dashboard mail/accountEvents.ts (trial checks) and maintenance.ts (batches), with
 * their parameters as literals.
 */
import { Client } from 'pg';
import { createTestDatabase } from '@sts/testing';

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];

describe('timed reads use indexes', () => {
  let t: Awaited<ReturnType<typeof createTestDatabase>>;
  let pg: Client;

  const plan = async (sql: string) => {
    const { rows } = await pg.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(`EXPLAIN (FORMAT JSON) ${sql}`);
    return nodes(rows[0]!['QUERY PLAN'][0]!.Plan);
  };
  /** the plan reads `table` only through indexes */
  const expectIndexed = async (sql: string, table: string) => {
    const all = await plan(sql);
    const onTable = all.filter((n) => n['Relation Name'] === table);
    expect({ sql, seqScans: onTable.filter((n) => n['Node Type'] === 'Seq Scan').length }).toEqual({
      sql,
      seqScans: 0,
    });
    expect(onTable.length).toBeGreaterThan(0);
    // the index names of the plan (a bitmap scan names its index on the child node)
    return all.map((n) => n['Index Name']).filter(Boolean);
  };

  beforeAll(async () => {
    t = await createTestDatabase();
    pg = new Client({ connectionString: t.url });
    await pg.connect();
    // 20,000 accounts, a fifth of them with a trial in the past (handled), a few ending soon
    await pg.query(`
      INSERT INTO accounts (email, trial_started_at, trial_ends_at, trial_ended_notified_at)
      SELECT 'a' || n || '@example.com',
             CASE WHEN n % 5 = 0 THEN now() - interval '60 days' END,
             CASE WHEN n % 5 = 0 THEN now() - interval '30 days' + (n % 50) * interval '1 day' END,
             CASE WHEN n % 5 = 0 AND n % 50 < 30 THEN now() - interval '1 day' END
      FROM generate_series(1, 20000) n`);
    // last month's usage for every account, this month's for all, touched over the past day
    await pg.query(`
      INSERT INTO usage_monthly (account_id, period, used, updated_at)
      SELECT id, p.period, 10, now() - (random() * interval '1 day')
      FROM accounts CROSS JOIN (VALUES (to_char(now() - interval '1 month', 'YYYY-MM')), (to_char(now(), 'YYYY-MM'))) p(period)`);
    await pg.query(`
      INSERT INTO usage_daily (account_id, day, used)
      SELECT id, current_date - (n % 20), 1 FROM accounts CROSS JOIN generate_series(0, 1) n`);
    await pg.query(`
      INSERT INTO outbox (routing_key, message_id, payload, published_at)
      SELECT 'monitor.hit', 'm' || n, '{}', now() - (n % 100) * interval '1 minute' FROM generate_series(1, 30000) n`);
    await pg.query(`
      INSERT INTO account_events (dedup_key, routing_key, account_id, payload, published_at)
      SELECT 'e' || n, 'account.x', (SELECT id FROM accounts LIMIT 1), '{}', now() - (n % 100) * interval '1 minute'
      FROM generate_series(1, 30000) n`);
    await pg.query(`
      INSERT INTO mail_outbox (dedup_key, kind, to_address, subject, text_body, html_body, created_at, sent_at)
      SELECT 'k' || n, 'k', 'a@b', 's', 't', 'h', now() - interval '1 hour', now() - interval '1 hour'
      FROM generate_series(1, 30000) n`);
    await pg.query(`
      INSERT INTO email_tokens (account_id, purpose, token_hash, expires_at)
      SELECT id, 'verify', md5(id::text) || md5(email), now() + interval '1 day' FROM accounts`);
    await pg.query(`
      INSERT INTO monitors (account_id, target_username, target_key)
      SELECT id, 'u' || left(md5(email), 10), 'u' || left(md5(email), 10) FROM accounts LIMIT 100`);
    await pg.query(`
      INSERT INTO monitor_events (monitor_id, kind, payload, created_at)
      SELECT m.id, 'monitor.profile_changed', '{}', now() - (n % 100) * interval '1 minute'
      FROM monitors m CROSS JOIN generate_series(1, 300) n`);
    await pg.query('ANALYZE');
  });
  afterAll(async () => {
    await pg.end();
    await t.drop();
  });

  it('quota notices read only this month’s rows changed since the last look', async () => {
    const used = await expectIndexed(
      `SELECT u.account_id, u.used FROM usage_monthly u JOIN accounts a ON a.id = u.account_id
       WHERE u.period = to_char(now(), 'YYYY-MM') AND u.updated_at > now() - interval '31 seconds'`,
      'usage_monthly',
    );
    expect(used).toContain('usage_monthly_period_updated_at_idx');
  });

  it('trial checks find ending and ended trials through trial_ends_at', async () => {
    expect(
      await expectIndexed(
        `SELECT id, trial_ends_at FROM accounts
         WHERE trial_ends_at > now() AND trial_ends_at <= now() + interval '3 days' AND plan = 'free'`,
        'accounts',
      ),
    ).toContain('accounts_trial_ends_at_idx');
    expect(
      await expectIndexed(
        `SELECT id, trial_ends_at FROM accounts
         WHERE trial_ends_at <= now() AND trial_started_at IS NOT NULL AND plan = 'free' AND trial_ended_notified_at IS NULL`,
        'accounts',
      ),
    ).toEqual(expect.arrayContaining([expect.stringMatching(/^accounts_trial_/)]));
  });

  it.each([
    ['outbox', `SELECT id FROM outbox WHERE published_at < now() - interval '1 day' LIMIT 5000 FOR UPDATE SKIP LOCKED`],
    [
      'account_events',
      `SELECT dedup_key FROM account_events WHERE published_at < now() - interval '90 days' LIMIT 5000 FOR UPDATE SKIP LOCKED`,
    ],
    [
      'mail_outbox',
      `SELECT id FROM mail_outbox WHERE sent_at < now() - interval '30 days' LIMIT 5000 FOR UPDATE SKIP LOCKED`,
    ],
    [
      'mail_outbox',
      `SELECT id FROM mail_outbox WHERE created_at < now() - interval '30 days' AND sent_at IS NULL LIMIT 5000 FOR UPDATE SKIP LOCKED`,
    ],
    [
      'email_tokens',
      `SELECT id FROM email_tokens WHERE expires_at < now() - interval '7 days' LIMIT 5000 FOR UPDATE SKIP LOCKED`,
    ],
    [
      'usage_daily',
      `SELECT account_id, day FROM usage_daily WHERE day < (now() - interval '400 days')::date LIMIT 5000 FOR UPDATE SKIP LOCKED`,
    ],
    [
      'monitor_events',
      `SELECT id FROM monitor_events WHERE created_at < now() - interval '30 days' LIMIT 5000 FOR UPDATE SKIP LOCKED`,
    ],
  ])('the maintenance batch of %s finds its rows through an index', async (table, sql) => {
    await expectIndexed(sql, table);
  });
});
