/**
 * docker-compose.yml has no fallback secrets, and every service refuses
 * a known development value with NODE_ENV=production (exit code 2, naming the variable).
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { developmentSecretProblems, isDevelopmentSecret, PUBLISHED_DEV_SECRETS } from './devSecrets';
import { ConfigError, parseEnv } from './env';

const ROOT = path.resolve(__dirname, '../../..');
const schema = z.object({ INTERNAL_TOKEN: z.string().min(16), SESSION_SECRET: z.string().optional() });

describe('development secrets', () => {
  it('docker-compose.yml requires every secret from the environment, with no fallback', () => {
    const compose = readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8');
    for (const name of ['INTERNAL_TOKEN', 'SECRETS_ENCRYPTION_KEY', 'SESSION_SECRET']) {
      expect(compose).toMatch(new RegExp(`${name}: \\$\\{${name}:\\?[^}]+\\}`));
      expect(compose).not.toMatch(new RegExp(`${name}:-`));
    }
    for (const v of PUBLISHED_DEV_SECRETS) expect(compose).not.toContain(v);
  });

  it.each([
    ['the old compose token', 'dev-internal-token-change-me'],
    ['the all-zero key (base64)', 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA='],
    ['the all-zero key (hex)', '0'.repeat(64)],
    ['the old compose session secret', 'dev-session-secret-change-me-0123456789abcdef'],
    ['a placeholder', 'please-change-me-now-0123456789abcdef'],
  ])('refuses %s in production, naming the variable and not the value', (_name, value) => {
    expect(isDevelopmentSecret(value)).toBe(true);
    let caught: unknown;
    try {
      parseEnv(schema, { NODE_ENV: 'production', INTERNAL_TOKEN: value });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as Error).message).toContain('INTERNAL_TOKEN');
    expect((caught as Error).message).not.toContain(value);
  });

  it('accepts real secrets in production and development values outside it', () => {
    const real = randomBytes(32).toString('base64');
    expect(parseEnv(schema, { NODE_ENV: 'production', INTERNAL_TOKEN: real })).toEqual({ INTERNAL_TOKEN: real });
    expect(parseEnv(schema, { INTERNAL_TOKEN: 'dev-internal-token-change-me' }).INTERNAL_TOKEN).toBeDefined();
    // one item of a rotation list is enough to refuse
    expect(
      developmentSecretProblems({ NODE_ENV: 'production', SESSION_SECRET: `${real},${PUBLISHED_DEV_SECRETS[2]!}` }),
    ).toEqual([expect.stringContaining('SESSION_SECRET')]);
  });

  it('a service started with NODE_ENV=production and a development secret exits 2', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'services/read-api/src/main.ts')], {
      env: {
        PATH: process.env.PATH,
        NODE_ENV: 'production',
        INTERNAL_TOKEN: 'dev-internal-token-change-me',
        DATABASE_URL: 'postgresql://127.0.0.1:1/none',
        READ_API_PORT: '0',
        OPS_PORT: '0',
      },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr + r.stdout).toContain('INTERNAL_TOKEN is a known development value');
  });
});
