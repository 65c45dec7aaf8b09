import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';

/** The tick loop: one cycle per tick, never two at once. */
export function ticker(run: () => Promise<unknown>, tickMs: number, logger: Logger) {
  let timer: NodeJS.Timeout | undefined;
  let current: Promise<unknown> | undefined;
  let running = false;
  function schedule(): void {
    if (!running) return;
    timer = setTimeout(() => {
      current = run()
        .catch((err: unknown) => logger.error('poll cycle failed', { err: errorMessage(err) }))
        .finally(schedule);
    }, tickMs);
  }
  return {
    start() {
      if (running) return;
      running = true;
      schedule();
    },
    async stop() {
      running = false;
      clearTimeout(timer);
      await current;
    },
  };
}
