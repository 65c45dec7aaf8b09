-- A query monitor's last check is the later of the query intake's cursor ("?query", @sts/db
-- QUERY_CURSOR_KEY) and its own X cursor ("?query:<monitor id>", queryCursorKeyOf), with that
-- cursor's error, as @sts/db withLastCheck shows an active one (a tie or no check: "?query").
-- Pausing freezes the same into the monitor's row; a username monitor freezes its target's cursor.
CREATE OR REPLACE FUNCTION "monitors_last_check_freeze"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  polled TIMESTAMPTZ;
  err TEXT;
BEGIN
  IF OLD."target_key" IS NOT NULL THEN
    SELECT c."last_polled_at", c."last_error" INTO polled, err
    FROM "poll_cursors" c WHERE c."target_key" = OLD."target_key";
  ELSE
    SELECT c."last_polled_at", c."last_error" INTO polled, err
    FROM "poll_cursors" c WHERE c."target_key" IN ('?query', '?query:' || OLD."id"::text)
    ORDER BY coalesce(c."last_polled_at", '-infinity') DESC, c."target_key" = '?query' DESC
    LIMIT 1;
  END IF;
  IF FOUND THEN
    NEW."last_check_at" := CASE WHEN polled >= OLD."created_at" THEN polled END;
    NEW."last_error" := err;
  END IF;
  RETURN NEW;
END $$;
