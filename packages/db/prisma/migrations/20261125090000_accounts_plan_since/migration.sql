-- When the account's stored plan last changed (until the first change: its creation), for the
-- overview's "Starter since …". Existing rows take their creation time; the trigger keeps the column
-- in step for every writer (use-cases, admin CLI, raw SQL), in the transaction that changes the plan.
ALTER TABLE "accounts" ADD COLUMN "plan_since" TIMESTAMPTZ(3);
UPDATE "accounts" SET "plan_since" = "created_at";
ALTER TABLE "accounts" ALTER COLUMN "plan_since" SET NOT NULL;
ALTER TABLE "accounts" ALTER COLUMN "plan_since" SET DEFAULT CURRENT_TIMESTAMP;

CREATE FUNCTION "accounts_plan_since"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW."plan" IS DISTINCT FROM OLD."plan" THEN
    NEW."plan_since" := now();
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER "accounts_plan_since"
BEFORE UPDATE OF "plan" ON "accounts"
FOR EACH ROW EXECUTE FUNCTION "accounts_plan_since"();
