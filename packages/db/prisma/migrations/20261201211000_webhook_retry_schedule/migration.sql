-- A webhook's delivery rules: its retry schedule (none: one attempt; standard: eight more on a
-- schedule) and its ordering (fifo: the next event goes only once the previous one is settled).
CREATE TYPE "WebhookRetryPolicy" AS ENUM ('none', 'standard');
CREATE TYPE "WebhookOrdering" AS ENUM ('unordered', 'fifo');

ALTER TABLE "webhook_endpoints"
  ADD COLUMN "retry_policy" "WebhookRetryPolicy" NOT NULL DEFAULT 'none',
  ADD COLUMN "ordering" "WebhookOrdering" NOT NULL DEFAULT 'unordered';

-- the last attempt of a schedule that never succeeded (not used in this transaction)
ALTER TYPE "DeliveryOutcome" ADD VALUE 'exhausted';

-- the attempt's number in its delivery's schedule (1: the first) and when the next one is due
ALTER TABLE "delivery_attempts"
  ADD COLUMN "attempt" INTEGER,
  ADD COLUMN "next_attempt_at" TIMESTAMPTZ(3);

-- Deliveries waiting for their next attempt (a retry) or, for a fifo webhook, for their turn.
-- The dispatcher claims due rows with FOR UPDATE SKIP LOCKED and a lease (claimed_until); the
-- attempt's row and the change to this one are written by one statement.
CREATE TABLE "webhook_deliveries_due" (
  "delivery_id" TEXT NOT NULL,
  "seq" BIGSERIAL NOT NULL,
  "monitor_id" UUID NOT NULL,
  "webhook_id" UUID NOT NULL,
  "event" TEXT NOT NULL,
  "hit_id" UUID,
  "payload" JSONB NOT NULL,
  "attempt" INTEGER NOT NULL,
  "due_at" TIMESTAMPTZ(3) NOT NULL,
  "claimed_until" TIMESTAMPTZ(3),
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "webhook_deliveries_due_pkey" PRIMARY KEY ("delivery_id")
);
CREATE INDEX "webhook_deliveries_due_due_at_idx" ON "webhook_deliveries_due"("due_at");
CREATE INDEX "webhook_deliveries_due_webhook_id_seq_idx" ON "webhook_deliveries_due"("webhook_id", "seq");
CREATE INDEX "webhook_deliveries_due_monitor_id_idx" ON "webhook_deliveries_due"("monitor_id");
ALTER TABLE "webhook_deliveries_due" ADD CONSTRAINT "webhook_deliveries_due_monitor_id_fkey"
  FOREIGN KEY ("monitor_id") REFERENCES "monitors"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "webhook_deliveries_due" ADD CONSTRAINT "webhook_deliveries_due_webhook_id_fkey"
  FOREIGN KEY ("webhook_id") REFERENCES "webhook_endpoints"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- the dispatcher's cached context holds the two new columns: a change to them is announced too
DROP TRIGGER "webhook_endpoints_context_notify" ON "webhook_endpoints";
CREATE TRIGGER "webhook_endpoints_context_notify"
AFTER UPDATE ON "webhook_endpoints"
FOR EACH ROW
WHEN (OLD."monitor_id" IS DISTINCT FROM NEW."monitor_id"
   OR OLD."url" IS DISTINCT FROM NEW."url"
   OR OLD."kind" IS DISTINCT FROM NEW."kind"
   OR OLD."secret_ciphertext" IS DISTINCT FROM NEW."secret_ciphertext"
   OR OLD."previous_secret_ciphertext" IS DISTINCT FROM NEW."previous_secret_ciphertext"
   OR OLD."previous_secret_until" IS DISTINCT FROM NEW."previous_secret_until"
   OR OLD."is_broken" IS DISTINCT FROM NEW."is_broken"
   OR OLD."broken_reason" IS DISTINCT FROM NEW."broken_reason"
   OR OLD."consecutive_failures" IS DISTINCT FROM NEW."consecutive_failures"
   OR OLD."first_failure_at" IS DISTINCT FROM NEW."first_failure_at"
   OR OLD."disabled_at" IS DISTINCT FROM NEW."disabled_at"
   OR OLD."retry_policy" IS DISTINCT FROM NEW."retry_policy"
   OR OLD."ordering" IS DISTINCT FROM NEW."ordering")
EXECUTE FUNCTION "monitor_context_notify"();
