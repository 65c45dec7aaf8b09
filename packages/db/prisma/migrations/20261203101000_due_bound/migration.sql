-- A webhook's deliveries waiting in webhook_deliveries_due (retries, fifo turns), counted by the
-- triggers below, and how many of them were dropped past the dispatcher's bound (WEBHOOK_HOLD_MAX)
-- since the webhook last had none waiting (0 again: the next drop tells the account again).
ALTER TABLE "webhook_endpoints"
  ADD COLUMN "due_count" INTEGER NOT NULL DEFAULT 0,
  ADD COLUMN "due_dropped" INTEGER NOT NULL DEFAULT 0;

UPDATE "webhook_endpoints" w SET "due_count" = c.n
FROM (SELECT "webhook_id", count(*)::int AS n FROM "webhook_deliveries_due" GROUP BY "webhook_id") c
WHERE w."id" = c."webhook_id";

-- the dispatcher's sweep: the webhooks past the bound
CREATE INDEX "webhook_endpoints_due_count_idx" ON "webhook_endpoints"("due_count");

-- Per statement (its rows grouped by webhook), so every statement that adds or removes due rows
-- keeps the count, a cascade from a deleted monitor included. A row's webhook never changes.
CREATE FUNCTION "webhook_deliveries_due_count"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    UPDATE "webhook_endpoints" w SET "due_count" = w."due_count" + c.n
    FROM (SELECT "webhook_id", count(*)::int AS n FROM added GROUP BY "webhook_id") c
    WHERE w."id" = c."webhook_id";
  ELSE
    UPDATE "webhook_endpoints" w
    SET "due_count" = greatest(w."due_count" - c.n, 0),
        "due_dropped" = CASE WHEN w."due_count" - c.n <= 0 THEN 0 ELSE w."due_dropped" END
    FROM (SELECT "webhook_id", count(*)::int AS n FROM removed GROUP BY "webhook_id") c
    WHERE w."id" = c."webhook_id";
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER "webhook_deliveries_due_counted_insert"
AFTER INSERT ON "webhook_deliveries_due"
REFERENCING NEW TABLE AS added
FOR EACH STATEMENT EXECUTE FUNCTION "webhook_deliveries_due_count"();

CREATE TRIGGER "webhook_deliveries_due_counted_delete"
AFTER DELETE ON "webhook_deliveries_due"
REFERENCING OLD TABLE AS removed
FOR EACH STATEMENT EXECUTE FUNCTION "webhook_deliveries_due_count"();
