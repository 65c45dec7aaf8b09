-- Overlapped secret rotation (issue 22): the secret before the last rotation, kept until
-- "previous_secret_until" (or until the customer switches). Meanwhile webhook-signature carries
-- signatures by both secrets and X-Service-Signature stays on this one.
ALTER TABLE "webhook_endpoints" ADD COLUMN "previous_secret_ciphertext" TEXT;
ALTER TABLE "webhook_endpoints" ADD COLUMN "previous_secret_until" TIMESTAMPTZ(3);
