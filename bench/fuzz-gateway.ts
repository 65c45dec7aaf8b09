/**
 * A long differential fuzz of the gateway's HTTP/1.1 request parser against llhttp (node:http):
 * `pnpm fuzz:gateway`. FUZZ_ITERATIONS cases (default 200000) from FUZZ_SEED (default: random,
 * printed), in rounds of 10000 with a new seed each (seed + round). Exits 1 on the first round
 * with a disagreement, printing the inputs (replay: FUZZ_SEED=<round seed> FUZZ_ITERATIONS=10000).
 */
import { fuzz } from '../packages/http1/test/differential';

async function main(): Promise<void> {
  const total = Number(process.env.FUZZ_ITERATIONS ?? 200_000);
  const seed = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
  const round = 10_000;
  console.log(`fuzz:gateway: ${total} cases from seed ${seed}`);
  const started = Date.now();
  let accepted = 0;
  let requests = 0;
  for (let done = 0, i = 0; done < total; done += round, i++) {
    const n = Math.min(round, total - done);
    const roundSeed = seed + i;
    const result = await fuzz(roundSeed, n);
    accepted += result.accepted;
    requests += result.requests;
    if (result.disagreements.length > 0) {
      for (const d of result.disagreements.slice(0, 20))
        console.log(
          `seed ${roundSeed}: ${d.reason}\n  input ${JSON.stringify(d.input)}\n  llhttp ${JSON.stringify(d.llhttp)}`,
        );
      console.log(`FAILED: ${result.disagreements.length} disagreements in round seed ${roundSeed}`);
      process.exit(1);
    }
    console.log(
      `${done + n} cases, ${accepted} taken by the gateway (${requests} requests compared), ${Math.round((Date.now() - started) / 1000)} s`,
    );
  }
  console.log(`fuzz:gateway OK: ${total} cases, no request the gateway took was framed differently by llhttp`);
}

void main();
