-- Retention (webhook-dispatcher, DELIVERY_LOG_RETENTION_DAYS): the periodic job deletes attempts
-- older than the cutoff in small batches; this index lets each batch find them without a scan.
CREATE INDEX "delivery_attempts_created_at_idx" ON "delivery_attempts"("created_at");
