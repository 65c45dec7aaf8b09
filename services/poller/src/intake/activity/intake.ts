/**
 * The X Activity API intake: one replica of the fleet (the holder of the `x-activity` lease, the
 * filtered stream's election and failover) keeps X's subscriptions in step with the monitors and
 * holds the activity stream. Every `syncMs` it renews the lease and reads the watched accounts;
 * when they differ from the last round's (a monitor created, paused, deleted, renamed, its events
 * changed, a plan changed), or every `resyncMs` anyway, it reconciles the subscriptions
 * (@sts/x-activity) and records which accounts are pushed (`x_activity_accounts`). Monitor changes
 * between two syncs coalesce into one reconciliation.
 *
 * The stream: events go to `onEvent` in arrival order (duplicates by `event_uuid` dropped: a
 * replay overlaps what was seen). The stream's position is the last line end seen (an event or
 * a keep-alive): bytes of an unfinished line are not an event yet, so they move neither the
 * position nor the stall clock. A gap (a disconnect, a stall of `stallMs` without a line end while
 * X sends a keep-alive every 20 s, a failover) is recovered with `start_time` from the position
 * less `overlapMs`. A new holder (a restart, a failover) starts from the last byte whose
 * events the fleet recorded (saved each sync once the events before it are recorded), so it
 * replays seconds, not X's whole window, before live events. A gap longer than X replays
 * (`replayMs`), or no saved position, owes every pushed account a look (`owe`), so a change lost
 * in it is still found by the lookup, never lost. A lost lease or `stop()` drops the connection.
 */
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import type { ReconcileOutcome, SubscriptionReconciler, WatchedAccount, XActivityApi, XaaEvent } from '@sts/x-activity';
import { XActivityError } from '@sts/x-activity';
import { isBilledActivityEvent, type XBilling } from '@sts/social';
import type { ActivityIntakeMode } from '../../domain/activity';
import type { StreamElection } from '@sts/x-stream';
import type { ActivityMetrics } from './metrics';
import type { ActivityRepository } from './repository';

export interface ActivityIntakeOptions {
  mode: ActivityIntakeMode;
  election: Pick<StreamElection, 'check' | 'holds' | 'close'>;
  api: Pick<XActivityApi, 'connect'>;
  reconciler: Pick<SubscriptionReconciler, 'reconcile'>;
  repository: ActivityRepository;
  /** an event of a pushed account, with the targets watching it */
  onEvent(event: XaaEvent, targetKeys: readonly string[]): Promise<void>;
  logger: Logger;
  metrics: ActivityMetrics;
  /** the billed event types are counted as X bills them (x_billable_total{resource="activity_event"}) */
  billing?: Pick<XBilling, 'record'>;
  syncMs?: number;
  resyncMs?: number;
  stallMs?: number;
  replayMs?: number;
  overlapMs?: number;
  now?: () => number;
}

const SEEN_UUIDS = 10_000;

/** user id → the targets watching it, each once */
function targetsByUser(accounts: readonly { userId: string; targetKey: string }[]): Map<string, string[]> {
  const map = new Map<string, string[]>();
  for (const a of accounts) {
    const keys = map.get(a.userId) ?? [];
    if (!keys.includes(a.targetKey)) map.set(a.userId, [...keys, a.targetKey]);
  }
  return map;
}

export class ActivityIntake {
  private timer: NodeJS.Timeout | null = null;
  private round: Promise<void> | null = null;
  private stopped = true;
  private lastSignature: string | null = null;
  private lastReconcileAt = 0;
  /** user id → the pushed targets watching it (the last reconciliation's) */
  private byUser = new Map<string, string[]>();
  /** user id → the targets of the reconciliation under way (none between rounds) */
  private subscribing = new Map<string, string[]>();
  private connection: { abort: AbortController; lastLineAt: number } | null = null;
  /** the last line end of the last connection (null: none since this replica took the lease) */
  private aliveAt: number | null = null;
  private retryAt = 0;
  private failures = 0;
  /** X refused or failed the last reconciliation: the next waits until then */
  private reconcileAfter = 0;
  private unavailableLogged = false;
  private readonly seen = new Set<string>();
  /** events in arrival order: each waits for the one before */
  private chain: Promise<void> = Promise.resolve();
  /** the saving of the recorded position under way (one at a time), and the last one saved */
  private saving: Promise<void> | null = null;
  private savedMark = 0;

