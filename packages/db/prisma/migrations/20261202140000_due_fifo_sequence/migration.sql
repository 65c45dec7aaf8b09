-- A fifo webhook's deliveries go in their monitor's sequence (the event's `sequence`), not in the
-- order the dispatchers happened to queue them (two replicas, or two messages of one prefetch,
-- finish preparing in any order). 0: an event without a number (recorded before events were
-- numbered); those go first, in the order they were queued (seq).
ALTER TABLE "webhook_deliveries_due" ADD COLUMN "event_sequence" BIGINT NOT NULL DEFAULT 0;
UPDATE "webhook_deliveries_due" SET "event_sequence" = COALESCE(("payload"->>'sequence')::bigint, 0);

-- a fifo webhook's head: its first row by (event_sequence, seq)
CREATE INDEX "webhook_deliveries_due_webhook_id_event_sequence_seq_idx"
  ON "webhook_deliveries_due"("webhook_id", "event_sequence", "seq");

-- a fifo webhook waits while one of its rows is claimed (in flight): the claimed rows of a webhook,
-- a handful at most
CREATE INDEX "webhook_deliveries_due_claimed_idx"
  ON "webhook_deliveries_due"("webhook_id") WHERE "claimed_until" IS NOT NULL;
