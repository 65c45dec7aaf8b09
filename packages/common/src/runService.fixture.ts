/**
 * A service for the runService tests (runService.test.ts runs it as a child process). FIXTURE
 * selects the behaviour: ok, hang-start (waits on a "backend" through untilStopped),
 * hang-start-ignoring (waits without it), fail-start, slow-stop (stop never finishes),
 * fail-stop; FIXTURE_CHECK=failed makes its readiness check fail. NEEDED must be set (config).
 */
import { z } from 'zod';
import { parseEnv } from './env';
import { opsEnv, runService } from './runService';

const schema = z.object({
  ...opsEnv(0),
  NEEDED: z.string(),
  FIXTURE: z.enum(['ok', 'hang-start', 'hang-start-ignoring', 'fail-start', 'slow-stop', 'fail-stop']),
  FIXTURE_CHECK: z.enum(['ok', 'failed']).default('ok'),
});

runService({
  name: 'fixture',
  loadEnv: (source) => parseEnv(schema, source),
  async start(env, { untilStopped }) {
    process.stdout.write('{"message":"fixture building"}\n');
    if (env.FIXTURE === 'hang-start') await untilStopped(new Promise(() => undefined));
    if (env.FIXTURE === 'hang-start-ignoring') await new Promise((r) => setTimeout(r, 600_000));
    if (env.FIXTURE === 'fail-start') throw new Error('backend refused the connection');
    return {
      info: { port: 1234 },
      checks: {
        backend: () =>
          env.FIXTURE_CHECK === 'ok' ? Promise.resolve() : Promise.reject(new Error('db.internal:5432 refused')),
      },
      async stop() {
        if (env.FIXTURE === 'slow-stop') await new Promise((r) => setTimeout(r, 600_000));
        if (env.FIXTURE === 'fail-stop') throw new Error('could not flush');
        process.stdout.write('{"message":"fixture work finished"}\n');
      },
    };
  },
});
