/**
 * One open stream: catch-up from PostgreSQL, then live hits, each metered and written in order.
 *
 * The seam: the stream is subscribed to live hits BEFORE it reads the database; live hits that
 * arrive meanwhile wait in `pending` (bounded: past it they are dropped and the database is read
 * again, since every published hit is already stored). After the read, pending hits already sent
 * (same hit id) or at/before the resume position are skipped. The `id:` of each event is the
 * high-water mark of what was sent (a cursor), so resuming after it sends only later hits.
 */
import type { MonitorHitEvent } from '@sts/messaging';
import type { HitHistory } from '../adapters/hitHistory';
import type { LiveHit } from '../adapters/hitFeed';
import { comparePositions, type CursorCodec, type StreamPosition } from '../domain/streamCursor';
import type { ResponseStream } from '@sts/http1';
import { closingEvent, hitEvent } from './sse';

const ZERO_UUID = '00000000-0000-0000-0000-000000000000';
const PAGE = 200;
/** live hits held while the database is read, and hits queued behind a slow quota admission */
const MAX_PENDING = 1000;
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
  /** catch-up waits for the client to take what was written once this many bytes are unsent */
  paceBytes: number;
  onError: (err: unknown) => void;
}

export class LiveStream {
  private catching = false;
  private again = false;
  private pending: LiveHit[] = [];
  /** the high-water mark of what was sent, or (before any) where reading starts */
  private hw: StreamPosition;
  private readonly recent = new Set<string>();
  private queue: Promise<void> = Promise.resolve();
  private queued = 0;

  constructor(
    private readonly d: LiveStreamDeps,
    /** the client's Last-Event-ID position, or null for live hits only from now */
    resumeFrom: StreamPosition | null,
    openedAt: number,
  ) {
    this.hw = resumeFrom ?? { at: openedAt, hitId: ZERO_UUID };
    if (resumeFrom !== null) this.catchUp();
  }

  get accountId(): string {
    return this.d.accountId;
  }

  get closed(): boolean {
    return this.d.sink.closed;
  }

  /** reads from the database what was stored after the high-water mark (at open, or after the feed was down) */
  catchUp(): void {
    if (this.catching) {
      this.again = true;
      return;
    }
    this.catching = true;
    this.enqueue(() => this.readStored());
  }

  /** a live hit of this stream's account */
  offer(hit: LiveHit): void {
    if (this.d.sink.closed) return;
    if (this.d.monitors !== null && !this.d.monitors.has(hit.payload.monitor.id)) return;
    if (this.catching) {
      if (this.pending.length < MAX_PENDING) this.pending.push(hit);
      else this.again = true;
      return;
    }
    if (this.queued >= MAX_PENDING) {
      // the quota store or the client cannot keep up: cut; the client resumes with its Last-Event-ID
      this.d.sink.write(closingEvent('slow_reader', 'the stream fell behind; reconnect with Last-Event-ID'));
      this.d.sink.end();
      return;
    }
    this.enqueue(() => this.sendLive(hit));
  }

  private enqueue(step: () => Promise<void>): void {
    this.queued++;
    this.queue = this.queue
      .then(() => (this.d.sink.closed ? undefined : step()))
      .catch((err: unknown) => {
        this.d.onError(err);
        this.d.sink.end();
      })
      .finally(() => this.queued--);
  }

  private async readStored(): Promise<void> {
    try {
      do {
        this.again = false;
        this.pending = [];
        const start = this.hw;
        for (;;) {
          const rows = await this.d.history.hitsAfter(this.d.accountId, this.monitorList(), this.hw, PAGE);
          for (const r of rows) {
            if (!(await this.send(r.pos, r.payload))) return;
            // stored hits are read at the client's pace, never piled up in memory
            if (this.d.sink.unsentBytes > this.d.paceBytes) await this.d.sink.drained();
          }
          if (rows.length < PAGE) break;
        }
        if (this.again) continue;
        for (const hit of this.pending) {
          const pos = positionOf(hit);
          if (comparePositions(pos, start) <= 0 || this.recent.has(hit.hitId)) continue;
          if (!(await this.send(pos, hit.payload))) return;
        }
      } while (this.again);
    } finally {
      this.pending = [];
      this.catching = false;
    }
  }

  private async sendLive(hit: LiveHit): Promise<void> {
    if (this.recent.has(hit.hitId)) return;
    await this.send(positionOf(hit), hit.payload);
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
    if (comparePositions(pos, this.hw) > 0) this.hw = pos;
    this.remember(pos.hitId);
    return sink.write(hitEvent(this.d.cursors.encode(this.d.accountId, this.hw), payload));
  }

  private remember(hitId: string): void {
    if (this.recent.size >= RECENT_IDS) this.recent.delete(this.recent.values().next().value!);
    this.recent.add(hitId);
  }

  private monitorList(): string[] | null {
    return this.d.monitors === null ? null : [...this.d.monitors];
  }
}

function positionOf(hit: LiveHit): StreamPosition {
  return { at: Date.parse(hit.payload.detectedAt), hitId: hit.hitId };
}
