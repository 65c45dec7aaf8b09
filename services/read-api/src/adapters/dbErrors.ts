/**
 * Whether an error means the database is unavailable (unreachable, gone, overloaded, timed out),
 * which the API answers with 503 SERVICE_UNAVAILABLE rather than 500.
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

export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 4) return false;
  const e = err as ErrorLike;
  if (e.name === 'PrismaClientInitializationError') return true;
  if (typeof e.code === 'string') {
    if (PRISMA_UNAVAILABLE.has(e.code) || NODE_NET.has(e.code)) return true;
    // SQLSTATE: connection exceptions, insufficient resources, operator intervention, query canceled
    if (/^(08|53|57)/.test(e.code) && e.code.length === 5) return true;
  }
  const cause = e.meta?.driverAdapterError?.cause;
  if (cause) {
    if (typeof cause.kind === 'string' && ADAPTER_UNAVAILABLE.has(cause.kind)) return true;
    if (typeof cause.originalCode === 'string' && /^(08|53|57)/.test(cause.originalCode)) return true;
  }
  return isDatabaseUnavailable(e.cause, depth + 1);
}
