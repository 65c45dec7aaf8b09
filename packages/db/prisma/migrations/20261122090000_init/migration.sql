-- CreateEnum
CREATE TYPE "Plan" AS ENUM ('free', 'starter');

-- CreateEnum
CREATE TYPE "WebhookKind" AS ENUM ('native', 'discord', 'slack');

-- CreateEnum
CREATE TYPE "DeliveryOutcome" AS ENUM ('delivered', 'failed', 'skipped');

-- CreateTable
CREATE TABLE "accounts" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "email" TEXT NOT NULL,
    "password_hash" TEXT,
    "plan" "Plan" NOT NULL DEFAULT 'free',
    "trial_ends_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "accounts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "api_keys" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "account_id" UUID NOT NULL,
    "name" TEXT NOT NULL DEFAULT 'default',
    "key_hash" CHAR(64) NOT NULL,
    "prefix" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_used_at" TIMESTAMPTZ(3),
    "revoked_at" TIMESTAMPTZ(3),

    CONSTRAINT "api_keys_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "monitors" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "account_id" UUID NOT NULL,
    "target_username" TEXT NOT NULL,
    "target_key" TEXT NOT NULL,
    "keywords" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "is_active" BOOLEAN NOT NULL DEFAULT true,
    "check_interval_sec" INTEGER NOT NULL DEFAULT 60,
    "last_check_at" TIMESTAMPTZ(3),
    "last_error" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "monitors_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "webhook_endpoints" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "monitor_id" UUID NOT NULL,
    "url" TEXT NOT NULL,
    "kind" "WebhookKind" NOT NULL DEFAULT 'native',
    "secret_ciphertext" TEXT NOT NULL,
    "is_broken" BOOLEAN NOT NULL DEFAULT false,
    "broken_reason" TEXT,
    "secret_rotated_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "webhook_endpoints_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "hits" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "monitor_id" UUID NOT NULL,
    "tweet_id" TEXT NOT NULL,
    "tweet_text" TEXT NOT NULL,
    "tweet_author_id" TEXT NOT NULL,
    "tweet_author_username" TEXT NOT NULL,
    "tweet_created_at" TIMESTAMPTZ(3) NOT NULL,
    "detected_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "hits_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "delivery_attempts" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "monitor_id" UUID NOT NULL,
    "hit_id" UUID,
    "event" TEXT NOT NULL,
    "delivery_id" TEXT NOT NULL,
    "url" TEXT NOT NULL,
    "outcome" "DeliveryOutcome" NOT NULL,
    "status_code" INTEGER,
    "latency_ms" INTEGER,
    "error" TEXT,
    "response_snippet" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "delivery_attempts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "outbox" (
    "id" BIGSERIAL NOT NULL,
    "routing_key" TEXT NOT NULL,
    "message_id" TEXT NOT NULL,
    "payload" JSONB NOT NULL,
    "headers" JSONB NOT NULL DEFAULT '{}',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "published_at" TIMESTAMPTZ(3),
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "last_error" TEXT,

    CONSTRAINT "outbox_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "usage_monthly" (
    "account_id" UUID NOT NULL,
    "period" TEXT NOT NULL,
    "used" INTEGER NOT NULL DEFAULT 0,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "usage_monthly_pkey" PRIMARY KEY ("account_id","period")
);

-- CreateTable
CREATE TABLE "social_users" (
    "id" TEXT NOT NULL,
    "username" TEXT NOT NULL,
    "username_key" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT,
    "followers_count" INTEGER NOT NULL DEFAULT 0,
    "following_count" INTEGER NOT NULL DEFAULT 0,
    "tweet_count" INTEGER NOT NULL DEFAULT 0,
    "verified" BOOLEAN NOT NULL DEFAULT false,
    "profile_image_url" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "social_users_pkey" PRIMARY KEY ("id")
);

