-- The partitioned "hits" (20261125120000) replaced the table the hits_notify trigger of
-- 20261125091000 was on, and dropped it with the old table. The same statement-level trigger on
-- the partitioned table: PostgreSQL fires it once per insert statement on the parent, its
-- transition table holding the rows inserted into any partition.
CREATE TRIGGER "hits_notify"
AFTER INSERT ON "hits"
REFERENCING NEW TABLE AS new_hits
FOR EACH STATEMENT EXECUTE FUNCTION "hits_notify"();
