import { isIP } from 'node:net';

/**
 * Whether the URL's host is a loopback address: `localhost`, 127.0.0.0/8, ::1 or an IPv4-mapped
 * 127.x. Decided from the literal only (no DNS): a name that merely resolves to 127.0.0.1 is not
 * trusted, since its resolution can change.
 */
export function isLoopbackUrl(url: string): boolean {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  if (isIP(host) === 6) return host === '::1' || /^::ffff:127\./.test(host) || /^::ffff:7f[0-9a-f]{2}:/.test(host);
  return false;
}
