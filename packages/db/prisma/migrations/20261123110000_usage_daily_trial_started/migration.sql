-- Per-day API call counts (the dashboard's month chart; the gateway writes them with usage_monthly)
-- and the moment an account started its one Starter trial.

-- AlterTable
ALTER TABLE "accounts" ADD COLUMN "trial_started_at" TIMESTAMPTZ(3);

-- CreateTable
CREATE TABLE "usage_daily" (
    "account_id" UUID NOT NULL,
    "day" DATE NOT NULL,
    "used" INTEGER NOT NULL DEFAULT 0,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "usage_daily_pkey" PRIMARY KEY ("account_id","day")
);

-- AddForeignKey
ALTER TABLE "usage_daily" ADD CONSTRAINT "usage_daily_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;