-- CreateTable
-- "search" is a generated column (Prisma sees it as Unsupported("tsvector")).
CREATE TABLE "social_tweets" (
    "id" TEXT NOT NULL,
    "author_id" TEXT NOT NULL,
    "text" TEXT NOT NULL,
    "lang" TEXT,
    "like_count" INTEGER NOT NULL DEFAULT 0,
    "retweet_count" INTEGER NOT NULL DEFAULT 0,
    "reply_count" INTEGER NOT NULL DEFAULT 0,
    "quote_count" INTEGER NOT NULL DEFAULT 0,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "search" tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, "text")) STORED,

    CONSTRAINT "social_tweets_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "poll_cursors" (
    "target_key" TEXT NOT NULL,
    "last_tweet_id" TEXT,
    "last_tweet_at" TIMESTAMPTZ(3),
    "last_polled_at" TIMESTAMPTZ(3),
    "last_error" TEXT,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "poll_cursors_pkey" PRIMARY KEY ("target_key")
);

-- CreateIndex
CREATE UNIQUE INDEX "accounts_email_key" ON "accounts"("email");

-- CreateIndex
CREATE UNIQUE INDEX "api_keys_key_hash_key" ON "api_keys"("key_hash");

-- CreateIndex
CREATE UNIQUE INDEX "api_keys_prefix_key" ON "api_keys"("prefix");

-- CreateIndex
CREATE INDEX "api_keys_account_id_idx" ON "api_keys"("account_id");

-- CreateIndex
CREATE INDEX "monitors_account_id_created_at_idx" ON "monitors"("account_id", "created_at");

-- CreateIndex
CREATE INDEX "monitors_target_key_is_active_idx" ON "monitors"("target_key", "is_active");

-- CreateIndex
CREATE UNIQUE INDEX "webhook_endpoints_monitor_id_key" ON "webhook_endpoints"("monitor_id");

-- CreateIndex
CREATE INDEX "hits_monitor_id_detected_at_id_idx" ON "hits"("monitor_id", "detected_at" DESC, "id" DESC);

-- CreateIndex
CREATE UNIQUE INDEX "hits_monitor_id_tweet_id_key" ON "hits"("monitor_id", "tweet_id");

-- CreateIndex
CREATE INDEX "delivery_attempts_monitor_id_created_at_idx" ON "delivery_attempts"("monitor_id", "created_at" DESC);

-- CreateIndex
CREATE INDEX "delivery_attempts_delivery_id_idx" ON "delivery_attempts"("delivery_id");

-- CreateIndex
CREATE INDEX "delivery_attempts_hit_id_idx" ON "delivery_attempts"("hit_id");

-- CreateIndex
CREATE UNIQUE INDEX "outbox_message_id_key" ON "outbox"("message_id");

-- CreateIndex
CREATE INDEX "outbox_published_at_id_idx" ON "outbox"("published_at", "id");

-- CreateIndex
CREATE UNIQUE INDEX "social_users_username_key_key" ON "social_users"("username_key");

-- CreateIndex
CREATE INDEX "social_tweets_author_id_created_at_id_idx" ON "social_tweets"("author_id", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "social_tweets_created_at_id_idx" ON "social_tweets"("created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "social_tweets_search_idx" ON "social_tweets" USING GIN ("search");

-- AddForeignKey
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "monitors" ADD CONSTRAINT "monitors_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "webhook_endpoints" ADD CONSTRAINT "webhook_endpoints_monitor_id_fkey" FOREIGN KEY ("monitor_id") REFERENCES "monitors"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "hits" ADD CONSTRAINT "hits_monitor_id_fkey" FOREIGN KEY ("monitor_id") REFERENCES "monitors"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "delivery_attempts" ADD CONSTRAINT "delivery_attempts_monitor_id_fkey" FOREIGN KEY ("monitor_id") REFERENCES "monitors"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "delivery_attempts" ADD CONSTRAINT "delivery_attempts_hit_id_fkey" FOREIGN KEY ("hit_id") REFERENCES "hits"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "usage_monthly" ADD CONSTRAINT "usage_monthly_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "social_tweets" ADD CONSTRAINT "social_tweets_author_id_fkey" FOREIGN KEY ("author_id") REFERENCES "social_users"("id") ON DELETE CASCADE ON UPDATE CASCADE;
