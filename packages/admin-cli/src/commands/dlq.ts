/**
 * Dead-letter queue commands: `dlq list` (inspect, changes nothing) and `dlq replay` (republish
 * to the original routing key with confirms, then remove from the DLQ), and `queues migrate`
 * (classic queues of earlier versions → the current quorum declaration). The AMQP logic lives in
 * @sts/messaging (src/dlq.ts); this file is argument handling and output.
 */
import {
  connectForTools,
  DlqError,
  isRoutingKey,
  listDeadLetters,
  migrateToQuorum,
  replayDeadLetters,
  type DeadLetterInfo,
} from '@sts/messaging';
import {
  CliUsageError,
  optionalInt,
  optionalString,
  type CliContext,
  type Command,
  type OptionValues,
} from '../command';

/** The consumer queues this system declares, with their bindings (webhook-dispatcher: services/webhook-dispatcher/src/app.ts). */
const KNOWN_QUEUES: Record<string, string[]> = {
  'webhook-dispatcher': ['monitor.hit', 'monitor.test', 'webhook.redeliver'],
};
const DEFAULT_QUEUE = 'webhook-dispatcher';

function queueOption(values: OptionValues): string {
  const q = optionalString(values, 'queue') ?? DEFAULT_QUEUE;
  if (!/^[\w.:-]{1,200}$/.test(q)) throw new CliUsageError('--queue must be a queue name (letters, digits, . _ : -)');
  if (q.endsWith('.dlq'))
    throw new CliUsageError(`--queue names the consumer queue, not its DLQ: use ${q.slice(0, -4)}`);
  return q;
}

async function withConnection<T>(
  ctx: CliContext,
  fn: (conn: Awaited<ReturnType<typeof connectForTools>>) => Promise<T>,
): Promise<T> {
  const conn = await connectForTools(ctx.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672');
  try {
    return await fn(conn);
  } catch (err) {
    if (err instanceof DlqError) throw new Error(err.message);
    throw err;
  } finally {
    await conn.close().catch(() => undefined);
  }
}

function line(m: DeadLetterInfo): string {
  const headers = Object.entries(m.headers)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
  return [
    `${m.messageId ?? '(no message id)'}  ${m.routingKey ?? '(unknown routing key)'}  ${m.reason ?? 'unknown reason'} ×${m.deathCount}${
      m.publishedAt ? `  published ${m.publishedAt}` : ''
    }`,
    `  headers: ${headers || '-'}`,
    `  body (${m.bodyBytes} bytes): ${m.bodyPreview}`,
  ].join('\n');
}

const dlqList: Command = {
  name: 'dlq list',
  summary: "show a queue's dead letters, oldest first (nothing is removed)",
  usage:
    'usage: npm run cli -- dlq list [--queue NAME (default webhook-dispatcher)] [--limit N (1-1000, default 20)] [--json]',
  options: { queue: { type: 'string' }, limit: { type: 'string' } },
  async run(ctx, values) {
    const queue = queueOption(values);
    const limit = optionalInt(values, 'limit', 1, 1000) ?? 20;
    const out = await withConnection(ctx, (conn) => listDeadLetters(conn, queue, { limit }));
    const data = out.messages.map((m) => ({
      message_id: m.messageId,
      routing_key: m.routingKey,
      exchange: m.exchange,
      death_reason: m.reason,
      death_count: m.deathCount,
      deaths: m.deaths,
      type: m.type,
      published_at: m.publishedAt,
      headers: m.headers,
      body_bytes: m.bodyBytes,
      body_preview: m.bodyPreview,
    }));
    const text = out.messages.length
      ? [`${out.dlq}: ${out.total} dead letter(s), showing ${out.messages.length}`, ...out.messages.map(line)].join(
          '\n',
        )
      : `${out.dlq} is empty`;
    return { json: { dlq: out.dlq, total: out.total, data, meta: { count: data.length } }, text };
  },
};

const dlqReplay: Command = {
  name: 'dlq replay',
  summary: 'republish dead letters to their original routing key (confirmed), then remove them from the DLQ',
  usage:
    'usage: npm run cli -- dlq replay [--queue NAME (default webhook-dispatcher)] [--limit N (1-100000) | --message-id ID] [--json]',
  options: { queue: { type: 'string' }, limit: { type: 'string' }, 'message-id': { type: 'string' } },
  async run(ctx, values) {
    const queue = queueOption(values);
    const limit = optionalInt(values, 'limit', 1, 100_000);
    const messageId = optionalString(values, 'message-id');
    if (limit !== undefined && messageId !== undefined)
      throw new CliUsageError('give --limit or --message-id, not both');
    if (messageId !== undefined && messageId.trim() === '') throw new CliUsageError('--message-id must not be empty');
    const r = await withConnection(ctx, (conn) =>
      replayDeadLetters(
        conn,
        queue,
        messageId !== undefined ? { messageId } : { ...(limit !== undefined ? { limit } : {}) },
      ),
    );
    const text = [
      `${r.dlq}: ${r.replayed.length} replayed, ${r.kept.length} left in the DLQ`,
      ...r.replayed.map((x) => `  replayed ${x.messageId ?? '(no id)'} → ${x.exchange} ${x.routingKey}`),
      ...r.kept.map((x) => `  kept ${x.messageId ?? '(no id)'}: ${x.reason}`),
    ].join('\n');
    return {
      json: {
        dlq: r.dlq,
        replayed: r.replayed.map((x) => ({ message_id: x.messageId, exchange: x.exchange, routing_key: x.routingKey })),
        kept: r.kept.map((x) => ({ message_id: x.messageId, reason: x.reason })),
      },
      text,
    };
  },
};

const queuesMigrate: Command = {
  name: 'queues migrate',
  summary: 'move classic queues of earlier versions to quorum queues, keeping messages (stop the consumers first)',
  usage:
    'usage: npm run cli -- queues migrate [--queue NAME (default webhook-dispatcher)] [--bindings monitor.hit,... (required for unknown queues)] [--json]',
  options: { queue: { type: 'string' }, bindings: { type: 'string' } },
  async run(ctx, values) {
    const queue = queueOption(values);
    const given = optionalString(values, 'bindings');
    const bindings =
      given !== undefined
        ? given
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : KNOWN_QUEUES[queue];
    if (!bindings || bindings.length === 0) {
      throw new CliUsageError(`--bindings is required for queue ${queue}: the routing keys its service binds`);
    }
    const bad = bindings.find((b) => !isRoutingKey(b));
    if (bad !== undefined) throw new CliUsageError(`--bindings: unknown routing key ${JSON.stringify(bad)}`);
    const r = await withConnection(ctx, (conn) => migrateToQuorum(conn, queue, bindings));
    return {
      json: { queue, steps: r.steps },
      text: r.steps
        .map((s) =>
          s.action === 'migrated'
            ? `${s.name}: moved to the current declaration, ${s.messages} message(s) kept`
            : s.action === 'absent'
              ? `${s.name}: does not exist (declared by its service at start)`
              : `${s.name}: already current`,
        )
        .join('\n'),
    };
  },
};

export const dlqCommands: Command[] = [dlqList, dlqReplay, queuesMigrate];
