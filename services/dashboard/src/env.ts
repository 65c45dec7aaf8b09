import { z } from 'zod';
import { commonEnv, envFields, opsEnv, parseEnv } from '@sts/common';
import { encryptionKeyField, encryptionKeyListField } from '@sts/core';
import { socialEnv } from '@sts/social';
import { useCaseEnv } from '@sts/usecases';

const int = (fallback: number, min: number, max: number) => z.coerce.number().int().min(min).max(max).default(fallback);

/**
 * TRUST_PROXY is handed to express's `trust proxy`: "false" (default: the client address is the
 * socket's, X-Forwarded-* ignored), "true" (trust every hop — only behind a proxy that strips
 * them), a hop count ("1" behind one ingress/load balancer) or a comma list of addresses/subnets.
 * It decides req.secure (→ the Secure cookie flag) and req.ip (→ the sign-in throttle).
 */
const trustProxy = z
  .string()
  .default('false')
  .transform((v): boolean | number | string[] => {
    if (v === 'true') return true;
    if (v === 'false') return false;
    if (/^\d+$/.test(v)) return Number(v);
    return v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  });

export const dashboardEnvSchema = z.object({
  ...commonEnv,
  ...useCaseEnv,
  /** the monitor preview reads the target's last posts from the same source as the poller */
  ...socialEnv,
  /** the dashboard's public port */
  DASHBOARD_PORT: envFields.port(3001),
  /** the address it listens on */
  DASHBOARD_HOST: z.string().default('0.0.0.0'),
  /** OPS_PORT (health, readiness and metrics: internal only, never the public port), STOP_DEADLINE_MS */
  ...opsEnv(3101),
  /** signs the session cookie; a comma list rotates (first signs, all verify); each entry at least 32 characters */
  SESSION_SECRET: z
    .string()
    .transform((v) => v.split(',').map((s) => s.trim()))
    .pipe(
      z
        .array(
          z
            .string()
            .min(1, 'has an empty entry (a stray comma?)')
            .min(32, 'must be at least 32 characters in each comma-separated entry'),
        )
        .min(1),
    ),
  /** Redis key prefix of sessions, after REDIS_KEY_PREFIX */
  SESSION_KEY_PREFIX: z.string().default('dashboard:sess:'),
  /** idle lifetime of a session (rolling) */
  SESSION_TTL_SEC: int(8 * 3600, 60, 30 * 24 * 3600),
  /** "auto" (Secure when the request came over TLS, see TRUST_PROXY), "true" or "false" */
  COOKIE_SECURE: z.enum(['auto', 'true', 'false']).default('auto'),
  /** express's `trust proxy`: `false`, `true`, a hop count or a comma list of addresses (above) */
  TRUST_PROXY: trustProxy,
  /** sign-in attempts per email from one client address, and per client address, within SIGNIN_WINDOW_SEC (then 429) */
  SIGNIN_MAX_PER_EMAIL: int(10, 1, 10_000),
  /** sign-in attempts per email from all addresses together, per hour (bounds distributed guessing) */
  SIGNIN_MAX_PER_EMAIL_HOURLY: int(100, 1, 100_000),
  /** sign-in attempts from one client address within SIGNIN_WINDOW_SEC, whatever the email */
  SIGNIN_MAX_PER_ADDRESS: int(50, 1, 100_000),
  /** the window of the sign-in throttle, seconds */
  SIGNIN_WINDOW_SEC: int(900, 1, 86_400),
  /** the gateway's public address, shown in the API snippet on the keys page */
  API_PUBLIC_URL: envFields.url(['http', 'https']).default('http://127.0.0.1:3000'),
  /** webhook signing secrets are encrypted with it (same key as the dispatcher); optional until one is made */
  SECRETS_ENCRYPTION_KEY: encryptionKeyField().optional(),
  /** former SECRETS_ENCRYPTION_KEYs, comma-separated: they still decrypt (docs/security.md, key rotation) */
  SECRETS_ENCRYPTION_KEYS_OLD: encryptionKeyListField().optional(),
  /** save-time webhook URL rule (@sts/core checkWebhookUrlForSave): ports besides 443, and host
   * names exempt from the public-address rule (local development and tests only) */
  WEBHOOK_ALLOWED_PORTS: z.string().default(''),
  /** host names exempt from the public-address rule, comma-separated (local development and tests only) */
  WEBHOOK_ALLOW_PRIVATE_HOSTS: z.string().default(''),
  /** refresh period of the live delivery log and hit history, in the browser */
  LIVE_REFRESH_MS: int(5000, 500, 600_000),
  /** PostgreSQL connections of one process (k8s/README.md, "Database connection budget") */
  DB_POOL_SIZE: int(5, 1, 100),
  /** absolute lifetime of a session, whatever the activity (SESSION_TTL_SEC is the idle one) */
  SESSION_MAX_AGE_SEC: int(7 * 86_400, 300, 90 * 86_400),
  /** outgoing mail: smtp://[user:password@]host:port (STARTTLS when offered) or smtps://…; unset: mail waits in the outbox */
  SMTP_URL: envFields.url(['smtp', 'smtps']).optional(),
  /** the From of every mail */
  MAIL_FROM: z.string().min(3).default('Social Timeline <no-reply@localhost>'),
  /** the dashboard's public address: the links in mails */
  DASHBOARD_PUBLIC_URL: envFields.url(['http', 'https']).default('http://127.0.0.1:3001'),
  /** first retry of a failed mail; doubles per attempt up to MAIL_RETRY_MAX_MS */
  MAIL_RETRY_BASE_MS: int(2000, 10, 3_600_000),
  MAIL_RETRY_MAX_MS: int(3_600_000, 10, 86_400_000),
  /**
   * notices (watched accounts, endpoint health, quota) are gathered per account into one digest
   * per this many minutes (a fraction is allowed: 0.05 is 3 s); account mail never waits for it
   */
  MAIL_DIGEST_MINUTES: z.coerce.number().positive().max(1440).default(10),
  /** how often the mail outbox, the account-event relay, the digests and (×60) the trial check run */
  MAIL_POLL_MS: int(1000, 10, 60_000),
  /** password reset mails to one address per hour, whoever asks (more requests get the same answer, no mail) */
  RESET_MAX_PER_HOUR: int(3, 1, 100),
  /** sign-up verification mails resent per account per hour ("resend the link") */
  VERIFY_RESEND_MAX_PER_HOUR: int(5, 1, 1000),
});

export type DashboardEnv = z.infer<typeof dashboardEnvSchema>;

export function parseDashboardEnv(source: NodeJS.ProcessEnv = process.env): DashboardEnv {
  return parseEnv(dashboardEnvSchema, source);
}
