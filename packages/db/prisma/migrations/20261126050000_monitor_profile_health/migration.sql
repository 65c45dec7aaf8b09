-- Issue 31 §2 and §3: profile-change events and a target's health.
--
-- monitors.events: what a monitor sends, 'posts' (monitor.hit) and/or 'profile'
-- (monitor.profile_changed); the default is posts only.
ALTER TABLE "monitors" ADD COLUMN "events" TEXT[] DEFAULT ARRAY['posts']::TEXT[];
ALTER TABLE "monitors" ADD CONSTRAINT "monitors_events_check"
  CHECK ("events" <@ ARRAY['posts', 'profile']::TEXT[] AND cardinality("events") >= 1);

-- monitors.target_status: the watched account's health as the poller last saw it (a copy of
-- target_profiles.status, written with it; a monitor created or re-targeted takes its target's).
ALTER TABLE "monitors" ADD COLUMN "target_status" TEXT NOT NULL DEFAULT 'ok';
ALTER TABLE "monitors" ADD COLUMN "target_status_at" TIMESTAMPTZ(3);
ALTER TABLE "monitors" ADD CONSTRAINT "monitors_target_status_check"
  CHECK ("target_status" IN ('ok', 'suspended', 'protected', 'not_found', 'renamed'));

-- The local store's account flag: a suspended or protected account (X's states, for the demo
-- and the tests). A deleted account is a deleted row.
ALTER TABLE "social_users" ADD COLUMN "status" TEXT NOT NULL DEFAULT 'active';
ALTER TABLE "social_users" ADD CONSTRAINT "social_users_status_check"
  CHECK ("status" IN ('active', 'suspended', 'protected'));

-- The last profile the poller saw per target, and the target's health: what a profile change is
-- compared with, and what a change of status is told from (once per change).
CREATE TABLE "target_profiles" (
    "target_key" TEXT NOT NULL,
    "user_id" TEXT,
    "username" TEXT,
    "name" TEXT,
    "description" TEXT,
    "profile_image_url" TEXT,
    "verified" BOOLEAN,
    "status" TEXT NOT NULL DEFAULT 'ok',
    "status_changed_at" TIMESTAMPTZ(3),
    "checked_at" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),

    CONSTRAINT "target_profiles_pkey" PRIMARY KEY ("target_key")
);

-- Events that are not hits (monitor.profile_changed, monitor.target_unavailable), kept so a
-- delivery can be redelivered; delivery_attempts.hit_id names the row for these events.
CREATE TABLE "monitor_events" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "monitor_id" UUID NOT NULL,
    "kind" TEXT NOT NULL,
    "payload" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),

    CONSTRAINT "monitor_events_pkey" PRIMARY KEY ("id")
);
CREATE INDEX "monitor_events_monitor_id_created_at_idx" ON "monitor_events"("monitor_id", "created_at");
CREATE INDEX "monitor_events_created_at_idx" ON "monitor_events"("created_at");
ALTER TABLE "monitor_events" ADD CONSTRAINT "monitor_events_monitor_id_fkey"
  FOREIGN KEY ("monitor_id") REFERENCES "monitors"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- A monitor created or moved to another target shows that target's health.
CREATE FUNCTION "monitors_target_status_init"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' OR NEW."target_key" IS DISTINCT FROM OLD."target_key" THEN
    SELECT p."status", p."status_changed_at" INTO NEW."target_status", NEW."target_status_at"
    FROM "target_profiles" p WHERE p."target_key" = NEW."target_key";
    NEW."target_status" := coalesce(NEW."target_status", 'ok');
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER "monitors_target_status_init"
BEFORE INSERT OR UPDATE OF "target_key" ON "monitors"
FOR EACH ROW EXECUTE FUNCTION "monitors_target_status_init"();

-- The local store's profile push: an update of a watched account's profile or status, or its
-- deletion, notifies the pollers on the tweets' channel ("p <target key>", after commit), so a
-- change is seen at once without a LISTEN connection more.
CREATE FUNCTION "social_users_notify"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND NEW."username" IS NOT DISTINCT FROM OLD."username"
     AND NEW."name" IS NOT DISTINCT FROM OLD."name"
     AND NEW."description" IS NOT DISTINCT FROM OLD."description"
     AND NEW."profile_image_url" IS NOT DISTINCT FROM OLD."profile_image_url"
     AND NEW."verified" IS NOT DISTINCT FROM OLD."verified"
     AND NEW."status" IS NOT DISTINCT FROM OLD."status" THEN
    RETURN NULL;
  END IF;
  IF EXISTS (SELECT 1 FROM "poll_targets" p WHERE p."target_key" = OLD."username_key" AND p."active_monitors" > 0) THEN
    PERFORM pg_notify('sts_tweets', 'p ' || OLD."username_key");
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER "social_users_notify"
AFTER UPDATE OR DELETE ON "social_users"
FOR EACH ROW EXECUTE FUNCTION "social_users_notify"();
