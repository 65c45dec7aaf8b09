-- Issue 15: social ids stored as bigint so that every local-store query orders and compares them
-- natively (the API keeps strings). Converts existing rows in place; every id the writers accepted
-- is a decimal of at most 19 digits within the bigint range (isValidTweetId), so the casts hold.
-- The foreign key is dropped and re-added around the type change (both ends change type).
ALTER TABLE "social_tweets" DROP CONSTRAINT "social_tweets_author_id_fkey";

ALTER TABLE "social_users" ALTER COLUMN "id" TYPE BIGINT USING "id"::bigint;

-- rebuilds social_tweets_pkey and the (author_id, created_at, id) and (created_at, id) indexes on bigint
ALTER TABLE "social_tweets"
    ALTER COLUMN "id" TYPE BIGINT USING "id"::bigint,
    ALTER COLUMN "author_id" TYPE BIGINT USING "author_id"::bigint;

ALTER TABLE "social_tweets" ADD CONSTRAINT "social_tweets_author_id_fkey" FOREIGN KEY ("author_id") REFERENCES "social_users"("id") ON DELETE CASCADE ON UPDATE CASCADE;
