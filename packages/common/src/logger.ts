import winston from 'winston';
import { activeTraceIds } from '@sts/telemetry';

export type Logger = winston.Logger;

const SECRET_KEY = /(authorization|x-api-key|api[_-]?key|secret|password|token|cookie|signature)/i;
const REDACTED = '[REDACTED]';
// Secrets that may sit inside free text: API keys of this service, bearer tokens, URL credentials.
const SECRET_TEXT: [RegExp, string][] = [
  [/\bsts_(live|test)_[A-Za-z0-9]{8,}\b/g, 'sts_$1_[REDACTED]'],
  [/\b(Bearer)\s+[A-Za-z0-9._~+/=-]+/gi, '$1 [REDACTED]'],
  [/(\w+:\/\/[^:/\s]+:)[^@/\s]+@/g, '$1[REDACTED]@'],
  [/(discord(?:app)?\.com\/api\/webhooks\/\d+\/)[A-Za-z0-9_-]+/g, '$1[REDACTED]'],
  [/(hooks\.slack\.com\/services\/[A-Z0-9]+\/[A-Z0-9]+\/)[A-Za-z0-9]+/g, '$1[REDACTED]'],
];

// Every pattern above needs one of these in the text: a line without any (most of them: paths,
// ids, statuses) skips the replacements, one regex test instead of one per pattern.
const MAY_HOLD_SECRET = /sts_|bearer|@|webhooks\/|hooks\.slack/i;

export function redactText(text: string): string {
  if (!MAY_HOLD_SECRET.test(text)) return text;
  let out = text;
  for (const [re, rep] of SECRET_TEXT) out = out.replace(re, rep);
  return out;
}

/** Deep copy with secret-named fields replaced and secret-looking text masked. */
export function redact(value: unknown, depth = 0): unknown {
  if (depth > 8) return '[depth]';
  if (typeof value === 'string') return redactText(value);
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  if (value instanceof Error) return { name: value.name, message: redactText(value.message) };
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = SECRET_KEY.test(k) ? REDACTED : redact(v, depth + 1);
    return out;
  }
  return value;
}

const redactFormat = winston.format((info) => {
  for (const key of Object.keys(info)) {
    if (key === 'level' || key === 'service') continue;
    info[key] = SECRET_KEY.test(key) ? REDACTED : redact(info[key]);
  }
  return info;
});

/** `trace_id` and `span_id` of the active span on every line written inside one (tracing on) */
const traceFormat = winston.format((info) => {
  const ids = activeTraceIds();
  if (ids) Object.assign(info, ids);
  return info;
});

export interface LoggerOptions {
  service: string;
  level?: string;
  /** defaults to stdout; tests pass a stream to read what was logged */
  stream?: NodeJS.WritableStream;
}

/** The one logger factory: JSON lines, service name, timestamps, trace ids, secrets redacted. */
export function createLogger(options: LoggerOptions): Logger {
  const transport = options.stream
    ? new winston.transports.Stream({ stream: options.stream })
    : new winston.transports.Console();
  return winston.createLogger({
    level: options.level ?? process.env.LOG_LEVEL ?? 'info',
    defaultMeta: { service: options.service },
    format: winston.format.combine(winston.format.timestamp(), traceFormat(), redactFormat(), winston.format.json()),
    transports: [transport],
  });
}
