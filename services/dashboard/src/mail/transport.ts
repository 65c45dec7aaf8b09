/**
 * The SMTP transport from SMTP_URL: `smtp://[user:password@]host[:port]` (STARTTLS is used
 * whenever the server offers it; `?requireTLS=true` refuses a server that does not) or
 * `smtps://…` (TLS from the first byte, port 465 by default). Credentials are percent-decoded.
 * Pooled: up to POOL_CONNECTIONS connections are kept open and reused, so a round's mails go out
 * side by side instead of one new SMTP conversation (connect, greeting, TLS) each.
 */
import nodemailer, { type Transporter } from 'nodemailer';

const POOL_CONNECTIONS = 5;

export function createSmtpTransport(smtpUrl: string): Transporter {
  const u = new URL(smtpUrl);
  const secure = u.protocol === 'smtps:';
  return nodemailer.createTransport({
    host: u.hostname,
    port: u.port ? Number(u.port) : secure ? 465 : 587,
    secure,
    pool: true,
    maxConnections: POOL_CONNECTIONS,
    requireTLS: u.searchParams.get('requireTLS') === 'true',
    auth: u.username ? { user: decodeURIComponent(u.username), pass: decodeURIComponent(u.password) } : undefined,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 20_000,
  });
}
