-- The dispatcher's claim of due deliveries walks the webhooks that have due rows and takes, per
-- webhook, its first rows by due time (an unordered webhook) or its head by (event_sequence, seq)
-- (a fifo webhook, webhook_deliveries_due_webhook_id_event_sequence_seq_idx): its cost follows
-- what it claims, not how many rows wait behind.
CREATE INDEX "webhook_deliveries_due_webhook_id_due_at_seq_idx"
  ON "webhook_deliveries_due"("webhook_id", "due_at", "seq");
