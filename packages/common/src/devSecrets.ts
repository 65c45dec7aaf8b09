/**
 * Development secrets must never run a production service. The values this repository ever
 * published as fallbacks (docker-compose.yml once did) and anything that looks like a
 * placeholder are refused when NODE_ENV is `production`: parseEnv reports them as a ConfigError,
 * so every service exits 2 naming the variable (the value itself is never printed).
 */

/** The variables that hold shared secrets. SESSION_SECRET may be a comma list (rotation). */
export const SECRET_VARIABLES = ['INTERNAL_TOKEN', 'SECRETS_ENCRYPTION_KEY', 'SESSION_SECRET'] as const;

/** Values published in this repository (the old docker-compose fallbacks); never valid in production. */
export const PUBLISHED_DEV_SECRETS: readonly string[] = [
  'dev-internal-token-change-me',
  'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=',
  'dev-session-secret-change-me-0123456789abcdef',
];

/** Whether one secret value is a known development value or a placeholder. */
export function isDevelopmentSecret(value: string): boolean {
  const v = value.trim();
  if (PUBLISHED_DEV_SECRETS.includes(v)) return true;
  if (/change-?me|placeholder|^dev-|^test-|^example/i.test(v)) return true;
  // one repeated character (000…, AAA…=, xxx…) or a key that decodes to one repeated byte
  if (/^(.)\1*=*$/.test(v)) return true;
  const bytes = /^[0-9a-f]{64}$/i.test(v) ? Buffer.from(v, 'hex') : Buffer.from(v, 'base64');
  return bytes.length >= 16 && bytes.every((b) => b === bytes[0]);
}

/** Problems (one per variable, never the value) when `source` is a production environment. */
export function developmentSecretProblems(source: NodeJS.ProcessEnv): string[] {
  if (source.NODE_ENV !== 'production') return [];
  const problems: string[] = [];
  for (const name of SECRET_VARIABLES) {
    const raw = source[name];
    if (!raw) continue;
    const values = name === 'SESSION_SECRET' ? raw.split(',') : [raw];
    if (values.some((v) => v.trim() !== '' && isDevelopmentSecret(v))) {
      problems.push(`${name} is a known development value or placeholder; NODE_ENV=production needs a real secret`);
    }
  }
  return problems;
}
