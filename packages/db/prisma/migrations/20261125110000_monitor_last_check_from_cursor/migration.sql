-- A poll writes its target's rows only (poll_cursors, poll_targets), not each monitor of the
-- target: an active monitor's last check and error are read from its target's cursor
-- (@sts/db withLastCheck). A monitor being paused keeps what it showed then: this trigger copies
-- the target's cursor into the monitor's own last_check_at / last_error as it is paused (a
-- monitor created after the target's last poll has no check of its own yet).
CREATE FUNCTION "monitors_last_check_freeze"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  polled TIMESTAMPTZ;
  err TEXT;
BEGIN
  SELECT c."last_polled_at", c."last_error" INTO polled, err
  FROM "poll_cursors" c WHERE c."target_key" = OLD."target_key";
  IF FOUND THEN
    NEW."last_check_at" := CASE WHEN polled >= OLD."created_at" THEN polled END;
    NEW."last_error" := err;
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER "monitors_last_check_freeze"
BEFORE UPDATE OF "is_active" ON "monitors"
FOR EACH ROW WHEN (OLD."is_active" AND NOT NEW."is_active")
EXECUTE FUNCTION "monitors_last_check_freeze"();
