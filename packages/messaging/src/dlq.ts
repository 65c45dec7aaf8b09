/**
 * Dead-letter queue tools: inspect (`listDeadLetters`), replay (`replayDeadLetters`) and the
 * one-off move of classic queues of earlier versions to quorum queues (`migrateToQuorum`). Used
 * by the admin CLI (`npm run cli -- dlq list|replay`, `queues migrate`). Plain amqplib on a
 * connection the caller owns; no AmqpClient.
 *
 * Never loses a message: a dead letter is acknowledged only after the broker confirmed its
 * republication (publisher confirms, `mandatory`, no basic.return); on any failure it goes back
 * to the DLQ (nack with requeue, or the channel closes and the broker returns it).
 */
import { connect, type Channel, type ChannelModel, type ConfirmChannel, type GetMessage, type Options } from 'amqplib';
import { DEAD_LETTER_EXCHANGE, EXCHANGE } from './contracts';
import {
  consumerQueueArguments,
  deadLetterQueueArguments,
  deadLetterQueueName,
  declareExchanges,
  parkedQueueArguments,
  parkingNames,
} from './topology';

/** Header names whose values are never shown (credentials could travel in custom headers). */
const SECRET_HEADER = /secret|token|passw|authori[sz]ation|signature|cookie|api[-_]?key|credential/i;
const DEATH_HEADERS = /^x-(death|first-death-.*|last-death-.*|delivery-count)$/;
export const BODY_PREVIEW_CHARS = 200;

export interface DeathRecord {
  queue: string;
  reason: string;
  count: number;
  exchange: string;
  routingKeys: string[];
  time: string | null;
}

export interface DeadLetterInfo {
  messageId: string | null;
  /** the routing key it was published with (where a replay sends it) */
  routingKey: string | null;
  exchange: string | null;
  /** why it was dead-lettered the last time: rejected, delivery_limit, expired, maxlen */
  reason: string | null;
  /** how many times it was dead-lettered from its queue */
  deathCount: number;
  deaths: DeathRecord[];
  /** AMQP headers except the x-death bookkeeping; secret-looking names show `[REDACTED]` */
  headers: Record<string, unknown>;
  type: string | null;
  publishedAt: string | null;
  bodyBytes: number;
  bodyPreview: string;
}

export class DlqError extends Error {
  override name = 'DlqError';
}

/**
 * A plain connection for these tools (the CLI), failing within `timeoutMs` with a message that
 * names AMQP_URL but not its credentials. The caller closes it.
 */
export async function connectForTools(url: string, timeoutMs = 10_000): Promise<ChannelModel> {
  let timer: NodeJS.Timeout | undefined;
  const attempt = connect(url, { timeout: timeoutMs });
  try {
    const conn = await Promise.race([
      attempt,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new DlqError(`cannot reach RabbitMQ (AMQP_URL) within ${timeoutMs / 1000} s`)),
          timeoutMs,
        );
      }),
    ]);
    conn.on('error', () => undefined);
    return conn;
  } catch (err) {
    attempt
      .then(
        (c) => c.close(),
        () => undefined,
      )
      .catch(() => undefined);
    if (err instanceof DlqError) throw err;
    throw new DlqError(`cannot connect to RabbitMQ (AMQP_URL): ${(err as Error).message.replace(/\/\/[^@/]*@/, '//')}`);
  } finally {
    clearTimeout(timer);
  }
}

function text(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (Buffer.isBuffer(v)) return v.toString('utf8');
  return null;
}

function deaths(headers: Record<string, unknown>): DeathRecord[] {
  const raw = headers['x-death'];
  if (!Array.isArray(raw)) return [];
  return raw.map((d: Record<string, unknown>) => {
    const time = d.time as { value?: number } | Date | undefined;
    const seconds = time instanceof Date ? time.getTime() / 1000 : typeof time?.value === 'number' ? time.value : null;
    return {
      queue: text(d.queue) ?? '',
      reason: text(d.reason) ?? '',
      count: typeof d.count === 'number' ? d.count : Number(d.count ?? 0),
      exchange: text(d.exchange) ?? '',
      routingKeys: Array.isArray(d['routing-keys']) ? (d['routing-keys'] as unknown[]).map((k) => text(k) ?? '') : [],
      time: seconds === null ? null : new Date(seconds * 1000).toISOString(),
    };
  });
}

