-- monitors.events may name 'deletes' (monitor.post_deleted: the watched account deleted a post),
-- besides 'posts' and 'profile'.
ALTER TABLE "monitors" DROP CONSTRAINT "monitors_events_check";
ALTER TABLE "monitors" ADD CONSTRAINT "monitors_events_check"
  CHECK ("events" <@ ARRAY['posts', 'profile', 'deletes']::TEXT[] AND cardinality("events") >= 1);
