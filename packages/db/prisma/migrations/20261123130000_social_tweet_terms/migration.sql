-- Issue 15: search bounded by the page size at every term frequency. A posting table holds one
-- row per (lexeme, tweet) of social_tweets.search, keyed (term, created_at, tweet_id): the newest
-- tweets containing a term are the first rows of one backward index scan, so a page costs the same
-- for a term in 10 tweets or in 10 % of them (the GIN index cannot give its matches in time order:
-- a term of middling frequency had to fetch and sort thousands of rows). Kept in step with
-- social_tweets by the trigger below, for every writer (Prisma, raw SQL, cascades from
-- social_users); no foreign key (its cascade would need a second index on tweet_id: the trigger
-- deletes through the primary key instead). See packages/social/README.md.
CREATE TABLE "social_tweet_terms" (
    "term" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "tweet_id" BIGINT NOT NULL
);

-- every lexeme of every existing tweet (converted in place; the index is built after the load)
INSERT INTO "social_tweet_terms" ("term", "created_at", "tweet_id")
SELECT x.term, t."created_at", t."id"
FROM "social_tweets" t CROSS JOIN LATERAL unnest(tsvector_to_array(t."search")) AS x(term);

ALTER TABLE "social_tweet_terms" ADD CONSTRAINT "social_tweet_terms_pkey" PRIMARY KEY ("term", "created_at", "tweet_id");

-- search is a generated column: AFTER triggers see its value. tsvector lexemes are distinct.
CREATE FUNCTION "social_tweet_terms_sync"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    DELETE FROM "social_tweet_terms" p
    WHERE p."term" = ANY (tsvector_to_array(OLD."search")) AND p."created_at" = OLD."created_at" AND p."tweet_id" = OLD."id";
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO "social_tweet_terms" ("term", "created_at", "tweet_id")
    SELECT x.term, NEW."created_at", NEW."id" FROM unnest(tsvector_to_array(NEW."search")) AS x(term);
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER "social_tweets_terms_sync"
AFTER INSERT OR DELETE OR UPDATE OF "text", "created_at", "id" ON "social_tweets"
FOR EACH ROW EXECUTE FUNCTION "social_tweet_terms_sync"();

-- TRUNCATE fires no row triggers: empty the postings with the tweets
CREATE FUNCTION "social_tweet_terms_truncate"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  TRUNCATE "social_tweet_terms";
  RETURN NULL;
END $$;

CREATE TRIGGER "social_tweets_terms_truncate"
AFTER TRUNCATE ON "social_tweets"
FOR EACH STATEMENT EXECUTE FUNCTION "social_tweet_terms_truncate"();
