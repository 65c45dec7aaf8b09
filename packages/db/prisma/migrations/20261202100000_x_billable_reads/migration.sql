-- What X bills: one row per resource X charged for, per UTC day.
--
-- X's pay-per-use pricing bills each resource (a post read, a user read, an X Activity API event)
-- once per 24-hour UTC day however often it is read again that day. Every process that reads X
-- (poller replicas, read-api) inserts the resources it received in batches with ON CONFLICT DO
-- NOTHING: the primary key keeps the first read of the day, so replicas and restarts count a
-- resource once, and the metric x_billable_total moves only for the rows a batch inserted.
-- `account` is the watched X account the read was for (lower-case username, null when not known);
-- `read_at` the first read of the day (`npm run cli -- x cost --since` filters on it). Pruned by
-- the maintenance step after X_BILLABLE_RETENTION_DAYS (default 400) through the primary key.
CREATE TABLE "x_billable_reads" (
    "day" DATE NOT NULL,
    "resource" TEXT NOT NULL,
    "resource_id" TEXT NOT NULL,
    "account" TEXT,
    "read_at" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),

    CONSTRAINT "x_billable_reads_pkey" PRIMARY KEY ("day", "resource", "resource_id"),
    CONSTRAINT "x_billable_reads_resource_check" CHECK ("resource" IN ('post_read', 'user_read', 'activity_event'))
);
