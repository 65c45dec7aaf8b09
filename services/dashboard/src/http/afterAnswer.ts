/**
 * Work a form answers before doing (sign-up, reset request): the answer is the same page either
 * way, so its time must not depend on whether the address has an account — and the slow part
 * (a password hash of 50–100 ms, more on a busy machine) would swing it far more than any
 * difference in the work. Invariants: a sign-in of an email waits for that email's pending work
 * in this process (sign up, then sign in right away, works); stop() waits for all of it (nothing
 * queued is dropped by a graceful stop); a failure is logged, never shown.
 */
import type { Logger } from '@sts/common';

export class AfterAnswer {
  private readonly pending = new Map<string, Promise<void>>();

  constructor(private readonly logger: Logger) {}

  /** runs `work` after the ones pending for `key`; the caller answers without waiting */
  run(key: string, what: string, work: () => Promise<void>): void {
    const before = this.pending.get(key) ?? Promise.resolve();
    const done: Promise<void> = before
      .then(work)
      .catch((err: unknown) => {
        this.logger.error(`${what} failed after the answer`, { err: err instanceof Error ? err.message : String(err) });
      })
      .finally(() => {
        if (this.pending.get(key) === done) this.pending.delete(key);
      });
    this.pending.set(key, done);
  }

  /** resolves when the work pending for `key` (if any) is done */
  settled(key: string): Promise<void> {
    return this.pending.get(key) ?? Promise.resolve();
  }

  async drain(): Promise<void> {
    while (this.pending.size > 0) await Promise.all(this.pending.values());
  }
}
