/**
 * The block a client address belongs to, for the sign-in throttle: the /24 of an IPv4 address,
 * the /64 of an IPv6 one (one customer's LAN or one host's whole allocation: counting full IPv6
 * addresses would give one machine 2^64 of them). An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`,
 * as a dual-stack socket reports IPv4 clients) counts as its IPv4 address. Pure.
 */
import { isIP } from 'node:net';
import { parseIpv6 } from '@sts/core';

export function addressBlock(address: string): string {
  if (isIP(address) === 4) return `${address.split('.').slice(0, 3).join('.')}.0/24`;
  const groups = parseIpv6(address);
  // not an address (express gives one unless the socket is gone): its own block
  if (!groups) return `other:${address}`;
  const mapped = groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff;
  if (mapped) return `${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.0/24`;
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`;
}
