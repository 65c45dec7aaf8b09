/**
 * GET /api/v1/stream: admits a stream (plan, query, Last-Event-ID, monitors, per-account and
 * per-process bounds), opens it, fans live hits out to this process's streams, and keeps them
 * alive (a comment every heartbeat, which also renews their per-account slots in Redis).
 *
 * Metering: the call's own admitted unit pays for opening; every event takes one more unit of the
 * monthly quota (QuotaStore.chargeMonth: the month only, so a busy stream never rate-limits the
 * account's calls) before it is written; when none is left the stream ends with a `stream.closed` event.
 *
 * A stream is admitted for one key and one plan, so it ends (a final `stream.closed` naming the
 * reason) when either no longer holds: `keyRevoked()` (apikey.changed) ends a revoked key's streams
 * at once, and every RECHECK_MS each open stream's key is asked of the key store again, which
 * trusts an answer for at most 2 × KEY_CACHE_TTL_MS (≤ 4 s): a revocation without the event, or a
 * plan change (which has no event), ends its streams within 5 s. A stream also ends after
 * STREAM_MAX_LIFETIME_S; its final event's `id:` is where the client resumes.
 */
import { randomUUID } from 'node:crypto';
import { ApiError, MethodNotAllowedError, NotFoundError, ServiceUnavailableError, type Logger } from '@sts/common';
import type { PlanName, Plans } from '@sts/core';
import type { HttpRequest, HttpResponder } from '@sts/http1';
import type { HitHistory } from '../adapters/hitHistory';
import type { LiveHit } from '../adapters/hitFeed';
import type { KeyIdentity, KeyStore } from '../adapters/keys';
import type { QuotaStore } from '../adapters/leasedQuota';
import type { StreamSlots } from '../adapters/streamSlots';
import { createWindowClock } from '../domain/limits';
import type { CursorCodec, StreamPosition } from '../domain/streamCursor';
import { LiveStream } from './liveStream';
import { parseStreamQuery } from './query';
import { closingEvent, KEEP_ALIVE, PREAMBLE, type ClosingReason } from './sse';

export const STREAM_PATH = '/api/v1/stream';

/** how often open streams are checked for their age, key and plan (see the file's comment: ≤ 5 s) */
const RECHECK_MS = 1000;

type Ending = Extract<ClosingReason, 'key_revoked' | 'plan_changed' | 'max_lifetime'>;
const ENDING_MESSAGE: Record<Ending, string> = {
  key_revoked: 'the API key of this stream was revoked',
  plan_changed: "the account's plan changed; reconnect to stream under the new plan",
  max_lifetime: 'the stream reached its maximum life; reconnect with Last-Event-ID',
};

/** an admitted call to STREAM_PATH: its unit is settled by exactly one of refuse() or opened() */
export interface StreamCall {
  req: HttpRequest;
  res: HttpResponder;
  accountId: string;
  plan: PlanName;
  /** the SHA-256 of the call's API key: the stream ends when that key is revoked */
  keyHash: string;
  /** answers the error; the call's unit goes back */
  refuse(err: unknown): void;
  /** the stream is open: the call's unit is kept; returns the header lines of the 200 */
  opened(): string;
}

export interface StreamHubOptions {
  history: HitHistory;
  /** asked again for each open stream's key every RECHECK_MS */
  keys: Pick<KeyStore, 'lookup'>;
  slots: StreamSlots;
  quota: QuotaStore;
  cursors: CursorCodec;
  plans: Plans;
  logger: Logger;
  /** most open streams per account, by plan */
  perAccount: Record<PlanName, number>;
  /** most open streams on this process */
  maxStreams: number;
  heartbeatMs: number;
  /** STREAM_MAX_LIFETIME_S in ms: a stream ends this long after it opened */
  maxLifetimeMs: number;
  /** bytes a client may leave unread before it is cut */
  maxUnsentBytes: number;
  now?: () => number;
}

interface Entry {
  id: string;
  stream: LiveStream;
  keyHash: string;
  /** the plan it was admitted and is metered under */
  plan: PlanName;
  /** when it reaches its maximum life */
  endsAt: number;
}

export class StreamHub {
  private readonly byAccount = new Map<string, Set<Entry>>();
  private size = 0;
  private readonly windowAt = createWindowClock();
  private readonly now: () => number;
  private readonly timer: NodeJS.Timeout;
  private readonly recheckTimer: NodeJS.Timeout;
  private checking = false;
  private readonly sinks = new Set<{ write(d: string): boolean; end(): void }>();

