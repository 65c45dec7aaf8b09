import { defineConfig } from 'prisma/config';

// Used by the Prisma CLI only (generate; migrate where the schema engine is available).
// Runtime connections go through the pg driver adapter in src/client.ts. Migrations need a
// session (an advisory lock): DATABASE_DIRECT_URL first, as the project's runner does.
export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  datasource: {
    url: process.env.DATABASE_DIRECT_URL || process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/sts',
  },
});
