-- The gateways read the keys created since their last look every few seconds (their filter of
-- live keys, issue 29): an index keeps that a few index pages, whatever the number of keys.
CREATE INDEX "api_keys_created_at_idx" ON "api_keys"("created_at");
