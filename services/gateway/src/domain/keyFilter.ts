/**
 * A Bloom filter over API key hashes: "definitely not a live key" or "maybe". No false negatives:
 * every hash added answers maybe. Hand-written rather than a library because its input is
 * already a SHA-256 digest (uniform bits): the k bit positions are read straight from the hex
 * digest, where a general-purpose filter would hash each string again. A lookup reads at most
 * 64 characters and tests at most eight bits; an unknown key usually stops at the first probe.
 *
 * Sizing: m = 2^ceil(log2(n × 24)) bits (at least 2^16), k = 8 probes: at 24–48 bits per key the
 * false-positive rate is ≤ 0.01 %, so a flood of unknown keys reaches the database about once
 * per 10,000 keys. 100,000 keys take 512 KiB.
 */
const PROBES = 8;
const MIN_BITS = 1 << 16;
const BITS_PER_KEY = 24;

/** hex digit → value (anything else → 0: the caller checks the format where it matters) */
const HEX = new Uint8Array(128);
for (let c = 0; c < 16; c++) HEX['0123456789abcdef'.charCodeAt(c)] = c;

/** The digest's i-th probe value: a 32-bit slice of the 256-bit hex digest (no slicing, no parseInt). */
function probe(hash: string, i: number): number {
  let v = 0;
  for (let j = i * 8, end = j + 8; j < end; j++) v = (v << 4) | HEX[hash.charCodeAt(j) & 127]!;
  return v >>> 0;
}

export const isKeyHash = (hash: string): boolean => /^[0-9a-f]{64}$/.test(hash);

export class KeyFilter {
  private readonly bits: Uint32Array;
  private readonly mask: number;
  private count = 0;

  /** a filter sized for `expected` keys (it stays correct past that, only less selective) */
  constructor(expected: number) {
    let m = MIN_BITS;
    while (m < expected * BITS_PER_KEY && m < 2 ** 31) m *= 2;
    this.bits = new Uint32Array(m / 32);
    this.mask = m - 1;
  }

  static of(hashes: Iterable<string>, expected: number): KeyFilter {
    const f = new KeyFilter(expected);
    for (const h of hashes) f.add(h);
    return f;
  }

  /** adds a SHA-256 hex digest (lower case); anything else is refused with a TypeError */
  add(hash: string): void {
    if (!isKeyHash(hash)) throw new TypeError('KeyFilter.add: not a SHA-256 hex digest');
    for (let i = 0; i < PROBES; i++) {
      const bit = probe(hash, i) & this.mask;
      this.bits[bit >>> 5]! |= 1 << (bit & 31);
    }
    this.count++;
  }

  /** false: the hash was never added. true: it may have been. */
  mightContain(hash: string): boolean {
    if (hash.length !== 64) return false;
    for (let i = 0; i < PROBES; i++) {
      const bit = probe(hash, i) & this.mask;
      if ((this.bits[bit >>> 5]! & (1 << (bit & 31))) === 0) return false;
    }
    return true;
  }

  get size(): number {
    return this.count;
  }
}
