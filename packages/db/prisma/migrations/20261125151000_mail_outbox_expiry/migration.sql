-- Mail bodies do not outlive their use (issue 29): a sent mail's bodies are cleared (kind,
-- recipient, subject and times stay); a mail carrying a link is not sent, and its bodies are
-- cleared, once the link's token has expired (expires_at, NULL for mails without a link).
ALTER TABLE "mail_outbox" ADD COLUMN "expires_at" TIMESTAMPTZ(3);
UPDATE "mail_outbox" SET "text_body" = '', "html_body" = '' WHERE "sent_at" IS NOT NULL;
