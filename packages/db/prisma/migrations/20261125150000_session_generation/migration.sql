-- The account's session generation (issue 29): each dashboard session carries the generation it
-- was made under, and a session whose generation is not the account's is refused when loaded. A
-- password change, a reset and "sign out everywhere" increment it, so a session re-saved by a
-- request in flight during the change stays dead.
ALTER TABLE "accounts" ADD COLUMN "session_generation" INTEGER NOT NULL DEFAULT 0;
