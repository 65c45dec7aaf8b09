-- Proof of coverage (docs/api.md, "Coverage"): the windows in which a target's source was not
-- read, why, and when a later read filled them. A monitor's covered_until is computed from these
-- rows, the target's cursor (poll_cursors.last_success_at) and the stream's position.
--
-- Who writes them:
-- - a poll that fails or that the X budget refuses opens one gap for its target (the poller's
--   coverage module; at most one open gap, "ends_at" NULL, per target);
-- - a successful read of the target (poll_cursors.last_success_at moves) closes and fills it
--   (trigger below): the read starts from the cursor, so it reads what the gap missed;
-- - the X stream's owed windows (x_stream_owed): a reconnect's window (reason 'gap') is a
--   'stream_down' gap ending when the window was owed; any other window (new rule, overflow, lost
--   posts) becomes a gap only when its backfill search is refused by the budget ('budget_refused')
--   or fails ('source_error'); the gap is filled when the backfill pays (deletes) the window.
-- Pruned by the maintenance step 30 days after "ends_at".
CREATE TABLE "coverage_gaps" (
    "id" BIGSERIAL NOT NULL,
    "target_key" TEXT NOT NULL,
    "starts_at" TIMESTAMPTZ(3) NOT NULL,
    "ends_at" TIMESTAMPTZ(3),
    "reason" TEXT NOT NULL,
    "filled_at" TIMESTAMPTZ(3),
    "owed_id" BIGINT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "coverage_gaps_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "coverage_gaps_reason_check" CHECK ("reason" IN ('stream_down', 'budget_refused', 'source_error'))
);

CREATE INDEX "coverage_gaps_target_key_starts_at_idx" ON "coverage_gaps"("target_key", "starts_at");
CREATE INDEX "coverage_gaps_ends_at_idx" ON "coverage_gaps"("ends_at");
CREATE UNIQUE INDEX "coverage_gaps_owed_id_key" ON "coverage_gaps"("owed_id");

-- A successful read of a target fills its open poll gap, up to the read's time.
CREATE FUNCTION "coverage_read"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE coverage_gaps SET ends_at = NEW.last_success_at, filled_at = NEW.last_success_at
  WHERE target_key = NEW.target_key AND ends_at IS NULL;
  RETURN NULL;
END $$;

CREATE TRIGGER "coverage_read_update"
AFTER UPDATE OF "last_success_at" ON "poll_cursors"
FOR EACH ROW WHEN (NEW.last_success_at IS DISTINCT FROM OLD.last_success_at AND NEW.last_success_at IS NOT NULL)
EXECUTE FUNCTION "coverage_read"();

CREATE TRIGGER "coverage_read_insert"
AFTER INSERT ON "poll_cursors"
FOR EACH ROW WHEN (NEW.last_success_at IS NOT NULL)
EXECUTE FUNCTION "coverage_read"();

-- The stream's owed windows: a reconnect's window is a gap from the start.
CREATE FUNCTION "coverage_owed_insert"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO coverage_gaps (target_key, starts_at, ends_at, reason, owed_id)
  SELECT lower(n.username), n.since, greatest(n.since, n.created_at), 'stream_down', n.id
  FROM owed_new n WHERE n.reason = 'gap';
  RETURN NULL;
END $$;

CREATE TRIGGER "coverage_owed_insert"
AFTER INSERT ON "x_stream_owed"
REFERENCING NEW TABLE AS owed_new
FOR EACH STATEMENT EXECUTE FUNCTION "coverage_owed_insert"();

-- A backfill search postponed (x_stream_owed.last_error written with a new due time): a window
-- not yet a gap becomes one, 'source_error' when the search failed (attempts counted) and
-- 'budget_refused' when the budget said to wait.
CREATE FUNCTION "coverage_owed_postponed"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO coverage_gaps (target_key, starts_at, ends_at, reason, owed_id)
  SELECT lower(n.username), n.since, greatest(n.since, n.created_at),
         CASE WHEN n.attempts > o.attempts THEN 'source_error' ELSE 'budget_refused' END, n.id
  FROM owed_new n JOIN owed_old o ON o.id = n.id
  WHERE n.last_error IS NOT NULL AND n.due_at IS DISTINCT FROM o.due_at
  ON CONFLICT ("owed_id") DO NOTHING;
  RETURN NULL;
END $$;

CREATE TRIGGER "coverage_owed_postponed"
AFTER UPDATE ON "x_stream_owed"
REFERENCING OLD TABLE AS owed_old NEW TABLE AS owed_new
FOR EACH STATEMENT EXECUTE FUNCTION "coverage_owed_postponed"();

-- A window paid (deleted once its search's posts are recorded): its gap is filled.
CREATE FUNCTION "coverage_owed_paid"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE coverage_gaps g SET filled_at = clock_timestamp()
  FROM owed_old o WHERE g.owed_id = o.id AND g.filled_at IS NULL;
  RETURN NULL;
END $$;

CREATE TRIGGER "coverage_owed_paid"
AFTER DELETE ON "x_stream_owed"
REFERENCING OLD TABLE AS owed_old
FOR EACH STATEMENT EXECUTE FUNCTION "coverage_owed_paid"();
