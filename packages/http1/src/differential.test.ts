/**
 * Differential fuzz of this package's request parser against llhttp (node:http): thousands of
 * generated and mutated requests, a fixed seed and one random seed per run (printed when it
 * fails, so the failure can be replayed with `FUZZ_SEED=<seed> pnpm fuzz:gateway`). Wherever the
 * two disagree ours must be the one refusing; it never takes a request llhttp frames
 * differently. Longer runs: `pnpm fuzz:gateway` (FUZZ_ITERATIONS).
 */
import { cases, differential, fuzz, type FuzzResult } from '../test/differential';

function report(seed: number, result: FuzzResult): string {
  return result.disagreements
    .slice(0, 5)
    .map((d) => `seed ${seed}: ${d.reason}\n  input ${JSON.stringify(d.input)}\n  llhttp ${JSON.stringify(d.llhttp)}`)
    .join('\n');
}

describe('http1 parser against llhttp', () => {
  it('takes the well-formed requests llhttp takes, framed the same way', async () => {
    const valid = [
      'GET /a?x=1 HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n',
      'POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: h\r\n\r\n',
      'POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3;a=b\r\nabc\r\n0\r\nX-T: 1\r\n\r\n',
      'GET /old HTTP/1.0\r\n\r\n',
    ];
    const result = await differential(valid);
    expect(result.disagreements).toEqual([]);
    expect(result.accepted).toBe(valid.length);
    expect(result.requests).toBe(5);
  });

  it('never takes a request llhttp would frame differently (fixed seed, then a random one)', async () => {
    const random = Math.floor(Math.random() * 2 ** 31);
    for (const [seed, count] of [
      [20261123, 2000],
      [random, 1000],
    ] as const) {
      const result = await fuzz(seed, count);
      if (result.disagreements.length > 0) throw new Error(report(seed, result));
      // the cases exercise acceptance too, not only refusals
      expect(result.accepted).toBeGreaterThan(count * 0.15);
    }
  }, 60_000);

  it('the generator is deterministic per seed', () => {
    expect(cases(42, 50)).toEqual(cases(42, 50));
    expect(cases(42, 50)).not.toEqual(cases(43, 50));
  });
});
