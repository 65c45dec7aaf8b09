-- Storage that stays bounded: `hits` and `delivery_attempts` become range-partitioned by time, one
-- partition per UTC week (Monday 00:00 to the next Monday), named <table>_pYYYYMMDD after the
-- week's first day, plus a DEFAULT partition for rows outside every week partition (a tweet older
-- than the oldest week kept, or a clock far ahead). The maintenance step
-- (`npm run cli -- maintenance run`, packages/usecases maintenance) creates the weeks ahead and
-- drops whole weeks past retention; nothing deletes them row by row.
--
-- hits are partitioned by `tweet_created_at`: a unique key of a partitioned table must contain the
-- partition key, and a tweet's creation time never changes (X derives it from the tweet id), so
-- unique (monitor_id, tweet_id, tweet_created_at) admits exactly the rows unique (monitor_id,
-- tweet_id) admitted. The primary key becomes (id, tweet_created_at) for the same reason.
-- delivery_attempts are partitioned by `created_at` (primary key (id, created_at)); their
-- foreign key to hits goes (a key into a partitioned table would have to carry tweet_created_at,
-- and a hit may be dropped before its attempts' week): `hit_id` stays as a plain reference, and
-- readers treat a missing hit as gone, as they already do after a monitor is deleted.
--
-- Existing rows are copied into the partitioned tables in this migration's transaction: one week
-- partition for every week that holds rows, and the current week with four weeks ahead.

-- A week partition of `parent` for the UTC week starting `week` (a Monday), unless it exists.
-- Rows of that week that landed in the DEFAULT partition move into it in the same transaction,
-- so attaching it never fails on them. Returns whether it created the partition.
CREATE FUNCTION "create_week_partition"(parent TEXT, week DATE) RETURNS BOOLEAN LANGUAGE plpgsql AS $$
DECLARE
  part TEXT := parent || '_p' || to_char(week, 'YYYYMMDD');
  lo TIMESTAMPTZ := week::timestamp AT TIME ZONE 'UTC';
  hi TIMESTAMPTZ := (week + 7)::timestamp AT TIME ZONE 'UTC';
  key TEXT;
BEGIN
  IF extract(isodow FROM week) <> 1 THEN
    RAISE EXCEPTION 'create_week_partition: % is not a Monday', week;
  END IF;
  IF to_regclass(quote_ident(part)) IS NOT NULL THEN
    RETURN false;
  END IF;
  SELECT a.attname INTO STRICT key
  FROM pg_partitioned_table p JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = p.partattrs[0]
  WHERE p.partrelid = quote_ident(parent)::regclass;
  EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS)', part, parent);
  IF to_regclass(quote_ident(parent || '_default')) IS NOT NULL THEN
    EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %I >= $1 AND %I < $2 RETURNING *) INSERT INTO %I SELECT * FROM moved',
                   parent || '_default', key, key, part) USING lo, hi;
  END IF;
  EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', parent, part, lo, hi);
  RETURN true;
END $$;

-- hits ---------------------------------------------------------------------------------------
ALTER TABLE "delivery_attempts" DROP CONSTRAINT "delivery_attempts_hit_id_fkey";
ALTER TABLE "hits" RENAME TO "hits_unpartitioned";
ALTER TABLE "hits_unpartitioned" RENAME CONSTRAINT "hits_pkey" TO "hits_unpartitioned_pkey";
ALTER TABLE "hits_unpartitioned" RENAME CONSTRAINT "hits_monitor_id_fkey" TO "hits_unpartitioned_monitor_id_fkey";
ALTER INDEX "hits_monitor_id_detected_at_id_idx" RENAME TO "hits_unpartitioned_detected_idx";
ALTER INDEX "hits_monitor_id_tweet_id_key" RENAME TO "hits_unpartitioned_tweet_key";

CREATE TABLE "hits" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "monitor_id" UUID NOT NULL,
    "tweet_id" TEXT NOT NULL,
    "tweet_text" TEXT NOT NULL,
    "tweet_author_id" TEXT NOT NULL,
    "tweet_author_username" TEXT NOT NULL,
    "tweet_created_at" TIMESTAMPTZ(3) NOT NULL,
    "detected_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "hits_pkey" PRIMARY KEY ("id", "tweet_created_at")
) PARTITION BY RANGE ("tweet_created_at");
CREATE INDEX "hits_monitor_id_detected_at_id_idx" ON "hits"("monitor_id", "detected_at" DESC, "id" DESC);
CREATE UNIQUE INDEX "hits_monitor_id_tweet_id_tweet_created_at_key" ON "hits"("monitor_id", "tweet_id", "tweet_created_at");
ALTER TABLE "hits" ADD CONSTRAINT "hits_monitor_id_fkey" FOREIGN KEY ("monitor_id") REFERENCES "monitors"("id") ON DELETE CASCADE ON UPDATE CASCADE;
CREATE TABLE "hits_default" PARTITION OF "hits" DEFAULT;

