/**
 * The gateway and read-api as processes, as the end-to-end tests start them: the internal token
 * they share, read-api on a spare port, and the gateway's environment on a test database and Redis
 * prefix. Each test adds its own variables and stops what it started.
 */
import { spawnService, type ServiceProcess } from '@sts/testing';

/** INTERNAL_TOKEN of the test processes */
export const TOKEN = 'internal-token-for-tests-0123456789';

/** the ports a process logged once listening (`<name> listening`) */
export async function listening(p: ServiceProcess, line: RegExp): Promise<{ port: number; opsPort: number }> {
  return JSON.parse(await p.waitForLine(line)) as { port: number; opsPort: number };
}

/** read-api on `dbUrl` on a spare port; resolves once it listens */
export async function spawnReadApi(dbUrl: string): Promise<{ proc: ServiceProcess; url: string }> {
  const proc = spawnService('services/read-api/src/main.ts', {
    DATABASE_URL: dbUrl,
    INTERNAL_TOKEN: TOKEN,
    LOG_LEVEL: 'error',
    READ_API_PORT: '0',
  });
  const { port } = await listening(proc, /read-api listening/);
  return { proc, url: `http://127.0.0.1:${port}` };
}

/** the gateway's environment on a spare port; read-api at `readApiUrl`, else nowhere (port 1) */
export function gatewayEnv(o: {
  dbUrl: string;
  redis: { url: string; prefix: string };
  readApiUrl?: string;
}): Record<string, string> {
  return {
    DATABASE_URL: o.dbUrl,
    INTERNAL_TOKEN: TOKEN,
    LOG_LEVEL: 'error',
    GATEWAY_PORT: '0',
    READ_API_URL: o.readApiUrl ?? 'http://127.0.0.1:1',
    REDIS_URL: o.redis.url,
    REDIS_KEY_PREFIX: o.redis.prefix,
  };
}