function shownHeaders(headers: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (DEATH_HEADERS.test(k)) continue;
    out[k] = SECRET_HEADER.test(k) ? '[REDACTED]' : Buffer.isBuffer(v) ? v.toString('utf8') : v;
  }
  return out;
}

/** Where a dead letter of `queue` came from: the death record of that queue (the newest first). */
function origin(queue: string, headers: Record<string, unknown>): { exchange: string; routingKey: string } | null {
  const record = deaths(headers).find((d) => d.queue === queue) ?? deaths(headers)[0];
  if (!record || record.routingKeys.length === 0) return null;
  return { exchange: record.exchange, routingKey: record.routingKeys[0]! };
}

export function describeDeadLetter(queue: string, msg: GetMessage): DeadLetterInfo {
  const headers = (msg.properties.headers ?? {}) as Record<string, unknown>;
  const d = deaths(headers);
  const own = d.find((x) => x.queue === queue) ?? d[0];
  const from = origin(queue, headers);
  const ts: unknown = msg.properties.timestamp;
  const body = msg.content.toString('utf8');
  return {
    messageId: typeof msg.properties.messageId === 'string' ? msg.properties.messageId : null,
    routingKey: from?.routingKey ?? null,
    exchange: from?.exchange ?? null,
    reason: text(headers['x-last-death-reason']) ?? own?.reason ?? null,
    deathCount: own?.count ?? 0,
    deaths: d,
    headers: shownHeaders(headers),
    type: typeof msg.properties.type === 'string' ? msg.properties.type : null,
    publishedAt: typeof ts === 'number' && Number.isFinite(ts) ? new Date(ts * 1000).toISOString() : null,
    bodyBytes: msg.content.length,
    bodyPreview: body.length > BODY_PREVIEW_CHARS ? `${body.slice(0, BODY_PREVIEW_CHARS)}…` : body,
  };
}

async function openChannel<T extends Channel>(make: () => Promise<T>): Promise<T> {
  const ch = await make();
  // errors surface through the failing operation's promise; this keeps them from crashing the process
  ch.on('error', () => undefined);
  return ch;
}

/** The DLQ of a consumer queue, which must exist (a passive check: nothing is created). */
async function checkedDlq(conn: ChannelModel, queue: string): Promise<{ dlq: string; count: number }> {
  const dlq = deadLetterQueueName(queue);
  const ch = await openChannel(() => conn.createChannel());
  try {
    const { messageCount } = await ch.checkQueue(dlq);
    return { dlq, count: messageCount };
  } catch (err) {
    throw new DlqError(`dead-letter queue ${dlq} does not exist (${(err as Error).message})`);
  } finally {
    await ch.close().catch(() => undefined);
  }
}

/**
 * The first `limit` dead letters of `<queue>.dlq`, oldest first, left in the queue: they are
 * fetched without auto-ack and returned (nack + requeue) when done, so listing changes nothing
 * but their redelivered flag.
 */
export async function listDeadLetters(
  conn: ChannelModel,
  queue: string,
  opts: { limit: number },
): Promise<{ dlq: string; total: number; messages: DeadLetterInfo[] }> {
  const { dlq, count } = await checkedDlq(conn, queue);
  const ch = await openChannel(() => conn.createChannel());
  const out: DeadLetterInfo[] = [];
  try {
    for (let i = 0; i < Math.min(opts.limit, count); i++) {
      const msg = await ch.get(dlq, { noAck: false });
      if (!msg) break;
      out.push(describeDeadLetter(queue, msg));
    }
    await holdTheRest(ch, dlq, count - out.length);
    ch.nackAll(true);
  } finally {
    // closing the channel returns anything still unacknowledged, whatever happened above
    await ch.close().catch(() => undefined);
  }
  return { dlq, total: count, messages: out };
}

