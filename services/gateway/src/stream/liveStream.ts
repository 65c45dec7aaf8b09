/**
 * One open stream: every event comes from PostgreSQL, read in commit order (xid, id) below the
 * snapshot horizon (HitHistory.hitsAfter), each metered and written in order.
 *
 * Why it is exact: the high-water mark `hw` is the position of the last event sent, and each read
 * returns only hits after it and below the horizon; every hit at or before a returned one had
 * committed when it was read. So a hit is never skipped (one that commits late has an xid past
 * what was sent) and never sent twice (positions only grow). The `id:` of each event is `hw`
 * sealed (a cursor): resuming after it is the same read from the same position.
 *
 * Live hits from the feed only say that something was stored: each one starts a read (at most one
 * runs; more arrivals make it read again), and its payload, the webhook payload as published, is
 * held until the read returns its hit. While a held hit is not read yet, or the read saw a stored
 * hit past the horizon (an older transaction is still running), it reads again on a growing delay.
 */
import type { MonitorHitEvent } from '@sts/messaging';
import type { HitHistory, StoredHit } from '../adapters/hitHistory';
import type { LiveHit } from '../adapters/hitFeed';
import type { CursorCodec, StreamPosition } from '../domain/streamCursor';
import type { ResponseStream } from '@sts/http1';
import { closingEvent, hitEvent, type ClosingReason } from './sse';

const PAGE = 200;
/** live payloads held until their hit is read; past it, the read's own payload is sent */
const MAX_HELD = 1000;
/** a held hit no read returned for this long is forgotten (not this stream's, or deleted) */
const HOLD_MS = 5 * 60_000;
const RETRY_FIRST_MS = 25;
const RETRY_MAX_MS = 2000;
const RECENT_IDS = 2048;

/** meters one event: true when a unit was taken (the event may go out) */
type Meter = () => boolean | Promise<boolean>;

export interface LiveStreamDeps {
  accountId: string;
  monitors: ReadonlySet<string> | null;
  sink: ResponseStream;
  history: HitHistory;
  cursors: CursorCodec;
  meter: Meter;
  /** a backlog is written at the client's pace once this many bytes are unsent */
  paceBytes: number;
  onError: (err: unknown) => void;
  now?: () => number;
}

export class LiveStream {
  private reading = false;
  private again = false;
  /** the next read is a backlog (at open, after the feed was down): paced by the client's reads */
  private backlog = true;
  private readonly held = new Map<string, { payload: MonitorHitEvent; at: number }>();
  private readonly recent = new Set<string>();
  /** the last read left a stored hit past the horizon */
  private waiting = false;
  private retryMs = 0;
  private retry: NodeJS.Timeout | null = null;
  private readonly now: () => number;

  constructor(
    private readonly d: LiveStreamDeps,
    /** the last position the client has: its Last-Event-ID, or the horizon when it opened */
    private hw: StreamPosition,
  ) {
    this.now = d.now ?? Date.now;
    this.read();
  }

  get accountId(): string {
    return this.d.accountId;
  }

  get closed(): boolean {
    return this.d.sink.closed;
  }

  /** ends the stream with a final `stream.closed` whose `id:` is its position (resume from there) */
  close(reason: ClosingReason, message: string): void {
    const sink = this.d.sink;
    if (sink.closed) return;
    this.clearRetry();
    this.held.clear();
    sink.write(closingEvent(reason, message, this.d.cursors.encode(this.d.accountId, this.hw)));
    sink.end();
  }

  /** the feed was down: reads what was stored meanwhile, at the client's pace */
  catchUp(): void {
    this.backlog = true;
    this.read();
  }

  /** a live hit of this stream's account */
  offer(hit: LiveHit): void {
    if (this.d.sink.closed) return;
    if (this.d.monitors !== null && !this.d.monitors.has(hit.payload.monitor.id)) return;
    if (this.recent.has(hit.hitId)) return;
    if (this.held.size < MAX_HELD) this.held.set(hit.hitId, { payload: hit.payload, at: this.now() });
    this.read();
  }

  private read(): void {
    if (this.reading) {
      this.again = true;
      return;
    }
    this.reading = true;
    this.clearRetry();
    void this.readAll()
      .catch((err: unknown) => {
        this.d.onError(err);
        this.d.sink.end();
      })
      .finally(() => {
        this.reading = false;
        this.afterRead();
      });
  }

  /** reads and sends pages until a read finds nothing new and no live hit came meanwhile */
  private async readAll(): Promise<void> {
    do {
      this.again = false;
      const paced = this.backlog;
      this.backlog = false;
      for (;;) {
        if (this.d.sink.closed) return;
        const page = await this.d.history.hitsAfter(this.d.accountId, this.monitorList(), this.hw, PAGE);
        this.waiting = page.waiting;
        if (!(await this.sendAll(page.hits, paced))) return;
        if (page.hits.length < PAGE) break;
      }
    } while (this.again);
  }

  /** false when the stream is over */
  private async sendAll(rows: readonly StoredHit[], paced: boolean): Promise<boolean> {
    for (const r of rows) {
      const live = this.held.get(r.pos.hitId);
      this.held.delete(r.pos.hitId);
      if (!(await this.send(r.pos, live?.payload ?? r.payload))) return false;
      this.retryMs = 0;
      // a backlog is read at the client's pace, never piled up in memory; live hits are not
      // held back for it: a client that does not keep up passes the sink's bound and is cut
      if (paced && this.d.sink.unsentBytes > this.d.paceBytes) await this.d.sink.drained();
    }
    return true;
  }

  /** hits stored or announced but past the horizon yet: read again later, on a growing delay */
  private afterRead(): void {
    if (this.d.sink.closed) return this.held.clear();
    const expired = this.now() - HOLD_MS;
    for (const [id, h] of this.held) if (h.at < expired) this.held.delete(id);
    if ((this.held.size === 0 && !this.waiting) || this.retry !== null) return;
    this.retryMs = Math.min(RETRY_MAX_MS, this.retryMs === 0 ? RETRY_FIRST_MS : this.retryMs * 2);
    this.retry = setTimeout(() => {
      this.retry = null;
      this.read();
    }, this.retryMs);
    this.retry.unref();
  }

  private clearRetry(): void {
    if (this.retry === null) return;
    clearTimeout(this.retry);
    this.retry = null;
  }

  /** meters and writes one event; false when the stream is over */
  private async send(pos: StreamPosition, payload: MonitorHitEvent): Promise<boolean> {
    const sink = this.d.sink;
    if (sink.closed) return false;
    const m = this.d.meter();
    const ok = typeof m === 'boolean' ? m : await m;
    if (sink.closed) return false;
    if (!ok) {
      sink.write(closingEvent('quota_exceeded', 'the monthly quota is spent; the stream is closed'));
      sink.end();
      return false;
    }
    this.hw = pos;
    this.remember(pos.hitId);
    return sink.write(hitEvent(this.d.cursors.encode(this.d.accountId, pos), payload));
  }

  private remember(hitId: string): void {
    if (this.recent.size >= RECENT_IDS) this.recent.delete(this.recent.values().next().value!);
    this.recent.add(hitId);
  }

  private monitorList(): string[] | null {
    return this.d.monitors === null ? null : [...this.d.monitors];
  }
}
