-- One Starter trial per inbox (issue 29): grant keys lose the `+tag` of their local part, as
-- emailKey() now makes them. Of grants that fold to the same key the oldest stays.
DELETE FROM "trial_grants" g
USING "trial_grants" o
WHERE g."email_key" <> o."email_key"
  AND regexp_replace(g."email_key", '^([^+@]+)\+[^@]*@', '\1@') = regexp_replace(o."email_key", '^([^+@]+)\+[^@]*@', '\1@')
  AND (o."granted_at", o."email_key") < (g."granted_at", g."email_key");
UPDATE "trial_grants" SET "email_key" = regexp_replace("email_key", '^([^+@]+)\+[^@]*@', '\1@')
WHERE "email_key" ~ '^[^+@]+\+[^@]*@';
