-- Issue 14: the poller reads the local store in commit-safe order. Every tweet records the
-- transaction that wrote it; the poller reads and advances only below the snapshot horizon
-- (pg_snapshot_xmin(pg_current_snapshot())), so a slow writer's tweet cannot appear behind its cursor.
-- Existing rows get xid 1 (older than any real transaction: they are all committed); a constant
-- default keeps the ADD COLUMN a catalog-only change, the real default is set right after.
ALTER TABLE "social_tweets" ADD COLUMN "xid" xid8 NOT NULL DEFAULT '1';
ALTER TABLE "social_tweets" ALTER COLUMN "xid" SET DEFAULT pg_current_xact_id();

-- the poller's since-query: one author's tweets after (xid, id)
CREATE INDEX "social_tweets_author_id_xid_id_idx" ON "social_tweets"("author_id", "xid", "id");

-- the poller's position in the source's own order: "l.<xid>.<tweet id>" (local) or "x.<tweet id>" (X)
ALTER TABLE "poll_cursors" ADD COLUMN "position" TEXT;
