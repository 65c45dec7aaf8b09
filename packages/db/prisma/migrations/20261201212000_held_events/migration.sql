-- Events held for a webhook endpoint that endpoint health disabled: kept here instead of being
-- logged as skipped, and sent oldest first (by the event's detectedAt, then id) when the endpoint
-- is enabled again, whatever order concurrent or redelivered messages were held in. Bounded
-- per endpoint by the dispatcher (WEBHOOK_HOLD_DAYS, WEBHOOK_HOLD_MAX): past a bound the oldest
-- rows are deleted and logged as skipped attempts. `payload` is the event as published (its
-- contract payload); `url` the endpoint's redacted URL when it was held (the log's column).
CREATE TABLE "held_events" (
    "id" BIGSERIAL NOT NULL,
    "endpoint_id" UUID NOT NULL,
    "monitor_id" UUID NOT NULL,
    "event" TEXT NOT NULL,
    "delivery_id" TEXT NOT NULL,
    "hit_id" UUID,
    "payload" JSONB NOT NULL,
    "url" TEXT NOT NULL,
    -- the event's detectedAt (every held kind has one): the release's order
    "detected_at" TIMESTAMPTZ(3) NOT NULL,
    "held_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    -- a release in progress: the row is being sent by one dispatcher until then (a lease)
    "claimed_until" TIMESTAMPTZ(3),

    CONSTRAINT "held_events_pkey" PRIMARY KEY ("id")
);

CREATE UNIQUE INDEX "held_events_delivery_id_key" ON "held_events"("delivery_id");
CREATE INDEX "held_events_endpoint_id_detected_at_id_idx" ON "held_events"("endpoint_id", "detected_at", "id");
CREATE INDEX "held_events_held_at_idx" ON "held_events"("held_at");

ALTER TABLE "held_events" ADD CONSTRAINT "held_events_endpoint_id_fkey" FOREIGN KEY ("endpoint_id") REFERENCES "webhook_endpoints"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- the count of held rows (kept by the statements that add and remove them) and how many of this
-- hold were dropped past a bound (reset when the hold is empty); shown on the monitor
ALTER TABLE "webhook_endpoints" ADD COLUMN "held_count" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN "held_dropped" INTEGER NOT NULL DEFAULT 0;

-- the release's claim: the endpoints with held events
CREATE INDEX "webhook_endpoints_held_idx" ON "webhook_endpoints"("id") WHERE "held_count" > 0;

-- The dispatchers' monitor cache holds whether an endpoint holds events (new events queue behind
-- held ones until the hold is empty): its start and its end are announced like the other
-- columns the context holds (migration 20261126180000_monitor_context_notify).
CREATE TRIGGER "webhook_endpoints_hold_notify"
AFTER UPDATE ON "webhook_endpoints"
FOR EACH ROW
WHEN ((OLD."held_count" > 0) IS DISTINCT FROM (NEW."held_count" > 0))
EXECUTE FUNCTION "monitor_context_notify"();