  constructor(private readonly o: ActivityIntakeOptions) {}

  private now(): number {
    return this.o.now?.() ?? Date.now();
  }

  start(): void {
    if (this.o.mode === 'off' || !this.stopped) return;
    this.stopped = false;
    this.timer = setInterval(() => void this.sync(), this.o.syncMs ?? 2000);
    void this.sync();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.round;
    this.disconnect();
    await this.chain;
    this.saveMark();
    await this.saving;
    await this.o.election.close();
  }

  /** one sync now (tests); the timer's rounds never overlap */
  sync(): Promise<void> {
    this.round ??= this.syncOnce()
      .catch((err: unknown) => {
        this.o.logger.warn('X activity sync failed', { err: errorMessage(err) });
      })
      .finally(() => {
        this.round = null;
      });
    return this.round;
  }

  private async syncOnce(): Promise<void> {
    if (this.stopped) return;
    if (!(await this.o.election.check())) {
      if (this.connection) this.o.logger.info('X activity lease lost: the stream is dropped');
      this.disconnect();
      this.aliveAt = null;
      this.lastSignature = null;
      return;
    }
    const accounts = await this.o.repository.watched(this.o.mode, new Date(this.now()));
    const signature = accounts.map((a) => `${a.targetKey}=${a.userId}:${a.types.join(',')}:${a.paying}`).join(';');
    const due = signature !== this.lastSignature || this.now() - this.lastReconcileAt >= this.resyncMs();
    if (due && this.now() >= this.reconcileAfter) await this.reconcileOrWait(accounts, signature);
    this.checkStall();
    this.saveMark();
    if (!this.connection && this.byUser.size > 0 && this.now() >= this.retryAt && this.o.election.holds())
      await this.connect();
  }

  private resyncMs(): number {
    return this.o.resyncMs ?? 600_000;
  }

  /**
   * X failing the subscription calls (a transient error) is retried after its reset or 30 s; X
   * refusing them (an app without XAA: 401, 403) after `resyncMs`, every account polled meanwhile.
   * Either is logged once until a reconciliation succeeds again.
   */
  private async reconcileOrWait(accounts: WatchedAccount[], signature: string): Promise<void> {
    try {
      await this.reconcile(accounts, signature);
      this.unavailableLogged = false;
    } catch (err) {
      if (!(err instanceof XActivityError)) throw err;
      const wait = err.transient ? (err.retryAfterMs ?? 30_000) : this.resyncMs();
      this.reconcileAfter = this.now() + wait;
      if (!this.unavailableLogged)
        this.o.logger.warn('X Activity API unavailable: its accounts stay polled until it answers', {
          err: errorMessage(err),
          retryInMs: wait,
        });
      this.unavailableLogged = true;
      if (err.transient) return;
      this.byUser = new Map();
      this.disconnect();
      await this.o.repository.savePushed([]);
      this.o.metrics.state(0, 0, accounts.length);
    }
  }

  private async reconcile(accounts: WatchedAccount[], signature: string): Promise<void> {
    // X delivers on a subscription as soon as it answers its creation, before the round ends:
    // an account being subscribed takes its events from the start
    this.subscribing = targetsByUser(accounts);
    const outcome = await this.o.reconciler.reconcile(accounts).finally(() => {
      this.subscribing = new Map();
    });
    this.lastReconcileAt = this.now();
    // an unfinished round is retried at the next sync
    this.lastSignature = outcome.complete ? signature : null;
    this.byUser = targetsByUser(outcome.pushed);
    await this.o.repository.savePushed(outcome.pushed);
    this.report(outcome);
  }

  private report(outcome: ReconcileOutcome): void {
    for (const r of outcome.refusedNow) {
      this.o.logger.warn('X refused an activity subscription: the account stays polled for it', {
        eventType: r.eventType,
        userId: r.userId,
        refusal: r.refusal,
        detail: r.detail,
      });
      this.o.metrics.refused(r.eventType, r.refusal);
    }
    this.o.metrics.state(outcome.active.length, outcome.pushed.length, outcome.polled.length);
    if (outcome.created + outcome.removed > 0)
      this.o.logger.info('X activity subscriptions reconciled', {
        created: outcome.created,
        removed: outcome.removed,
        pushed: outcome.pushed.length,
        polled: outcome.polled.length,
      });
  }

