/**
 * `npm start` helper (scripts/start.mjs): gives the seeded demo account a dashboard password.
 * Usage: node --import tsx services/dashboard/src/demoLogin.ts <accountId>, with DATABASE_URL and
 * DEMO_DASHBOARD_PASSWORD in the environment. Goes through the use-cases' operator call, so the
 * password is hashed the same way as at sign-up.
 */
import { createDbClient } from '@sts/db';
import { createUseCases, planConfigFromEnv } from '@sts/usecases';

async function main(): Promise<void> {
  const accountId = process.argv[2];
  const password = process.env.DEMO_DASHBOARD_PASSWORD;
  if (!accountId || !password) throw new Error('usage: demoLogin.ts <accountId> (with DEMO_DASHBOARD_PASSWORD set)');
  const db = createDbClient({
    url: process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/sts',
    poolSize: 1,
  });
  try {
    const uc = createUseCases({ db, ...planConfigFromEnv(process.env) });
    await uc.admin.setPassword(accountId, password);
    const account = await uc.accounts.get(accountId);
    process.stdout.write(`${JSON.stringify({ email: account.email })}\n`);
  } finally {
    await db.$disconnect();
  }
}

main().catch((err: unknown) => {
  console.error(`demo login: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
