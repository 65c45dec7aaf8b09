-- A change to what the webhook dispatcher reads for a delivery (its monitor context: the monitor,
-- its account's plan and its webhook endpoint) is announced on the channel sts_monitor_context,
-- delivered at commit, so the dispatchers' caches of that context drop it:
--   "<monitor id>"    the monitor or its webhook endpoint changed, or was deleted
--   "a:<account id>"  the account's plan or trial end changed (every monitor of the account)
-- Only the columns the context holds count: the poller's bookkeeping on monitors (last check,
-- target status) announces nothing. PostgreSQL folds equal notifications of one transaction
-- into one.
CREATE FUNCTION "monitor_context_notify"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME = 'accounts' THEN
    PERFORM pg_notify('sts_monitor_context', 'a:' || NEW."id");
  ELSIF TG_TABLE_NAME = 'monitors' THEN
    PERFORM pg_notify('sts_monitor_context', (CASE WHEN TG_OP = 'DELETE' THEN OLD."id" ELSE NEW."id" END)::text);
  ELSE
    IF TG_OP <> 'INSERT' THEN PERFORM pg_notify('sts_monitor_context', OLD."monitor_id"::text); END IF;
    IF TG_OP <> 'DELETE' THEN PERFORM pg_notify('sts_monitor_context', NEW."monitor_id"::text); END IF;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER "accounts_context_notify"
AFTER UPDATE ON "accounts"
FOR EACH ROW
WHEN (OLD."plan" IS DISTINCT FROM NEW."plan" OR OLD."trial_ends_at" IS DISTINCT FROM NEW."trial_ends_at")
EXECUTE FUNCTION "monitor_context_notify"();

CREATE TRIGGER "monitors_context_notify"
AFTER UPDATE ON "monitors"
FOR EACH ROW
WHEN (OLD."account_id" IS DISTINCT FROM NEW."account_id"
   OR OLD."target_username" IS DISTINCT FROM NEW."target_username"
   OR OLD."keywords" IS DISTINCT FROM NEW."keywords"
   OR OLD."is_active" IS DISTINCT FROM NEW."is_active")
EXECUTE FUNCTION "monitor_context_notify"();

CREATE TRIGGER "monitors_context_notify_delete"
AFTER DELETE ON "monitors"
FOR EACH ROW EXECUTE FUNCTION "monitor_context_notify"();

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
   OR OLD."disabled_at" IS DISTINCT FROM NEW."disabled_at")
EXECUTE FUNCTION "monitor_context_notify"();

CREATE TRIGGER "webhook_endpoints_context_notify_insert_delete"
AFTER INSERT OR DELETE ON "webhook_endpoints"
FOR EACH ROW EXECUTE FUNCTION "monitor_context_notify"();
