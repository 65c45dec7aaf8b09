-- A retry that falls due while its endpoint is disabled is held like a new event (not logged as
-- skipped): the held row keeps the number of the attempt that was due, so the release sends it as
-- that attempt (the delivery log counts on) and its schedule goes on from there. New events are
-- attempt 1.
ALTER TABLE "held_events" ADD COLUMN "attempt" INTEGER NOT NULL DEFAULT 1;
