-- Mail in two lanes: account mail (verification, reset, trial) is claimed before notices.
ALTER TABLE "mail_outbox" ADD COLUMN "lane" TEXT NOT NULL DEFAULT 'account';
CREATE INDEX "mail_outbox_lane_sent_at_next_attempt_at_idx" ON "mail_outbox"("lane", "sent_at", "next_attempt_at");

-- Notices (target status, endpoint health, quota) wait here, per account, until their digest is
-- built; `spec` is the notice's mail spec, `digested_at` set when a digest took it.
CREATE TABLE "mail_notices" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "dedup_key" TEXT NOT NULL,
    "account_id" UUID NOT NULL,
    "kind" TEXT NOT NULL,
    "spec" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "digested_at" TIMESTAMPTZ(3),

    CONSTRAINT "mail_notices_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "mail_notices_dedup_key_key" ON "mail_notices"("dedup_key");
CREATE INDEX "mail_notices_digested_at_account_id_created_at_idx" ON "mail_notices"("digested_at", "account_id", "created_at");

-- Watched accounts the source reported unavailable, not marked yet: confirmed after the flap
-- window unless too many of the source's watched accounts turned at once (the source failing).
CREATE TABLE "target_suspects" (
    "target_key" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "first_seen_at" TIMESTAMPTZ(3) NOT NULL,
    "last_seen_at" TIMESTAMPTZ(3) NOT NULL,
    "recheck_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "target_suspects_pkey" PRIMARY KEY ("target_key")
);
CREATE INDEX "target_suspects_recheck_at_idx" ON "target_suspects"("recheck_at");
