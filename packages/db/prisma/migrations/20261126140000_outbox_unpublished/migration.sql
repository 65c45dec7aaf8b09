-- The outbox relay's claim (`WHERE published_at IS NULL ORDER BY id LIMIT n FOR UPDATE SKIP LOCKED`)
-- reads the unpublished rows in id order. outbox_published_at_id_idx cannot give that order for
-- IS NULL (not an equality), so the planner walked outbox_pkey and filtered out every published
-- row still in the table (pruned hourly): 40,330 buffers for 200 rows behind 20,000 published
-- ones, growing with each round of a large fan-out. This partial index holds only the unpublished
-- rows, in id order: the same claim reads ~200 buffers (docs/benchmarks.md, "Fan-out").
CREATE INDEX "outbox_unpublished_idx" ON "outbox"("id") WHERE "published_at" IS NULL;
