/** Waiting in tests without timed assertions: poll a check, or let the event loop turn. */

/** Resolves when `check` returns a truthy value; rejects after `timeoutMs`. For async effects in tests. */
export async function waitFor<T>(
  check: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = 10_000,
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `waitFor timed out after ${timeoutMs} ms${lastError ? `: ${lastError instanceof Error ? lastError.message : JSON.stringify(lastError)}` : ''}`,
      );
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Resolves with what `list` returns once it holds at least `n` items; rejects after `timeoutMs`. */
export function waitForMany<T>(list: () => T[], n: number, timeoutMs = 10_000): Promise<T[]> {
  return waitFor(() => {
    const got = list();
    return got.length >= n ? got : null;
  }, timeoutMs);
}

/** Resolves after the event loop has turned a few times (lets pending I/O callbacks run). */
export async function turns(n = 5): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}
