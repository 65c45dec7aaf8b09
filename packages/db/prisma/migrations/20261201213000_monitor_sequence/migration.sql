-- A sequence per monitor: every event of a monitor (monitor.hit, monitor.profile_changed,
-- monitor.target_unavailable) is numbered 1, 2, 3 … without gaps when it is recorded, in the
-- statement that records it, and keeps that number on every retry and redelivery
-- (docs/webhooks.md "Sequence"). The counter is a row of its own, not a column of `monitors`, so
-- numbering a fan-out fires none of the monitors' triggers and rewrites no monitor row.
CREATE TABLE "monitor_sequences" (
    "monitor_id" UUID NOT NULL,
    "last_sequence" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "monitor_sequences_pkey" PRIMARY KEY ("monitor_id")
);

-- Every recording updates its monitors' rows: room on each page keeps those updates HOT (no new
-- primary-key entry per update).
ALTER TABLE "monitor_sequences" SET (fillfactor = 50);

ALTER TABLE "monitor_sequences" ADD CONSTRAINT "monitor_sequences_monitor_id_fkey" FOREIGN KEY ("monitor_id") REFERENCES "monitors"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- A monitor's counter row is made with the monitor (and here for the monitors there are), so the
-- recording statement only ever updates it: a post to many new monitors pays no insert and no
-- foreign-key check per monitor while it records.
INSERT INTO "monitor_sequences" ("monitor_id") SELECT "id" FROM "monitors";

CREATE FUNCTION "monitor_sequences_init"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "monitor_sequences" ("monitor_id") VALUES (NEW."id") ON CONFLICT DO NOTHING;
  RETURN NULL;
END $$;

CREATE TRIGGER "monitors_sequence_init"
AFTER INSERT ON "monitors"
FOR EACH ROW
EXECUTE FUNCTION "monitor_sequences_init"();

-- null: recorded before events were numbered
ALTER TABLE "hits" ADD COLUMN "sequence" BIGINT;
ALTER TABLE "monitor_events" ADD COLUMN "sequence" BIGINT;

-- GET /api/v1/monitors/{id}/events?after=: one monitor's events after a sequence, in order
CREATE INDEX "hits_monitor_id_sequence_idx" ON "hits"("monitor_id", "sequence");
CREATE INDEX "monitor_events_monitor_id_sequence_idx" ON "monitor_events"("monitor_id", "sequence");

-- The recording statement numbers the hits its snapshot did not see yet and inserts them with
-- ON CONFLICT DO NOTHING. A hit of the same monitor and post committed meanwhile by another
-- transaction (two pollers recording one post at once) would leave its number unused: the
-- statement calls this with what it inserted and what it numbered, and fails as a serialization
-- failure (SQLSTATE 40001) when they differ, so nothing of it stays and the writer runs it again
-- on a fresh snapshot.
CREATE FUNCTION "sts_hits_sequenced"(inserted BIGINT, numbered BIGINT) RETURNS BOOLEAN LANGUAGE plpgsql AS $$
BEGIN
  IF inserted <> numbered THEN
    RAISE EXCEPTION 'hits numbered for a monitor were recorded meanwhile by another transaction'
      USING ERRCODE = '40001';
  END IF;
  RETURN true;
END $$;
