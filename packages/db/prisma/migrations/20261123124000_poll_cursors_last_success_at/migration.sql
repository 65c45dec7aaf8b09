-- Poll lag (poller metric poller_poll_lag_seconds): now − the target's last SUCCESSFUL poll.
-- last_polled_at also moves on a failed poll, so the success time gets its own column. Existing
-- cursors whose last poll succeeded (no last_error) start from their last poll.
ALTER TABLE "poll_cursors" ADD COLUMN "last_success_at" TIMESTAMPTZ(3);
UPDATE "poll_cursors" SET "last_success_at" = "last_polled_at" WHERE "last_error" IS NULL;
