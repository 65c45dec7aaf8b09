-- Monitor rules (issue 22): post types a monitor leaves out and the languages it keeps. Empty
-- arrays are today's behaviour (every type, any language). Exclusion keywords live in
-- "keywords" as written ("-word", "-\"a phrase\"").
ALTER TABLE "monitors" ADD COLUMN "exclude_types" TEXT[] DEFAULT ARRAY[]::TEXT[];
ALTER TABLE "monitors" ADD COLUMN "langs" TEXT[] DEFAULT ARRAY[]::TEXT[];

-- The local store's X `referenced_tweets`: the post this one replies to, quotes or reposts.
-- No foreign key: a referenced post may be deleted, or live only upstream.
ALTER TABLE "social_tweets" ADD COLUMN "reply_to_id" BIGINT;
ALTER TABLE "social_tweets" ADD COLUMN "quote_of_id" BIGINT;
ALTER TABLE "social_tweets" ADD COLUMN "repost_of_id" BIGINT;