/**
 * Takes (unacknowledged) the `n` messages after the ones already held, so that returning them all
 * at once keeps the DLQ's order: a quorum queue puts a returned message at its tail, so returning
 * only the first few would move them behind the rest. (A DLQ is bounded: DLQ_MAX_LENGTH.)
 */
async function holdTheRest(ch: Channel, dlq: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) if (!(await ch.get(dlq, { noAck: false }))) return;
}

export interface ReplayResult {
  dlq: string;
  replayed: { messageId: string | null; exchange: string; routingKey: string }[];
  /** left in the DLQ, with the reason (no origin recorded, unroutable, not confirmed) */
  kept: { messageId: string | null; reason: string }[];
}

function replayProperties(queue: string, msg: GetMessage): Options.Publish {
  const p = msg.properties;
  const headers: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(p.headers ?? {})) {
    if (!DEATH_HEADERS.test(k)) headers[k] = v;
  }
  const previous = Number(headers['x-replay-count'] ?? 0);
  headers['x-replay-count'] = Number.isFinite(previous) ? previous + 1 : 1;
  headers['x-replayed-from'] = deadLetterQueueName(queue);
  return {
    mandatory: true,
    persistent: true,
    headers,
    ...(p.messageId !== undefined ? { messageId: p.messageId as string } : {}),
    ...(p.type !== undefined ? { type: p.type as string } : {}),
    ...(p.contentType !== undefined ? { contentType: p.contentType as string } : {}),
    ...(p.contentEncoding !== undefined ? { contentEncoding: p.contentEncoding as string } : {}),
    ...(p.timestamp !== undefined ? { timestamp: p.timestamp as number } : {}),
    ...(p.appId !== undefined ? { appId: p.appId as string } : {}),
    ...(p.correlationId !== undefined ? { correlationId: p.correlationId as string } : {}),
  };
}

/** Publishes with confirms and mandatory; resolves true when confirmed and routed, false when returned. */
function publishConfirmed(
  ch: ConfirmChannel,
  exchange: string,
  routingKey: string,
  body: Buffer,
  props: Options.Publish,
): Promise<boolean> {
  return new Promise<boolean>((resolve, reject) => {
    let returned = false;
    const onReturn = (m: { properties: { messageId?: unknown } }) => {
      if (m.properties.messageId === props.messageId) returned = true;
    };
    ch.on('return', onReturn);
    const onClose = () => reject(new DlqError('channel closed before the broker confirmed the republication'));
    ch.once('close', onClose);
    ch.publish(exchange, routingKey, body, props, (err) => {
      ch.off('close', onClose);
      // basic.return arrives before the confirm of the same message
      setImmediate(() => {
        ch.off('return', onReturn);
        if (err) reject(new DlqError('the broker refused the republication (nack)'));
        else resolve(!returned);
      });
    });
  });
}

/**
 * Republishes dead letters of `<queue>.dlq` to the exchange and routing key they were first
 * published with (from their x-death record), with the same properties and body (death headers
 * replaced by `x-replayed-from` and `x-replay-count`), then acks each one — only after the broker
 * confirmed its republication and routed it. Everything else stays in the DLQ. Takes the oldest
 * `limit`, or the one with `messageId` (then the whole DLQ is searched). At most the messages in
 * the DLQ when it started are looked at, so a message that dies again is not replayed twice.
 */
