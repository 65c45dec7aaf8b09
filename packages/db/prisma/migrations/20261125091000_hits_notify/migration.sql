-- Recorded hits are announced on the channel sts_hits, delivered at commit: one notification per
-- (account, monitor) and statement, for at most 100 hits each (a payload stays far below
-- PostgreSQL's 8000 bytes):
--   {"account": "<account id>", "monitor": "<monitor id>", "hits": ["<hit id>", ...]}
-- For every writer of hits (the poller's modes, the stream, tests); `npm run cli -- listen` shows
-- them. A statement-level trigger: one function call per insert statement, not per row; the
-- transition table holds only the rows actually inserted (not those ON CONFLICT DO NOTHING skipped).
CREATE FUNCTION "hits_notify"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('sts_hits', json_build_object('account', g.account_id, 'monitor', g.monitor_id, 'hits', g.ids)::text)
  FROM (
    SELECT m."account_id", n."monitor_id", array_agg(n."id" ORDER BY n."id") AS ids
    FROM (
      SELECT h."id", h."monitor_id", (row_number() OVER (PARTITION BY h."monitor_id" ORDER BY h."id") - 1) / 100 AS chunk
      FROM new_hits h
    ) n
    JOIN "monitors" m ON m."id" = n."monitor_id"
    GROUP BY m."account_id", n."monitor_id", n.chunk
  ) g;
  RETURN NULL;
END $$;

CREATE TRIGGER "hits_notify"
AFTER INSERT ON "hits"
REFERENCING NEW TABLE AS new_hits
FOR EACH STATEMENT EXECUTE FUNCTION "hits_notify"();
