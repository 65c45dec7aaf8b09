/**
 * Whether an error means the database is unavailable (unreachable, gone, overloaded, timed out),
 * as opposed to a query the database refused (constraint, bad data). read-api answers it with 503;
 * the webhook-dispatcher requeues the message to try again later.
 */
const PRISMA_UNAVAILABLE = new Set(['P1001', 'P1002', 'P1003', 'P1008', 'P1011', 'P1017', 'P2024', 'P2037']);
const ADAPTER_UNAVAILABLE = new Set([
  'DatabaseNotReachable',
  'DatabaseDoesNotExist',
  'DatabaseAccessDenied',
  'AuthenticationFailed',
  'ConnectionClosed',
  'SocketTimeout',
  'TooManyConnections',
  'TransactionAlreadyClosed',
]);
const NODE_NET = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
]);

interface ErrorLike {
  name?: unknown;
  code?: unknown;
  meta?: { driverAdapterError?: { cause?: { kind?: unknown; originalCode?: unknown } } };
  cause?: unknown;
}

// Some drivers only say it in words.
const UNAVAILABLE_TEXT =
  /ECONNREFUSED|ECONNRESET|Connection terminated|connection (?:closed|reset|refused)|timeout exceeded when trying to connect|DatabaseNotReachable|ConnectionClosed|too many clients|the database system is (?:starting|shutting) down/i;

export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 5) return false;
  const e = err as ErrorLike & { errorCode?: unknown; kind?: unknown; message?: unknown };
  if (e.name === 'PrismaClientInitializationError') return true;
  for (const code of [e.code, e.errorCode]) {
    if (typeof code !== 'string') continue;
    if (PRISMA_UNAVAILABLE.has(code) || NODE_NET.has(code)) return true;
    // SQLSTATE: connection exceptions, insufficient resources, operator intervention, query canceled
    if (/^(08|53|57)/.test(code) && code.length === 5) return true;
  }
  if (typeof e.kind === 'string' && (ADAPTER_UNAVAILABLE.has(e.kind) || UNAVAILABLE_TEXT.test(e.kind))) return true;
  if (typeof e.message === 'string' && UNAVAILABLE_TEXT.test(e.message)) return true;
  const cause = e.meta?.driverAdapterError?.cause;
  if (cause) {
    if (typeof cause.kind === 'string' && ADAPTER_UNAVAILABLE.has(cause.kind)) return true;
    if (typeof cause.originalCode === 'string' && /^(08|53|57)/.test(cause.originalCode)) return true;
  }
  return isDatabaseUnavailable(e.cause, depth + 1);
}
