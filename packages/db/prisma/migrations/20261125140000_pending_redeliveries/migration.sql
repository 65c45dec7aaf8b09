-- Redeliveries queued by "Recover" that the dispatcher has not handled yet (issue 29): recovery
-- queues each failed delivery at most once while one is pending. The dispatcher deletes the row
-- when it records an attempt of the delivery; a row older than an hour counts as lost.
CREATE TABLE "pending_redeliveries" (
    "delivery_id" TEXT NOT NULL,
    "account_id" UUID NOT NULL,
    "monitor_id" UUID NOT NULL,
    "queued_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "pending_redeliveries_pkey" PRIMARY KEY ("delivery_id")
);

CREATE INDEX "pending_redeliveries_monitor_id_idx" ON "pending_redeliveries"("monitor_id");

ALTER TABLE "pending_redeliveries" ADD CONSTRAINT "pending_redeliveries_monitor_id_fkey" FOREIGN KEY ("monitor_id") REFERENCES "monitors"("id") ON DELETE CASCADE ON UPDATE CASCADE;