SELECT "create_week_partition"('hits', w::date)
FROM (SELECT DISTINCT date_trunc('week', "tweet_created_at" AT TIME ZONE 'UTC') AS w FROM "hits_unpartitioned"
      UNION SELECT date_trunc('week', now() AT TIME ZONE 'UTC') + n * interval '7 days' FROM generate_series(0, 4) n) weeks
ORDER BY w;

INSERT INTO "hits" SELECT "id", "monitor_id", "tweet_id", "tweet_text", "tweet_author_id", "tweet_author_username",
  "tweet_created_at", "detected_at" FROM "hits_unpartitioned";
DROP TABLE "hits_unpartitioned";

-- delivery_attempts ---------------------------------------------------------------------------
ALTER TABLE "delivery_attempts" RENAME TO "delivery_attempts_unpartitioned";
ALTER TABLE "delivery_attempts_unpartitioned" RENAME CONSTRAINT "delivery_attempts_pkey" TO "delivery_attempts_unpartitioned_pkey";
ALTER TABLE "delivery_attempts_unpartitioned" RENAME CONSTRAINT "delivery_attempts_monitor_id_fkey" TO "delivery_attempts_unpartitioned_monitor_id_fkey";
ALTER INDEX "delivery_attempts_monitor_id_created_at_idx" RENAME TO "delivery_attempts_unpartitioned_monitor_idx";
ALTER INDEX "delivery_attempts_delivery_id_idx" RENAME TO "delivery_attempts_unpartitioned_delivery_idx";
ALTER INDEX "delivery_attempts_hit_id_idx" RENAME TO "delivery_attempts_unpartitioned_hit_idx";
DROP INDEX "delivery_attempts_created_at_idx";

CREATE TABLE "delivery_attempts" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "monitor_id" UUID NOT NULL,
    "hit_id" UUID,
    "event" TEXT NOT NULL,
    "delivery_id" TEXT NOT NULL,
    "url" TEXT NOT NULL,
    "outcome" "DeliveryOutcome" NOT NULL,
    "status_code" INTEGER,
    "latency_ms" INTEGER,
    "error" TEXT,
    "response_snippet" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "request_headers" JSONB,
    "request_body" TEXT,
    "response_headers" JSONB,
    "response_body" BYTEA,

    CONSTRAINT "delivery_attempts_pkey" PRIMARY KEY ("id", "created_at")
) PARTITION BY RANGE ("created_at");
CREATE INDEX "delivery_attempts_monitor_id_created_at_idx" ON "delivery_attempts"("monitor_id", "created_at" DESC);
CREATE INDEX "delivery_attempts_delivery_id_idx" ON "delivery_attempts"("delivery_id");
CREATE INDEX "delivery_attempts_hit_id_idx" ON "delivery_attempts"("hit_id");
ALTER TABLE "delivery_attempts" ADD CONSTRAINT "delivery_attempts_monitor_id_fkey" FOREIGN KEY ("monitor_id") REFERENCES "monitors"("id") ON DELETE CASCADE ON UPDATE CASCADE;
CREATE TABLE "delivery_attempts_default" PARTITION OF "delivery_attempts" DEFAULT;

SELECT "create_week_partition"('delivery_attempts', w::date)
FROM (SELECT DISTINCT date_trunc('week', "created_at" AT TIME ZONE 'UTC') AS w FROM "delivery_attempts_unpartitioned"
      UNION SELECT date_trunc('week', now() AT TIME ZONE 'UTC') + n * interval '7 days' FROM generate_series(0, 4) n) weeks
ORDER BY w;

INSERT INTO "delivery_attempts" ("id", "monitor_id", "hit_id", "event", "delivery_id", "url", "outcome", "status_code",
  "latency_ms", "error", "response_snippet", "created_at", "request_headers", "request_body", "response_headers", "response_body")
SELECT "id", "monitor_id", "hit_id", "event", "delivery_id", "url", "outcome", "status_code",
  "latency_ms", "error", "response_snippet", "created_at", "request_headers", "request_body", "response_headers", "response_body"
FROM "delivery_attempts_unpartitioned";
DROP TABLE "delivery_attempts_unpartitioned";

-- Bounded pruning and timed reads: each batch of the maintenance step and each timed read finds
-- its rows through an index range instead of a scan of the table.
CREATE INDEX "mail_outbox_created_at_idx" ON "mail_outbox"("created_at");
CREATE INDEX "email_tokens_expires_at_idx" ON "email_tokens"("expires_at");
CREATE INDEX "usage_daily_day_idx" ON "usage_daily"("day");
-- the gateway's quota notices: this month's rows changed since its last look
CREATE INDEX "usage_monthly_period_updated_at_idx" ON "usage_monthly"("period", "updated_at");
-- the dashboard's trial checks: trials ending soon, and ended trials not handled yet
CREATE INDEX "accounts_trial_ends_at_idx" ON "accounts"("trial_ends_at");
CREATE INDEX "accounts_trial_ended_notified_at_trial_ends_at_idx" ON "accounts"("trial_ended_notified_at", "trial_ends_at");
