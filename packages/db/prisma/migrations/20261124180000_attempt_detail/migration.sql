-- Attempt detail (issue 22): the request as sent (headers as [name, value] pairs, the exact body)
-- and the response (headers as [name, value] pairs in the order received, the first 4 KiB of the
-- body as bytes). Written by the dispatcher in the same insert as the attempt row; deleted with it
-- by the retention job (DELIVERY_LOG_RETENTION_DAYS). NULL for skipped attempts and rows from before.
ALTER TABLE "delivery_attempts" ADD COLUMN "request_headers" JSONB;
ALTER TABLE "delivery_attempts" ADD COLUMN "request_body" TEXT;
ALTER TABLE "delivery_attempts" ADD COLUMN "response_headers" JSONB;
ALTER TABLE "delivery_attempts" ADD COLUMN "response_body" BYTEA;