  private checkStall(): void {
    const c = this.connection;
    if (c && this.now() - c.lastLineAt > (this.o.stallMs ?? 60_000)) {
      this.o.logger.warn('X activity stream stalled: reconnecting');
      this.disconnect();
    }
  }

  /**
   * Saves the position (the last line end seen) as where the next holder replays from, once every event that
   * arrived before it is recorded (or owed): the events of a chunk are chained before its byte
   * time is read here, so waiting for the chain as it is now covers them.
   */
  private saveMark(): void {
    const mark = this.aliveAt;
    if (mark === null || mark <= this.savedMark || this.saving) return;
    this.saving = this.chain
      .then(() => this.o.repository.saveRecordedTo(new Date(mark)))
      .then(() => {
        this.savedMark = mark;
      })
      .catch((err: unknown) => {
        this.o.logger.warn('X activity: the stream position could not be saved', { err: errorMessage(err) });
      })
      .finally(() => {
        this.saving = null;
      });
  }

  private disconnect(): void {
    this.connection?.abort.abort();
    this.connection = null;
  }

  /** the replay's start, owing a look to every pushed account when X cannot replay the whole gap */
  private async replayStart(): Promise<Date> {
    const now = this.now();
    const replayMs = this.o.replayMs ?? 5 * 60_000;
    const last = this.aliveAt ?? (await this.o.repository.recordedTo())?.getTime() ?? null;
    const from = last === null ? null : last - (this.o.overlapMs ?? 5000);
    if (from !== null && now - from < replayMs) {
      this.o.metrics.gap('replayed');
      return new Date(from);
    }
    const targets = [...this.byUser.values()].flat();
    await this.o.repository.owe(targets);
    this.o.metrics.gap('owed');
    this.o.logger.info('X activity gap longer than X replays: the pushed accounts are owed a look', {
      accounts: targets.length,
    });
    return new Date(now - replayMs + 1000);
  }

  private async connect(): Promise<void> {
    const abort = new AbortController();
    const startTime = await this.replayStart();
    const conn = { abort, lastLineAt: this.now() };
    this.connection = conn;
    try {
      const { closed } = await this.o.api.connect(
        {
          onEvent: (e) => this.receive(e),
          onActivity: (partial) => {
            if (!partial) conn.lastLineAt = this.aliveAt = this.now();
          },
        },
        abort.signal,
        { startTime },
      );
      this.aliveAt = this.now();
      this.failures = 0;
      this.o.metrics.connected(true);
      this.o.logger.info('X activity stream connected', { startTime: startTime.toISOString() });
      void closed.then(
        () => this.closed(conn, null),
        (err: unknown) => this.closed(conn, err),
      );
    } catch (err) {
      this.closed(conn, err);
    }
  }

  private closed(conn: { abort: AbortController }, err: unknown): void {
    if (this.connection === conn) this.connection = null;
    this.o.metrics.connected(false);
    if (conn.abort.signal.aborted) return;
    this.failures++;
    const backoff = Math.min(60_000, 1000 * 2 ** Math.min(this.failures - 1, 6));
    const wait = err instanceof XActivityError && err.retryAfterMs !== null ? err.retryAfterMs : backoff;
    this.retryAt = this.now() + wait;
    this.o.logger.warn('X activity stream closed: reconnecting', {
      err: err === null ? 'ended' : errorMessage(err),
      retryInMs: wait,
    });
  }

  private receive(event: XaaEvent): void {
    const targets = [
      ...new Set([...(this.byUser.get(event.userId) ?? []), ...(this.subscribing.get(event.userId) ?? [])]),
    ];
    // billed as delivered, whether or not a monitor still wants it (a replay is deduplicated)
    if (isBilledActivityEvent(event.eventType))
      this.o.billing?.record([{ resource: 'activity_event', id: event.uuid, account: targets[0] ?? null }]);
    if (this.seen.has(event.uuid)) return;
    this.seen.add(event.uuid);
    if (this.seen.size > SEEN_UUIDS) this.seen.delete(this.seen.values().next().value!);
    this.o.metrics.event(event.eventType);
    if (targets.length === 0) return;
    this.chain = this.chain.then(() =>
      this.o.onEvent(event, targets).catch(async (err: unknown) => {
        this.o.logger.warn('X activity event could not be recorded: its accounts are owed a look', {
          eventType: event.eventType,
          userId: event.userId,
          err: errorMessage(err),
        });
        await this.o.repository.owe(targets).catch(() => undefined);
      }),
    );
  }
}