  constructor(private readonly o: StreamHubOptions) {
    this.now = o.now ?? Date.now;
    this.timer = setInterval(() => this.heartbeat(), o.heartbeatMs);
    this.timer.unref();
    this.recheckTimer = setInterval(() => void this.recheck(), RECHECK_MS);
    this.recheckTimer.unref();
  }

  get openStreams(): number {
    return this.size;
  }

  handle(call: StreamCall): void {
    this.admit(call).then(
      (admitted) => {
        if (admitted !== null) this.open(call, admitted.id, admitted.from, admitted.monitors);
      },
      (err: unknown) => {
        if (!(err instanceof ApiError))
          this.o.logger.warn('stream refused: backend unavailable', {
            requestId: call.req.requestId,
            err: String(err),
          });
        call.refuse(
          err instanceof ApiError
            ? err
            : new ServiceUnavailableError('the stream is unavailable, try again shortly', 1),
        );
      },
    );
  }

  /** the checks, cheapest first; a refusal throws the ApiError answered to the client */
  private async admit(
    call: StreamCall,
  ): Promise<{ id: string; from: StreamPosition; monitors: Set<string> | null } | null> {
    const { req, accountId, plan } = call;
    if (req.method !== 'GET') throw new MethodNotAllowedError(req.method, STREAM_PATH, ['GET']);
    if (!this.o.plans[plan].liveWebhooks)
      throw new ApiError(403, 'PLAN_REQUIRED', 'the live hit stream needs the Starter plan (or an active trial)');
    const monitors = parseStreamQuery(req.target);
    const resumeFrom = this.resumePosition(accountId, req.headers['last-event-id']);
    if (monitors !== null) {
      const foreign = await this.o.history.foreignMonitors(accountId, monitors);
      if (foreign.length > 0) throw new NotFoundError('NOT_FOUND', `no monitor with id ${foreign[0]}`);
    }
    // a new stream starts before the oldest transaction still running: no hit committed from now is missed
    const from = resumeFrom ?? (await this.o.history.horizon());
    if (this.size >= this.o.maxStreams)
      throw new ApiError(
        503,
        'SERVICE_UNAVAILABLE',
        'this server holds as many streams as it can; retry shortly',
        {},
        { 'Retry-After': '5' },
      );
    const id = randomUUID();
    const limit = this.o.perAccount[plan];
    if (!(await this.o.slots.take(accountId, id, limit)))
      throw new ApiError(
        429,
        'TOO_MANY_STREAMS',
        `at most ${limit} open streams per account on this plan; close one first`,
        { limit },
        { 'Retry-After': String(Math.ceil(this.o.heartbeatMs / 1000)) },
      );
    if (call.res.closed) {
      void this.o.slots.release(accountId, id).catch(() => undefined);
      call.refuse(new ApiError(400, 'INVALID_REQUEST', 'the client went away'));
      return null;
    }
    return { id, from, monitors: monitors === null ? null : new Set(monitors) };
  }

  /** the position of the client's Last-Event-ID (null: none given); throws INVALID_LAST_EVENT_ID */
  private resumePosition(accountId: string, lastEventId: string | undefined): StreamPosition | null {
    if (lastEventId === undefined || lastEventId.trim() === '') return null;
    const from = this.o.cursors.decode(accountId, lastEventId.trim());
    if (from === null)
      throw new ApiError(
        400,
        'INVALID_LAST_EVENT_ID',
        'Last-Event-ID is not an event id of this stream for this account',
      );
    return from;
  }

  private open(call: StreamCall, id: string, from: StreamPosition, monitors: Set<string> | null): void {
    const { accountId } = call;
    const headers = call.opened();
    const sink = call.res.stream(
      200,
      `content-type: text/event-stream; charset=utf-8\r\ncache-control: no-store\r\nx-accel-buffering: no\r\n${headers}`,
      {
        maxUnsentBytes: this.o.maxUnsentBytes,
        onClose: () => {
          this.sinks.delete(sink);
          this.remove(accountId, id);
          void this.o.slots.release(accountId, id).catch(() => undefined);
        },
      },
    );
    if (sink.closed) return;
    this.sinks.add(sink);
    sink.write(PREAMBLE);
    const stream = new LiveStream(
      {
        accountId,
        monitors,
        sink,
        history: this.o.history,
        cursors: this.o.cursors,
        meter: () => this.meter(accountId, call.plan),
        paceBytes: this.o.maxUnsentBytes / 4,
        onError: (err) => this.o.logger.warn('stream failed', { requestId: call.req.requestId, err: String(err) }),
      },
      from,
    );
    const entry: Entry = {
      id,
      stream,
      keyHash: call.keyHash,
      plan: call.plan,
      endsAt: this.now() + this.o.maxLifetimeMs,
    };
    let set = this.byAccount.get(accountId);
    if (set === undefined) this.byAccount.set(accountId, (set = new Set()));
    set.add(entry);
    this.size++;
  }

