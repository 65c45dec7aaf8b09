/**
 * Which addresses a webhook may be delivered to. Pure functions, no I/O: the HTTPS sender calls
 * `blockedReason()` on every address DNS returns (and on literal IP hosts) before it dials, so a
 * name that resolves (or re-resolves: DNS rebinding) to an internal address is never reached.
 *
 * Refused: unspecified, loopback, private (RFC 1918), CGNAT (100.64/10), link-local, multicast,
 * broadcast, reserved, benchmarking, documentation and protocol-assignment ranges, IPv6
 * unique-local, site-local, discard and Teredo; and every IPv6 form that embeds an IPv4 address
 * (IPv4-mapped ::ffff:0:0/96, IPv4-compatible ::/96, NAT64 64:ff9b::/96, 6to4 2002::/16) when the
 * embedded IPv4 address is refused. The local-use NAT64 prefix 64:ff9b:1::/48 is refused whole.
 *
 * ONE definition for both checks: the dispatcher's dial-time guard and the save-time check of a
 * webhook URL (`checkWebhookUrlForSave` in webhookUrl.ts). Moved here from the dispatcher.
 */
import { BlockList, isIP } from 'node:net';

const V4_RANGES: [string, number, string][] = [
  ['0.0.0.0', 8, 'unspecified ("this network")'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'carrier-grade NAT'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'IETF protocol assignments'],
  ['192.0.2.0', 24, 'documentation'],
  ['192.31.196.0', 24, 'AS112'],
  ['192.52.193.0', 24, 'AMT'],
  ['192.88.99.0', 24, '6to4 relay anycast'],
  ['192.168.0.0', 16, 'private'],
  ['192.175.48.0', 24, 'AS112'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  ['255.255.255.255', 32, 'broadcast'],
  ['240.0.0.0', 4, 'reserved'],
];

const V6_RANGES: [string, number, string][] = [
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['64:ff9b:1::', 48, 'local-use NAT64'],
  ['100::', 64, 'discard-only'],
  ['2001::', 23, 'IETF protocol assignments (Teredo, ORCHID, benchmarking)'],
  ['2001:db8::', 32, 'documentation'],
  ['3fff::', 20, 'documentation'],
  ['5f00::', 16, 'segment routing'],
  ['fc00::', 7, 'unique-local'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'site-local'],
  ['ff00::', 8, 'multicast'],
];

const v4List = new BlockList();
const v6List = new BlockList();
const v4Reasons: [BlockList, string][] = [];
const v6Reasons: [BlockList, string][] = [];
for (const [net, prefix, reason] of V4_RANGES) {
  v4List.addSubnet(net, prefix, 'ipv4');
  const one = new BlockList();
  one.addSubnet(net, prefix, 'ipv4');
  v4Reasons.push([one, reason]);
}
for (const [net, prefix, reason] of V6_RANGES) {
  v6List.addSubnet(net, prefix, 'ipv6');
  const one = new BlockList();
  one.addSubnet(net, prefix, 'ipv6');
  v6Reasons.push([one, reason]);
}

/** The 8 16-bit groups of an IPv6 address (zone id dropped, embedded dotted IPv4 accepted), or null. */
export function parseIpv6(address: string): number[] | null {
  let a = address.trim();
  if (a.startsWith('[') && a.endsWith(']')) a = a.slice(1, -1);
  const zone = a.indexOf('%');
  if (zone >= 0) a = a.slice(0, zone);
  if (isIP(a) !== 6) return null;
  let tail: number[] = [];
  const lastColon = a.lastIndexOf(':');
  const last = a.slice(lastColon + 1);
  if (last.includes('.')) {
    const o = last.split('.').map(Number) as [number, number, number, number];
    tail = [(o[0] << 8) | o[1], (o[2] << 8) | o[3]];
    a = `${a.slice(0, lastColon + 1)}0:0`;
  }
  const [head, rest] = a.includes('::') ? (a.split('::') as [string, string]) : [a, undefined];
  const h = head ? head.split(':').map((g) => parseInt(g, 16)) : [];
  const r = rest !== undefined && rest !== '' ? rest.split(':').map((g) => parseInt(g, 16)) : [];
  const groups = rest === undefined ? h : [...h, ...new Array<number>(8 - h.length - r.length).fill(0), ...r];
  if (groups.length !== 8) return null;
  if (tail.length) groups.splice(6, 2, ...tail);
  return groups;
}

function v4FromGroups(hi: number, lo: number): string {
  return `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
}

/** The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4), if any. */
export function embeddedIpv4(groups: readonly number[]): string | null {
  const g = groups as [number, number, number, number, number, number, number, number];
  const zero = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  // ::ffff:a.b.c.d (mapped) and ::ffff:0:a.b.c.d (SIIT translated)
  if (zero(0, 5) && g[5] === 0xffff) return v4FromGroups(g[6], g[7]);
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return v4FromGroups(g[6], g[7]);
  // ::a.b.c.d (deprecated IPv4-compatible); :: and ::1 are handled as IPv6
  if (zero(0, 6) && !(g[6] === 0 && g[7] <= 1)) return v4FromGroups(g[6], g[7]);
  // 64:ff9b::a.b.c.d (well-known NAT64 prefix)
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6)) return v4FromGroups(g[6], g[7]);
  // 2002:AABB:CCDD::/48 (6to4)
  if (g[0] === 0x2002) return v4FromGroups(g[1], g[2]);
  return null;
}

function v4Reason(ip: string): string | null {
  if (!v4List.check(ip, 'ipv4')) return null;
  for (const [list, reason] of v4Reasons) if (list.check(ip, 'ipv4')) return reason;
  return 'not public';
}

/**
 * Why a connection to `address` is refused, or null when it is a public unicast address.
 * Anything that is not an IP address at all is refused too.
 */
export function blockedReason(address: string): string | null {
  const kind = isIP(address);
  if (kind === 4) {
    const r = v4Reason(address);
    return r && `${address} is not a public address (${r})`;
  }
  const groups = parseIpv6(address);
  if (!groups) return `${address} is not an IP address`;
  const embedded = embeddedIpv4(groups);
  if (embedded) {
    const r = v4Reason(embedded);
    return r && `${address} embeds ${embedded}, not a public address (${r})`;
  }
  const normal = groups.map((x) => x.toString(16)).join(':');
  if (!v6List.check(normal, 'ipv6')) return null;
  for (const [list, reason] of v6Reasons)
    if (list.check(normal, 'ipv6')) return `${address} is not a public address (${reason})`;
  return `${address} is not a public address`;
}

/** A WEBHOOK_ALLOW_PRIVATE_HOSTS / WEBHOOK_ALLOWED_PORTS value that cannot be used. */
export class WebhookConfigError extends Error {
  override name = 'WebhookConfigError';
}

/** Host names exempted by WEBHOOK_ALLOW_PRIVATE_HOSTS, compared lower-case without a trailing dot. */
export function normalizeHostname(host: string): string {
  let h = host.trim().toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  return h.endsWith('.') ? h.slice(0, -1) : h;
}

/** An IP address literal, in any form the WHATWG URL parser turns into one (`2130706433`, `0x7f.1`, `[::1]`). */
export function isIpLiteral(host: string): boolean {
  const h = normalizeHostname(host);
  if (isIP(h) !== 0) return true;
  try {
    return isIP(normalizeHostname(new URL(`https://${h.includes(':') ? `[${h}]` : h}/`).hostname)) !== 0;
  } catch {
    return false;
  }
}

/**
 * WEBHOOK_ALLOW_PRIVATE_HOSTS takes host NAMES only (`localhost`, `receiver.internal`), never IP
 * addresses or ranges: an IP literal in the list is a configuration error, so nobody believes
 * `127.0.0.1` or `10.0.0.0/8` is exempted when it is not (and an exempted literal cannot open
 * the whole internal network to saved URLs).
 */
export function parseAllowPrivateHosts(hosts: readonly string[]): string[] {
  const out: string[] = [];
  for (const raw of hosts) {
    const h = normalizeHostname(raw);
    if (!h) continue;
    if (h.includes('/') || isIpLiteral(h)) {
      throw new WebhookConfigError(
        `WEBHOOK_ALLOW_PRIVATE_HOSTS takes host names only; ${JSON.stringify(raw.trim())} is an IP address or range`,
      );
    }
    out.push(h);
  }
  return out;
}

/** Whether a host is exempted by WEBHOOK_ALLOW_PRIVATE_HOSTS; throws WebhookConfigError on an IP literal in the list. */
export function createHostAllowList(hosts: readonly string[]): (host: string) => boolean {
  const set = new Set(parseAllowPrivateHosts(hosts));
  return (host) => set.size > 0 && set.has(normalizeHostname(host));
}
