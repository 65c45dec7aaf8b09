-- Key scopes (issue 30): 'read' (the default, what every existing key is: the read endpoints) or
-- 'manage' (also monitors, webhooks and redelivery through the API). The gateway reads it with the key.
CREATE TYPE "ApiKeyScope" AS ENUM ('read', 'manage');
ALTER TABLE "api_keys" ADD COLUMN "scope" "ApiKeyScope" NOT NULL DEFAULT 'read';