  private remove(accountId: string, id: string): void {
    const set = this.byAccount.get(accountId);
    if (set === undefined) return;
    for (const e of set)
      if (e.id === id) {
        set.delete(e);
        this.size--;
        if (set.size === 0) this.byAccount.delete(accountId);
        return;
      }
  }

  /** one unit of the account's monthly quota for one event, none of its per-minute limit */
  private meter(accountId: string, plan: PlanName): Promise<boolean> {
    const win = this.windowAt(this.now());
    return this.o.quota.chargeMonth(accountId, win.period, win.minute, this.o.plans[plan].monthlyQuota);
  }

  /** a live hit from the feed */
  deliver(hit: LiveHit): void {
    const set = this.byAccount.get(hit.accountId);
    if (set !== undefined) for (const e of set) e.stream.offer(hit);
  }

  /** the feed was down: every stream reads what it may have missed from the database */
  resync(): void {
    for (const set of this.byAccount.values()) for (const e of set) e.stream.catchUp();
  }

  private heartbeat(): void {
    const renew: { accountId: string; streamId: string }[] = [];
    for (const sink of this.sinks) sink.write(KEEP_ALIVE);
    for (const [accountId, set] of this.byAccount) for (const e of set) renew.push({ accountId, streamId: e.id });
    this.o.slots
      .renew(renew)
      .catch((err: unknown) => this.o.logger.warn('stream slot renewal failed', { err: String(err) }));
  }

  /** a key was revoked (apikey.changed): its streams end now */
  keyRevoked(keyHash: string): void {
    for (const e of this.entries())
      if (e.keyHash === keyHash) e.stream.close('key_revoked', ENDING_MESSAGE.key_revoked);
  }

  /** a snapshot (ending a stream removes it from its set) */
  private entries(): Entry[] {
    const all: Entry[] = [];
    for (const set of this.byAccount.values()) all.push(...set);
    return all;
  }

  /** ends the streams past their life, then asks the key store again for each open stream's key */
  private async recheck(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      const now = this.now();
      const byKey = new Map<string, Entry[]>();
      for (const e of this.entries()) {
        if (now >= e.endsAt) e.stream.close('max_lifetime', ENDING_MESSAGE.max_lifetime);
        else {
          const list = byKey.get(e.keyHash);
          if (list === undefined) byKey.set(e.keyHash, [e]);
          else list.push(e);
        }
      }
      const failed = (await Promise.all([...byKey].map(([hash, list]) => this.recheckKey(hash, list)))).filter(
        (err) => err !== null,
      );
      // the key store's backends are down: the streams go on (their events are still metered)
      if (failed.length > 0)
        this.o.logger.warn('stream key re-check failed; streams kept', {
          keys: failed.length,
          err: failed[0] instanceof Error ? failed[0].message : 'key lookup failed',
        });
    } finally {
      this.checking = false;
    }
  }

  /** ends the streams of a key revoked or of an account whose plan changed; the lookup's error, or null */
  private async recheckKey(hash: string, list: readonly Entry[]): Promise<unknown> {
    let identity: KeyIdentity | null;
    try {
      identity = await this.o.keys.lookup(hash);
    } catch (err) {
      return err ?? new Error('key lookup failed');
    }
    for (const e of list) {
      if (identity === null) e.stream.close('key_revoked', ENDING_MESSAGE.key_revoked);
      else if (identity.plan !== e.plan) e.stream.close('plan_changed', ENDING_MESSAGE.plan_changed);
    }
    return null;
  }

  /** ends every stream with a final event (shutdown) */
  close(): void {
    clearInterval(this.timer);
    clearInterval(this.recheckTimer);
    for (const sink of [...this.sinks]) {
      sink.write(closingEvent('shutdown', 'the server is restarting; reconnect with Last-Event-ID'));
      sink.end();
    }
  }
}
