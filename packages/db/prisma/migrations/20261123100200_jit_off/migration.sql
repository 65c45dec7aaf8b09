-- Issue 15: no JIT compilation for this database's sessions. Every query of the system is a short,
-- index-bound OLTP statement; at 10 M tweets the planner's cost estimate for the search statement
-- (whose GIN branch is costed for a common term even when a One-Time Filter skips it) passes
-- jit_above_cost, and compiling it took 50-100 ms per query for a statement that runs in about 1 ms
-- (bench/store.ts). A setting of the database (ALTER DATABASE ... SET), so new sessions get it; a
-- role without the right to change it leaves a notice instead of failing the migration.
DO $$
BEGIN
  EXECUTE format('ALTER DATABASE %I SET jit = off', current_database());
EXCEPTION WHEN insufficient_privilege THEN
  RAISE NOTICE 'jit stays on: not allowed to ALTER DATABASE %', current_database();
END $$;
