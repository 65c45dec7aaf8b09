import { randomBytes } from 'node:crypto';
import { KeyFilter } from './keyFilter';

const digest = () => randomBytes(32).toString('hex');

describe('KeyFilter', () => {
  it('answers maybe for every added hash and rarely for others', () => {
    const added = Array.from({ length: 20_000 }, digest);
    const f = KeyFilter.of(added, added.length);
    for (const h of added) expect(f.mightContain(h)).toBe(true);
    let falsePositives = 0;
    for (let i = 0; i < 100_000; i++) if (f.mightContain(digest())) falsePositives++;
    // sized for ≤ 0.01 %: 10 expected in 100,000; a broken probe would give thousands
    expect(falsePositives).toBeLessThan(60);
    expect(f.size).toBe(20_000);
  });

  it('stays free of false negatives past its expected size, and refuses what is not a digest', () => {
    const f = new KeyFilter(10);
    const added = Array.from({ length: 5000 }, digest);
    for (const h of added) f.add(h);
    for (const h of added) expect(f.mightContain(h)).toBe(true);
    expect(() => f.add('sk_live_not_a_hash')).toThrow(TypeError);
    expect(new KeyFilter(0).mightContain('abc')).toBe(false);
  });
});
