-- The X stream at scale: the holder's lease, the backfill windows still owed, and the targets
-- whose stream rules may have changed.
--
-- x_stream_lease: one row per stream; the replica named in "holder" holds the stream until
-- "expires_at" and renews it every sync. Taken only when expired (or already ours); "fence" grows
-- by one with every new holder. A plain row (no session lock): works through a transaction-mode
-- PgBouncer, and a holder cut off from PostgreSQL loses it when it expires, whatever its sockets do.
CREATE TABLE "x_stream_lease" (
    "name" TEXT NOT NULL,
    "holder" TEXT NOT NULL,
    "fence" BIGINT NOT NULL DEFAULT 1,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "x_stream_lease_pkey" PRIMARY KEY ("name")
);

-- x_stream_owed: posts of "username" created after "since" that no search has read yet (a gap of
-- the stream, a username new to the rules, a search the budget refused or that failed). Searched
-- from "due_at" on, oldest "since" first; a row is deleted once a search read its window.
CREATE TABLE "x_stream_owed" (
    "id" BIGSERIAL NOT NULL,
    "username" TEXT NOT NULL,
    "since" TIMESTAMPTZ(3) NOT NULL,
    "due_at" TIMESTAMPTZ(3) NOT NULL,
    "reason" TEXT NOT NULL,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "last_error" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),

    CONSTRAINT "x_stream_owed_pkey" PRIMARY KEY ("id")
);

CREATE INDEX "x_stream_owed_due_at_since_idx" ON "x_stream_owed"("due_at", "since");

-- x_stream_changes: one row per target, "changed_at" stamped by the triggers below in the very
-- transactions that create, pause, resume, delete, re-target or re-filter monitors or change an
-- account's plan or trial. The stream's rule sync reads the rows changed since its last look.
CREATE TABLE "x_stream_changes" (
    "target_key" TEXT NOT NULL,
    "changed_at" TIMESTAMPTZ(3) NOT NULL DEFAULT clock_timestamp(),

    CONSTRAINT "x_stream_changes_pkey" PRIMARY KEY ("target_key")
);

CREATE INDEX "x_stream_changes_changed_at_idx" ON "x_stream_changes"("changed_at");

CREATE FUNCTION "x_stream_changes_monitor"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    INSERT INTO "x_stream_changes" ("target_key", "changed_at") VALUES (OLD."target_key", clock_timestamp())
    ON CONFLICT ("target_key") DO UPDATE SET "changed_at" = EXCLUDED."changed_at";
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO "x_stream_changes" ("target_key", "changed_at") VALUES (NEW."target_key", clock_timestamp())
    ON CONFLICT ("target_key") DO UPDATE SET "changed_at" = EXCLUDED."changed_at";
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER "monitors_x_stream_changes"
AFTER INSERT OR DELETE OR UPDATE OF "is_active", "target_key", "exclude_types", "langs" ON "monitors"
FOR EACH ROW EXECUTE FUNCTION "x_stream_changes_monitor"();

CREATE FUNCTION "x_stream_changes_account"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW."plan" IS DISTINCT FROM OLD."plan" OR NEW."trial_ends_at" IS DISTINCT FROM OLD."trial_ends_at" THEN
    INSERT INTO "x_stream_changes" ("target_key", "changed_at")
    SELECT DISTINCT m."target_key", clock_timestamp() FROM "monitors" m WHERE m."account_id" = NEW."id"
    ON CONFLICT ("target_key") DO UPDATE SET "changed_at" = EXCLUDED."changed_at";
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER "accounts_x_stream_changes"
AFTER UPDATE OF "plan", "trial_ends_at" ON "accounts"
FOR EACH ROW EXECUTE FUNCTION "x_stream_changes_account"();