export async function replayDeadLetters(
  conn: ChannelModel,
  queue: string,
  opts: { limit?: number; messageId?: string },
): Promise<ReplayResult> {
  const { dlq, count } = await checkedDlq(conn, queue);
  const ch = await openChannel(() => conn.createConfirmChannel());
  let closed = false;
  ch.once('close', () => (closed = true));
  const result: ReplayResult = { dlq, replayed: [], kept: [] };
  const limit = opts.messageId !== undefined ? 1 : (opts.limit ?? count);
  let seen = 0;
  try {
    for (; seen < count && result.replayed.length + result.kept.length < limit; seen++) {
      const msg = await ch.get(dlq, { noAck: false });
      if (!msg) break;
      const messageId = typeof msg.properties.messageId === 'string' ? msg.properties.messageId : null;
      if (opts.messageId !== undefined && messageId !== opts.messageId) continue; // held unacked, returned below
      const from = origin(queue, msg.properties.headers ?? {});
      if (!from) {
        result.kept.push({ messageId, reason: 'no x-death record: its original routing key is unknown' });
        continue;
      }
      let routed: boolean;
      try {
        routed = await publishConfirmed(ch, from.exchange, from.routingKey, msg.content, replayProperties(queue, msg));
      } catch (err) {
        // not confirmed: this one stays (unacked, returned below) and the replay stops here
        result.kept.push({ messageId, reason: (err as Error).message });
        break;
      }
      if (!routed) {
        result.kept.push({ messageId, reason: `no queue is bound to ${from.exchange} with ${from.routingKey}` });
        continue;
      }
      ch.ack(msg);
      result.replayed.push({ messageId, ...from });
    }
    // a closed channel has returned its unacknowledged messages already
    if (!closed) {
      await holdTheRest(ch, dlq, count - seen);
      ch.nackAll(true);
      await ch.waitForConfirms();
    }
  } finally {
    await ch.close().catch(() => undefined);
  }
  if (opts.messageId !== undefined && result.replayed.length + result.kept.length === 0) {
    throw new DlqError(`no message with id ${opts.messageId} in ${dlq}`);
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// Moving the classic queues of earlier versions to quorum queues

async function queueExists(conn: ChannelModel, name: string): Promise<number | null> {
  const ch = await openChannel(() => conn.createChannel());
  try {
    return (await ch.checkQueue(name)).messageCount;
  } catch {
    return null; // 404: the channel is closed by the broker
  } finally {
    await ch.close().catch(() => undefined);
  }
}

/** True when `name` exists with other arguments than `args` (a classic queue of an earlier version). */
async function differs(conn: ChannelModel, name: string, args: Record<string, unknown>): Promise<boolean> {
  const ch = await openChannel(() => conn.createChannel());
  try {
    await ch.assertQueue(name, { durable: true, arguments: args });
    return false;
  } catch (err) {
    if (/PRECONDITION.FAILED/i.test((err as Error).message)) return true;
    throw err;
  } finally {
    await ch.close().catch(() => undefined);
  }
}

/** A message's properties for an identical copy (headers incl. x-death kept; not userId, which the broker checks). */
function sameProperties(msg: GetMessage): Options.Publish {
  const p = msg.properties as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = { mandatory: true, persistent: true };
  for (const k of [
    'headers',
    'messageId',
    'type',
    'contentType',
    'contentEncoding',
    'timestamp',
    'appId',
    'correlationId',
    'replyTo',
    'expiration',
    'priority',
  ]) {
    if (p[k] !== undefined) out[k] = p[k];
  }
  return out;
}

/** Moves every message from one queue to another (default exchange), ack after confirm. */
async function moveAll(conn: ChannelModel, from: string, to: string): Promise<number> {
  const ch = await openChannel(() => conn.createConfirmChannel());
  let moved = 0;
  try {
    for (;;) {
      const msg = await ch.get(from, { noAck: false });
      if (!msg) break;
      const routed = await publishConfirmed(ch, '', to, msg.content, sameProperties(msg));
      if (!routed) throw new DlqError(`could not move a message to ${to}: unroutable`);
      ch.ack(msg);
      moved++;
    }
    await ch.waitForConfirms();
  } finally {
    await ch.close().catch(() => undefined);
  }
  return moved;
}

async function withChannel<T>(conn: ChannelModel, fn: (ch: Channel) => Promise<T>): Promise<T> {
  const ch = await openChannel(() => conn.createChannel());
  try {
    return await fn(ch);
  } finally {
    await ch.close().catch(() => undefined);
  }
}

/** Replaces one queue by a queue of the same name with `args`, keeping its messages and bindings. */
async function replaceQueue(
  conn: ChannelModel,
  name: string,
  args: Record<string, unknown>,
  bindings: { exchange: string; routingKey: string }[],
): Promise<number> {
  const hold = `${name}.migrating`;
  // 1. a holding queue takes over the bindings, so what is published meanwhile waits there (a
  //    message published in the instant both are bound lands in both: at least once). Classic,
  //    because only classic queues can be deleted "if empty".
  await withChannel(conn, async (ch) => {
    // a parked message that expires while held goes where it would have gone (its return exchange)
    const dlx =
      args['x-dead-letter-exchange'] && name.endsWith('.parked')
        ? { 'x-dead-letter-exchange': args['x-dead-letter-exchange'] }
        : {};
    await ch.assertQueue(hold, { durable: true, arguments: { 'x-queue-type': 'classic', ...dlx } });
    for (const b of bindings) await ch.bindQueue(hold, b.exchange, b.routingKey);
    for (const b of bindings) await ch.unbindQueue(name, b.exchange, b.routingKey);
  });
  // 2. the old queue, now unbound (and without consumers), is drained into the holding queue and
  //    deleted once it is empty
  let moved = 0;
  for (;;) {
    moved += await moveAll(conn, name, hold);
    if ((await queueExists(conn, name)) === 0) break;
  }
  await withChannel(conn, (ch) => ch.deleteQueue(name));
  // 3. the new queue with its bindings, then everything back from the holding queue
  await withChannel(conn, async (ch) => {
    await ch.assertQueue(name, { durable: true, arguments: args });
    for (const b of bindings) await ch.bindQueue(name, b.exchange, b.routingKey);
    for (const b of bindings) await ch.unbindQueue(hold, b.exchange, b.routingKey);
  });
  for (;;) {
    await moveAll(conn, hold, name);
    const deleted = await withChannel(conn, (ch) =>
      ch.deleteQueue(hold, { ifEmpty: true }).then(
        () => true,
        () => false,
      ),
    );
    if (deleted) break;
  }
  return moved;
}

export interface MigrationResult {
  queue: string;
  /** what was done per queue: already quorum, migrated (with the number of messages kept), absent */
  steps: { name: string; action: 'already-current' | 'migrated' | 'absent'; messages: number }[];
}

/**
 * Moves `<queue>` and `<queue>.dlq` declared by an earlier version (classic queues, or other
 * arguments) to the current quorum declaration, keeping every message and the bindings
 * (`bindings`: the routing keys the queue's service binds). Run it with the queue's consumers
 * STOPPED (a consumer would hold messages unacked and re-declare the old queue): publishers may
 * keep running, their messages wait in `<queue>.migrating` meanwhile. Idempotent: queues that
 * are already current are left alone.
 */
export async function migrateToQuorum(conn: ChannelModel, queue: string, bindings: string[]): Promise<MigrationResult> {
  await withChannel(conn, (ch) => declareExchanges(ch));
  const result: MigrationResult = { queue, steps: [] };
  const dlq = deadLetterQueueName(queue);
  const plan: [string, Record<string, unknown>, { exchange: string; routingKey: string }[]][] = [
    [dlq, deadLetterQueueArguments(), [{ exchange: DEAD_LETTER_EXCHANGE, routingKey: queue }]],
    [queue, consumerQueueArguments(queue), bindings.map((routingKey) => ({ exchange: EXCHANGE, routingKey }))],
    // the dispatcher's parking queue, when this queue has one (absent otherwise)
    [
      parkingNames(queue).parked,
      parkedQueueArguments(queue),
      bindings.map((routingKey) => ({ exchange: parkingNames(queue).defer, routingKey })),
    ],
  ];
  for (const [name, args, binds] of plan) {
    const count = await queueExists(conn, name);
    if (count === null) {
      result.steps.push({ name, action: 'absent', messages: 0 });
      continue;
    }
    if (!(await differs(conn, name, args))) {
      result.steps.push({ name, action: 'already-current', messages: count });
      continue;
    }
    const moved = await replaceQueue(conn, name, args, binds);
    result.steps.push({ name, action: 'migrated', messages: moved });
  }
  return result;
}
