-- Issue 19 parts 1 and 4: a per-target schedule and the local store's push.
--
-- poll_targets holds one row per target (lower-cased username) ever watched: how many active
-- monitors watch it, when it is next due, and whether it is pushed (a Starter or trial watcher;
-- set by the poller, which knows the plans' intervals and the clock). A tick reads only the rows
-- with next_due_at <= now() through the index, whatever the number of monitors.
--
-- The triggers below keep the row in step in the very transactions that create, pause, resume,
-- delete monitors or change an account's plan or trial, for every writer (usecases, admin CLI,
-- raw SQL, cascades): a change sets next_due_at = now() ("re-evaluate at the next tick") and
-- stamps changed_at; the poller then polls the target or reschedules it at last poll + interval.
-- A target without active monitors is due at 9999-12-31 (never read by a tick; 'infinity' would
-- not map to a JavaScript Date).
CREATE TABLE "poll_targets" (
    "target_key" TEXT NOT NULL,
    "active_monitors" INTEGER NOT NULL DEFAULT 0,
    "next_due_at" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),
    "pushed" BOOLEAN NOT NULL DEFAULT false,
    "changed_at" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),

    CONSTRAINT "poll_targets_pkey" PRIMARY KEY ("target_key")
);

CREATE INDEX "poll_targets_next_due_at_idx" ON "poll_targets"("next_due_at");

-- existing targets: due at once (the first tick computes their real schedule)
INSERT INTO "poll_targets" ("target_key", "active_monitors", "next_due_at")
SELECT m."target_key", count(*) FILTER (WHERE m."is_active"),
       CASE WHEN bool_or(m."is_active") THEN now() ELSE '9999-12-31 00:00:00+00'::timestamptz END
FROM "monitors" m GROUP BY m."target_key";

-- one target's active-monitor count moves by delta; re-evaluated at the next tick
CREATE FUNCTION "poll_targets_touch"(key TEXT, delta INTEGER) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "poll_targets" AS p ("target_key", "active_monitors", "next_due_at", "changed_at")
  VALUES (key, greatest(delta, 0), CASE WHEN delta > 0 THEN now() ELSE '9999-12-31 00:00:00+00'::timestamptz END, clock_timestamp())
  ON CONFLICT ("target_key") DO UPDATE SET
    "active_monitors" = greatest(p."active_monitors" + delta, 0),
    "next_due_at" = CASE WHEN p."active_monitors" + delta > 0 THEN least(p."next_due_at", now())
                         ELSE '9999-12-31 00:00:00+00'::timestamptz END,
    "changed_at" = clock_timestamp();
END $$;

CREATE FUNCTION "poll_targets_monitor_sync"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') AND OLD."is_active" THEN
    PERFORM "poll_targets_touch"(OLD."target_key", -1);
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    IF NEW."is_active" THEN
      PERFORM "poll_targets_touch"(NEW."target_key", 1);
    ELSIF TG_OP = 'INSERT' THEN
      PERFORM "poll_targets_touch"(NEW."target_key", 0);
    END IF;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER "monitors_poll_targets_sync"
AFTER INSERT OR DELETE OR UPDATE OF "is_active", "target_key" ON "monitors"
FOR EACH ROW EXECUTE FUNCTION "poll_targets_monitor_sync"();

-- a plan or trial change re-evaluates every target the account watches
CREATE FUNCTION "poll_targets_account_sync"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW."plan" IS DISTINCT FROM OLD."plan" OR NEW."trial_ends_at" IS DISTINCT FROM OLD."trial_ends_at" THEN
    UPDATE "poll_targets" p SET "next_due_at" = least(p."next_due_at", now()), "changed_at" = clock_timestamp()
    WHERE p."active_monitors" > 0
      AND p."target_key" IN (SELECT m."target_key" FROM "monitors" m WHERE m."account_id" = NEW."id" AND m."is_active");
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER "accounts_poll_targets_sync"
AFTER UPDATE OF "plan", "trial_ends_at" ON "accounts"
FOR EACH ROW EXECUTE FUNCTION "poll_targets_account_sync"();

-- Part 1, push: a tweet of a pushed target notifies the pollers (delivered after commit; one
-- notification per author and transaction, NOTIFY folds identical payloads). The payload is
-- "<writing transaction's xid> <target key>": the poller polls again until its position passes it.
CREATE FUNCTION "social_tweets_notify"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  key TEXT;
BEGIN
  SELECT u."username_key" INTO key FROM "social_users" u WHERE u."id" = NEW."author_id";
  IF key IS NOT NULL AND EXISTS (
    SELECT 1 FROM "poll_targets" p WHERE p."target_key" = key AND p."pushed" AND p."active_monitors" > 0
  ) THEN
    PERFORM pg_notify('sts_tweets', pg_current_xact_id()::text || ' ' || key);
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER "social_tweets_notify"
AFTER INSERT ON "social_tweets"
FOR EACH ROW EXECUTE FUNCTION "social_tweets_notify"();
