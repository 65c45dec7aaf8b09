-- Endpoint health (issue 22): failures in a row, when the streak began, and when the endpoint was
-- disabled (5 in a row = "failing"; 3 days of only failures = disabled until a test webhook succeeds).
-- The dispatcher updates them as each delivery's outcome is decided; a success resets them.
ALTER TABLE "webhook_endpoints" ADD COLUMN "consecutive_failures" INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "webhook_endpoints" ADD COLUMN "first_failure_at" TIMESTAMPTZ(3);
ALTER TABLE "webhook_endpoints" ADD COLUMN "disabled_at" TIMESTAMPTZ(3);
