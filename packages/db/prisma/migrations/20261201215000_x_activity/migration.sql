-- The X Activity API intake: the watched accounts X pushes events for.
--
-- x_activity_accounts: one row per target whose every wanted subscription X holds, written by the
-- XAA holder after each reconciliation (rows of targets no longer pushed are deleted). The X
-- account lookup looks a target with a profile.update.* row up for health only (its
-- X_HEALTH_LOOKUP_SECONDS), and the metrics count pushed against polled accounts.
CREATE TABLE "x_activity_accounts" (
    "target_key" TEXT NOT NULL,
    "user_id" TEXT NOT NULL,
    "event_types" TEXT[],
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),

    CONSTRAINT "x_activity_accounts_pkey" PRIMARY KEY ("target_key")
);

CREATE INDEX "x_activity_accounts_user_id_idx" ON "x_activity_accounts"("user_id");
