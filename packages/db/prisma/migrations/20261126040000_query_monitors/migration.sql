-- Query monitors (docs/queries.md): a monitor watches either one username or a search query.
-- target_username / target_key are null for a query monitor and "query" holds the query as saved
-- (validated by @sts/core parseQuery before it is written). Existing rows are username monitors
-- and stay as they are.
ALTER TABLE "monitors"
  ALTER COLUMN "target_username" DROP NOT NULL,
  ALTER COLUMN "target_key" DROP NOT NULL,
  ADD COLUMN "query" TEXT;

ALTER TABLE "monitors" ADD CONSTRAINT "monitors_username_or_query" CHECK (
  ("target_username" IS NULL) <> ("query" IS NULL)
  AND ("target_key" IS NULL) = ("target_username" IS NULL)
  AND ("query" IS NULL OR length("query") BETWEEN 1 AND 512)
);

-- the matcher's read of the active query monitors (few rows of a large table)
CREATE INDEX "monitors_query_active_idx" ON "monitors"("is_active") WHERE "query" IS NOT NULL;

-- the query intake reads every committed tweet after its position in (xid, id) order
CREATE INDEX "social_tweets_xid_id_idx" ON "social_tweets"("xid", "id");

-- The per-target bookkeeping (poll_targets, x_stream_changes, the last-check freeze) is for
-- username monitors: a query monitor has no target and is left out.
CREATE OR REPLACE FUNCTION "poll_targets_monitor_sync"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') AND OLD."is_active" AND OLD."target_key" IS NOT NULL THEN
    PERFORM "poll_targets_touch"(OLD."target_key", -1);
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') AND NEW."target_key" IS NOT NULL THEN
    IF NEW."is_active" THEN
      PERFORM "poll_targets_touch"(NEW."target_key", 1);
    ELSIF TG_OP = 'INSERT' THEN
      PERFORM "poll_targets_touch"(NEW."target_key", 0);
    END IF;
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION "x_stream_changes_monitor"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') AND OLD."target_key" IS NOT NULL THEN
    INSERT INTO "x_stream_changes" ("target_key", "changed_at") VALUES (OLD."target_key", clock_timestamp())
    ON CONFLICT ("target_key") DO UPDATE SET "changed_at" = EXCLUDED."changed_at";
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') AND NEW."target_key" IS NOT NULL THEN
    INSERT INTO "x_stream_changes" ("target_key", "changed_at") VALUES (NEW."target_key", clock_timestamp())
    ON CONFLICT ("target_key") DO UPDATE SET "changed_at" = EXCLUDED."changed_at";
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION "x_stream_changes_account"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW."plan" IS DISTINCT FROM OLD."plan" OR NEW."trial_ends_at" IS DISTINCT FROM OLD."trial_ends_at" THEN
    INSERT INTO "x_stream_changes" ("target_key", "changed_at")
    SELECT DISTINCT m."target_key", clock_timestamp() FROM "monitors" m
    WHERE m."account_id" = NEW."id" AND m."target_key" IS NOT NULL
    ON CONFLICT ("target_key") DO UPDATE SET "changed_at" = EXCLUDED."changed_at";
  END IF;
  RETURN NULL;
END $$;

-- A committed tweet also wakes the query intake while an active query monitor exists:
-- "q <writing transaction's xid>" on the same channel (NOTIFY folds identical payloads, so one
-- per transaction). The intake reads every tweet after its position until it passes that xid.
CREATE OR REPLACE FUNCTION "social_tweets_notify"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  key TEXT;
BEGIN
  SELECT u."username_key" INTO key FROM "social_users" u WHERE u."id" = NEW."author_id";
  IF key IS NOT NULL AND EXISTS (
    SELECT 1 FROM "poll_targets" p WHERE p."target_key" = key AND p."pushed" AND p."active_monitors" > 0
  ) THEN
    PERFORM pg_notify('sts_tweets', pg_current_xact_id()::text || ' ' || key);
  END IF;
  IF EXISTS (SELECT 1 FROM "monitors" m WHERE m."query" IS NOT NULL AND m."is_active") THEN
    PERFORM pg_notify('sts_tweets', 'q ' || pg_current_xact_id()::text);
  END IF;
  RETURN NULL;
END $$;

-- A query monitor's last check is the query intake's: its cursor row is "?query" ("?" is never in
-- a username; @sts/db QUERY_CURSOR_KEY), frozen into the monitor as it is paused like a target's.
CREATE OR REPLACE FUNCTION "monitors_last_check_freeze"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  polled TIMESTAMPTZ;
  err TEXT;
BEGIN
  SELECT c."last_polled_at", c."last_error" INTO polled, err
  FROM "poll_cursors" c WHERE c."target_key" = coalesce(OLD."target_key", '?query');
  IF FOUND THEN
    NEW."last_check_at" := CASE WHEN polled >= OLD."created_at" THEN polled END;
    NEW."last_error" := err;
  END IF;
  RETURN NEW;
END $$;
