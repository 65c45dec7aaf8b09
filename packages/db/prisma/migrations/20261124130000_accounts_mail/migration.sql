-- Issue 20: verified email addresses, single-use tokens (verification, password reset), the
-- Starter trial once per verified address, email notification preferences, account events
-- (once per event: the de-duplication key is the primary key) and the mail outbox.

-- AlterTable
ALTER TABLE "accounts" ADD COLUMN "email_verified_at" TIMESTAMPTZ(3),
ADD COLUMN "notify_quota" BOOLEAN NOT NULL DEFAULT true,
ADD COLUMN "notify_webhook" BOOLEAN NOT NULL DEFAULT true,
ADD COLUMN "notify_trial" BOOLEAN NOT NULL DEFAULT true,
ADD COLUMN "trial_ended_notified_at" TIMESTAMPTZ(3);

-- CreateTable
CREATE TABLE "email_tokens" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "account_id" UUID NOT NULL,
    "purpose" TEXT NOT NULL,
    "token_hash" CHAR(64) NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "used_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "email_tokens_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "trial_grants" (
    "email_key" TEXT NOT NULL,
    "account_id" UUID,
    "granted_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "trial_grants_pkey" PRIMARY KEY ("email_key")
);

-- CreateTable
CREATE TABLE "account_events" (
    "dedup_key" TEXT NOT NULL,
    "routing_key" TEXT NOT NULL,
    "account_id" UUID NOT NULL,
    "payload" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "published_at" TIMESTAMPTZ(3),
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "last_error" TEXT,

    CONSTRAINT "account_events_pkey" PRIMARY KEY ("dedup_key")
);

-- CreateTable
CREATE TABLE "mail_outbox" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "dedup_key" TEXT NOT NULL,
    "account_id" UUID,
    "kind" TEXT NOT NULL,
    "to_address" TEXT NOT NULL,
    "subject" TEXT NOT NULL,
    "text_body" TEXT NOT NULL,
    "html_body" TEXT NOT NULL,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_error" TEXT,
    "sent_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "mail_outbox_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "email_tokens_token_hash_key" ON "email_tokens"("token_hash");

-- CreateIndex
CREATE INDEX "email_tokens_account_id_purpose_idx" ON "email_tokens"("account_id", "purpose");

-- CreateIndex
CREATE INDEX "account_events_published_at_created_at_idx" ON "account_events"("published_at", "created_at");

-- CreateIndex
CREATE UNIQUE INDEX "mail_outbox_dedup_key_key" ON "mail_outbox"("dedup_key");

-- CreateIndex
CREATE INDEX "mail_outbox_sent_at_next_attempt_at_idx" ON "mail_outbox"("sent_at", "next_attempt_at");

-- AddForeignKey
ALTER TABLE "email_tokens" ADD CONSTRAINT "email_tokens_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;
