-- A deleted tweet of the local store notifies the pollers (after commit, on the tweets' channel)
-- when an active monitor of its author asks for deletions ('deletes' in monitors.events):
-- "d <target key> <tweet id>". The poller writes monitor.post_deleted, once per monitor and post.
CREATE FUNCTION "social_tweets_delete_notify"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  key TEXT;
BEGIN
  SELECT u."username_key" INTO key FROM "social_users" u WHERE u."id" = OLD."author_id";
  IF key IS NOT NULL AND EXISTS (
    SELECT 1 FROM "monitors" m WHERE m."target_key" = key AND m."is_active" AND 'deletes' = ANY (m."events")
  ) THEN
    PERFORM pg_notify('sts_tweets', 'd ' || key || ' ' || OLD."id"::text);
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER "social_tweets_delete_notify"
AFTER DELETE ON "social_tweets"
FOR EACH ROW EXECUTE FUNCTION "social_tweets_delete_notify"();
