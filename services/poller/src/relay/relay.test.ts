import { wakeableSleep } from './relay';

const after = (ms: number, value: string) => new Promise<string>((r) => setTimeout(() => r(value), ms).unref());

describe("the relay's wakeable sleep", () => {
  it('ends a running sleep at wake()', async () => {
    const nap = wakeableSleep();
    const slept = Promise.race([nap.sleep(60_000).then(() => 'woken'), after(5_000, 'still asleep')]);
    nap.wake();
    await expect(slept).resolves.toBe('woken');
  });

  it('keeps a wake-up that came while no sleep ran (a notification during a round) for the next sleep, once', async () => {
    const nap = wakeableSleep();
    nap.wake();
    nap.wake();
    await expect(Promise.race([nap.sleep(60_000).then(() => 'woken'), after(5_000, 'lost')])).resolves.toBe('woken');
    // the kept wake-up is spent: the next sleep runs its course
    await expect(Promise.race([nap.sleep(20).then(() => 'timer'), after(5_000, 'hung')])).resolves.toBe('timer');
    const last = nap.sleep(60_000);
    await expect(Promise.race([last.then(() => 'woken'), after(50, 'asleep')])).resolves.toBe('asleep');
    nap.wake();
    await last;
  });
});
