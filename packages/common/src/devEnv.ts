/**
 * Development settings for local tooling. `npm start` (scripts/start.mjs) generates the secrets a
 * developer has not set (INTERNAL_TOKEN, SECRETS_ENCRYPTION_KEY, DEMO_API_KEY) once into
 * `.tmp/dev.env` at the repository root. The admin CLI, the migrate CLI and the benches call
 * `loadDevEnv()` first, so a command run in a second terminal next to `npm start` uses the same
 * settings without exporting anything.
 *
 * Rules: a variable the environment sets always wins (an empty one counts as unset, as in
 * parseEnv); nothing is read when NODE_ENV is `production` (a missing secret must fail there, not
 * be filled from a developer file) or `test` (tests pass their own settings); a missing file is
 * not an error. Services do not call it: `npm start` hands them the settings, and in containers
 * the environment is the only source.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** `.tmp/dev.env` at the repository root (git ignores `.tmp/`). */
export const DEV_ENV_FILE = path.resolve(__dirname, '../../../.tmp/dev.env');

/** Parses `NAME=value` lines; blank lines and `#` comments are skipped, values are taken verbatim. */
export function parseDevEnv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#') || !line.includes('=')) continue;
    out[line.slice(0, line.indexOf('=')).trim()] = line.slice(line.indexOf('=') + 1);
  }
  return out;
}

/**
 * Fills the variables `env` does not set from `file`; returns the names it filled. See the file
 * comment for when it reads nothing.
 */
export function loadDevEnv(env: NodeJS.ProcessEnv = process.env, file = DEV_ENV_FILE): string[] {
  if (env.NODE_ENV === 'production' || env.NODE_ENV === 'test') return [];
  if (!existsSync(file)) return [];
  const filled: string[] = [];
  for (const [name, value] of Object.entries(parseDevEnv(readFileSync(file, 'utf8')))) {
    if (env[name] === undefined || env[name] === '') {
      env[name] = value;
      filled.push(name);
    }
  }
  return filled;
}
