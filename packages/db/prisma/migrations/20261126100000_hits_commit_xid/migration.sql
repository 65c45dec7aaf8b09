-- The live hit stream resumes in commit order. Every hit records the transaction that wrote it
-- (pg_current_xact_id()); the stream reads hits in (xid, id) order only below the snapshot horizon
-- (pg_snapshot_xmin(pg_current_snapshot())), so a hit whose transaction commits late can never
-- land behind a cursor a client already holds (services/gateway, docs/api.md §8).
-- Existing rows get xid 1 (older than any real transaction: they are all committed); a constant
-- default keeps the ADD COLUMN a catalog-only change on the parent and every partition, the real
-- default is set right after (it applies to inserts through the parent and to the partitions
-- create_week_partition makes later with LIKE ... INCLUDING DEFAULTS).
ALTER TABLE "hits" ADD COLUMN "xid" xid8 NOT NULL DEFAULT '1';
ALTER TABLE "hits" ALTER COLUMN "xid" SET DEFAULT pg_current_xact_id();

-- the stream's read: one monitor's hits after (xid, id), on every partition
CREATE INDEX "hits_monitor_id_xid_id_idx" ON "hits"("monitor_id", "xid", "id");
