/**
 * The stream connection loop of the holder, following X's reconnect guidance
 * (domain/streamBackoff.ts): an established connection that drops is reconnected at once (unless
 * it lived less than `minHealthyMs`: then as a network error), network errors and stalls back off
 * linearly, HTTP errors (TooManyConnections included) exponentially from 5 s, other 429s from a
 * minute (never before X's reset), and a
 * call the shared budget refuses waits for the budget. A stall is `stallMs` (30 s: X's keep-alive comes every 20 s) without a
 * byte, keep-alives included: the connection is dropped and reconnected.
 */
import type { Logger } from '@sts/common';
import type { SocialTweet } from '@sts/social';
import { initialBackoff, nextDelay, type BackoffState, type DropKind } from './domain/streamBackoff';
import { XHttpError, type XStreamApi } from './xStreamApi';

export interface ConnectionOptions {
  api: XStreamApi;
  logger: Logger;
  /** no byte this long (X keeps alive every 20 s) */
  stallMs: number;
  /** a connection shorter than this that drops counts as a network error (default 10 s) */
  minHealthyMs?: number;
  /** a post and the ids of the rules it matched (X's `matching_rules`) */
  onTweet(tweet: SocialTweet, matchingRuleIds: string[]): void;
  onActivity(): void;
  /** minutes of X's replay (`backfill_minutes`) to ask for on the next connect; 0: none */
  backfillMinutes?(): number;
  /** the connection is up (with `replayMinutes` of X's replay asked): the holder owes the gap */
  onConnected(replayMinutes: number): void;
  onDropped(kind: DropKind | 'stall' | 'budget', message: string): void;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted || ms <= 0) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

interface Outcome {
  kind: DropKind | 'stall' | 'budget';
  message: string;
  retryAfterMs: number | null;
  established: boolean;
}

/** One connection, from connect to its end; never throws. */
async function connectOnce(options: ConnectionOptions, signal: AbortSignal): Promise<Outcome> {
  const conn = new AbortController();
  let stalled = false;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      stalled = true;
      conn.abort();
    }, options.stallMs);
  };
  let established = false;
  let since = 0;
  try {
    arm();
    const replayMinutes = options.backfillMinutes?.() ?? 0;
    const { closed } = await options.api.connect(
      {
        onTweet: (t, ids) => options.onTweet(t, ids),
        onActivity: () => {
          arm();
          options.onActivity();
        },
      },
      AbortSignal.any([signal, conn.signal]),
      replayMinutes,
    );
    established = true;
    since = Date.now();
    options.onConnected(replayMinutes);
    await closed;
    return { kind: 'dropped', message: 'the stream ended', retryAfterMs: null, established };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    if (stalled)
      return { kind: 'stall', message: `no byte for ${options.stallMs} ms`, retryAfterMs: null, established };
    if (err instanceof XHttpError) {
      if (err.gated) return { kind: 'budget', message, retryAfterMs: err.retryAfterMs, established };
      // TooManyConnections: our own previous connection X has not closed yet (a failover, a
      // stall), not a rate limit: HTTP back-off (5 s doubling), not the 429 one (a minute)
      const limited = err.status === 429 && err.connectionIssue === null;
      return {
        kind: limited ? 'rate_limited' : 'http',
        message,
        retryAfterMs: err.retryAfterMs,
        established,
      };
    }
    const healthy = established && Date.now() - since >= (options.minHealthyMs ?? 10_000);
    return { kind: healthy ? 'dropped' : 'network', message, retryAfterMs: null, established };
  } finally {
    clearTimeout(timer);
    conn.abort();
  }
}

/** Keeps a stream connection up until `signal` aborts. */
export async function runStreamConnection(options: ConnectionOptions, signal: AbortSignal): Promise<void> {
  let backoff: BackoffState = initialBackoff;
  while (!signal.aborted) {
    const outcome = await connectOnce(options, signal);
    if (signal.aborted) return;
    options.onDropped(outcome.kind, outcome.message);
    if (outcome.established) backoff = initialBackoff;
    let delayMs: number;
    if (outcome.kind === 'budget') delayMs = Math.max(1000, outcome.retryAfterMs ?? 1000);
    else {
      // a stall is a network problem: X's linear back-off (250 ms first)
      const kind: DropKind = outcome.kind === 'stall' ? 'network' : outcome.kind;
      const next = nextDelay(backoff, kind, outcome.retryAfterMs);
      backoff = next.state;
      delayMs = next.delayMs;
    }
    options.logger.warn('X stream disconnected', { reason: outcome.kind, err: outcome.message, retryInMs: delayMs });
    await sleep(delayMs, signal);
  }
}
