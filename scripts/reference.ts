/**
 * Writes the generated parts of the product reference in docs/ (api.md, webhooks.md, plans.md,
 * configuration.md) from the code that defines them: the gateway's OpenAPI document (itself built
 * from the zod records of @sts/api-contract), the message contracts of @sts/messaging, the signing
 * constants of @sts/signing, the plan defaults of @sts/core and every process's zod env schema
 * (scripts/configuration.ts). Each generated part sits between
 * `<!-- generated:<name> -->` and `<!-- end generated:<name> -->`; the prose around it is written
 * by hand.
 *
 *   npx tsx scripts/reference.ts          rewrite the generated parts
 *   npx tsx scripts/reference.ts --check  exit 1 naming each stale part (packages/deploy-check tests it too)
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ERROR_CODES, HIT_LIMIT, LIMIT, toJsonSchemas, type JsonSchema } from '../packages/api-contract/src';
import { planEnv, planMonitorEnv, planRetentionEnv } from '../packages/core/src';
import { contracts, HEADER_NAMES } from '../packages/messaging/src/contracts';
import * as signing from '../packages/signing/src';
import { openApiDocument } from '../services/gateway/src/http/openapi';
import { configurationParts } from './configuration';
import { ERROR_TABLE } from './errorCodes';

export const REPO_ROOT = path.resolve(__dirname, '..');

/** a schema value as text: strings and numbers as they are, anything else as JSON */
const str = (v: unknown) => (typeof v === 'string' || typeof v === 'number' ? String(v) : JSON.stringify(v));
const cell = (s: unknown) => String(s).replaceAll('|', '\\|').replaceAll('\n', ' ');
const table = (head: string[], rows: unknown[][]) =>
  [
    `| ${head.join(' | ')} |`,
    `|${head.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`),
  ].join('\n');

/** a JSON Schema node as a short type: `string`, `integer ≥ 0`, `string or null`, `array of Hit`, `"monitor.hit"` */
function typeOf(node: JsonSchema): string {
  if (typeof node.$ref === 'string') return node.$ref.split('/').pop()!;
  if (node.const !== undefined) return JSON.stringify(node.const);
  if (Array.isArray(node.enum)) return `one of ${node.enum.map((v) => `\`${String(v)}\``).join(', ')}`;
  const types = Array.isArray(node.type) ? (node.type as string[]) : [str(node.type ?? 'any')];
  const named = types.map((t) => (t === 'array' ? `array of ${typeOf((node.items ?? {}) as JsonSchema)}` : t));
  let text = named.join(' or ');
  if (node.format) text += ` (${str(node.format)})`;
  if (typeof node.minimum === 'number') text += ` ≥ ${node.minimum}`;
  if (typeof node.maximum === 'number') text += ` ≤ ${node.maximum}`;
  if (typeof node.minLength === 'number' && node.minLength > 0) text += `, ${node.minLength}+ characters`;
  if (typeof node.maxLength === 'number') text += `, at most ${node.maxLength} characters`;
  if (node.pattern) text += `, matching \`${str(node.pattern)}\``;
  return text;
}

/** one row per field, nested objects as dotted names */
function fieldRows(schema: JsonSchema, prefix = ''): unknown[][] {
  const required = new Set((schema.required ?? []) as string[]);
  const rows: unknown[][] = [];
  for (const [name, raw] of Object.entries((schema.properties ?? {}) as Record<string, JsonSchema>)) {
    const full = `${prefix}${name}`;
    if (raw.type === 'object' && raw.properties) {
      rows.push([`\`${full}\``, 'object', required.has(name) ? 'yes' : 'no', raw.description ?? '']);
      rows.push(...fieldRows(raw, `${full}.`));
    } else rows.push([`\`${full}\``, typeOf(raw), required.has(name) ? 'yes' : 'no', raw.description ?? '']);
  }
  return rows;
}

const fieldTable = (schema: JsonSchema) => table(['field', 'type', 'always', 'notes'], fieldRows(schema));

interface Operation {
  operationId: string;
  summary: string;
  parameters?: { name: string; in: string; required?: boolean; description?: string; schema: JsonSchema }[];
  responses: Record<string, { description: string }>;
}

function endpoints(): string {
  const rows: unknown[][] = [];
  for (const [p, methods] of Object.entries(
    openApiDocument.paths as unknown as Record<string, Record<string, Operation>>,
  ))
    for (const [method, op] of Object.entries(methods)) {
      const params = (op.parameters ?? []).filter((x) => x.in === 'query').map((x) => `\`${x.name}\``);
      rows.push([method.toUpperCase(), `\`${p}\``, params.join(', ') || '—', op.summary]);
    }
  return table(['method', 'path', 'query', 'what'], rows);
}

function parameters(): string {
  const seen = new Map<string, unknown[]>();
  for (const methods of Object.values(openApiDocument.paths as unknown as Record<string, Record<string, Operation>>))
    for (const op of Object.values(methods))
      for (const x of op.parameters ?? []) {
        const key = `${x.in}:${x.name}:${x.description ?? ''}`;
        if (!seen.has(key))
          seen.set(key, [
            `\`${x.name}\``,
            x.in,
            typeOf(x.schema) + (x.schema.default !== undefined ? `, default ${str(x.schema.default)}` : ''),
            x.required ? 'yes' : 'no',
            x.description ?? '',
          ]);
      }
  return table(['parameter', 'in', 'type and bounds', 'required', 'notes'], [...seen.values()]);
}

/** one row per error code: its statuses, what it means, whether to send the request again */
function errorTable(): string {
  return table(
    ['code', 'status', 'meaning', 'retry?'],
    [...ERROR_CODES]
      .sort((a, b) => ERROR_TABLE[a].status[0]! - ERROR_TABLE[b].status[0]!)
      .map((code) => {
        const row = ERROR_TABLE[code];
        return [`\`${code}\``, row.status.join(', '), row.meaning, row.retry];
      }),
  );
}

function apiParts(): Record<string, string> {
  const schemas = openApiDocument.components.schemas as Record<string, JsonSchema>;
  const records = Object.entries(schemas)
    .map(([name, schema]) => `### ${name}\n\n${fieldTable(schema)}`)
    .join('\n\n');
  return {
    endpoints: endpoints(),
    parameters: `${parameters()}\n\nList sizes: \`limit\` ${LIMIT.min}–${LIMIT.max} (default ${LIMIT.default}); \`hit_limit\` ${HIT_LIMIT.min}–${HIT_LIMIT.max} (default ${HIT_LIMIT.default}).`,
    records,
    'error-codes': errorTable(),
  };
}

function webhookParts(): Record<string, string> {
  const json = toJsonSchemas({
    'monitor.hit': contracts['monitor.hit'].payload,
    'monitor.test': contracts['monitor.test'].payload,
    'monitor.profile_changed': contracts['monitor.profile_changed'].payload,
    'monitor.target_unavailable': contracts['monitor.target_unavailable'].payload,
  });
  const headers = table(
    ['header', 'value'],
    [
      [signing.HEADER_CONTENT_TYPE, `\`${signing.CONTENT_TYPE}\``],
      [signing.HEADER_USER_AGENT, `\`${signing.USER_AGENT}\``],
      [
        signing.HEADER_EVENT,
        "the event: `monitor.hit`, `monitor.test`, `monitor.profile_changed` or `monitor.target_unavailable` (also the body's `event`)",
      ],
      [signing.HEADER_TIMESTAMP, 'Unix time in seconds, decimal string'],
      [signing.HEADER_SIGNATURE, `\`${signing.SIGNATURE_PREFIX}<hex HMAC-SHA256 of "{timestamp}.{raw body}">\``],
      [signing.HEADER_DELIVERY, 'the delivery id: the same on every attempt of one delivery'],
      [
        signing.HEADER_SEQUENCE,
        "the event's number among its monitor's events (the body's `sequence`); not on `monitor.test`",
      ],
      [signing.HEADER_WEBHOOK_ID, 'Standard Webhooks: the delivery id again'],
      [signing.HEADER_WEBHOOK_TIMESTAMP, 'Standard Webhooks: the timestamp again'],
      [
        signing.HEADER_WEBHOOK_SIGNATURE,
        `Standard Webhooks: \`v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{raw body}">\` keyed by the signing secret (\`${signing.STANDARD_SECRET_PREFIX}\` + its base64 form in their libraries)`,
      ],
    ],
  );
  return {
    'monitor.hit': fieldTable(json['monitor.hit']),
    'monitor.test': fieldTable(json['monitor.test']),
    'monitor.profile_changed': fieldTable(json['monitor.profile_changed']),
    'monitor.target_unavailable': fieldTable(json['monitor.target_unavailable']),
    headers: `${headers}\n\nTimestamp tolerance: ${signing.DEFAULT_TOLERANCE_SEC} seconds either way.`,
    'message-headers': table(
      ['envelope field', 'AMQP header'],
      Object.entries(HEADER_NAMES).map(([f, h]) => [`\`${f}\``, `\`${h}\``]),
    ),
  };
}

/** the default of a `z.coerce.number().default(n)` plan variable */
const defaultOf = (schema: { parse: (v: unknown) => unknown }) => Number(schema.parse(undefined));

function planParts(): Record<string, string> {
  const env = { ...planEnv, ...planMonitorEnv, ...planRetentionEnv } as Record<
    string,
    { parse: (v: unknown) => unknown }
  >;
  const row = (what: string, free: string, starter: string) => [
    what,
    `${defaultOf(env[free]!).toLocaleString('en-US')} (\`${free}\`)`,
    `${defaultOf(env[starter]!).toLocaleString('en-US')} (\`${starter}\`)`,
  ];
  return {
    limits: table(
      ['limit', 'Free (default, variable)', 'Starter (default, variable)'],
      [
        row('API calls a month (successful calls)', 'PLAN_FREE_MONTHLY_QUOTA', 'PLAN_STARTER_MONTHLY_QUOTA'),
        row('API requests a minute', 'PLAN_FREE_PER_MINUTE', 'PLAN_STARTER_PER_MINUTE'),
        row('monitor poll interval, seconds', 'PLAN_FREE_POLL_INTERVAL_SECONDS', 'PLAN_STARTER_POLL_INTERVAL_SECONDS'),
        row('monitors (paused ones count)', 'PLAN_FREE_MONITORS', 'PLAN_STARTER_MONITORS'),
        row(
          'hit history, days (by the post’s time)',
          'PLAN_FREE_HIT_RETENTION_DAYS',
          'PLAN_STARTER_HIT_RETENTION_DAYS',
        ),
        row('delivery log, days', 'PLAN_FREE_DELIVERY_LOG_RETENTION_DAYS', 'PLAN_STARTER_DELIVERY_LOG_RETENTION_DAYS'),
        ['live `monitor.hit` webhooks', 'no (test pings only)', 'yes'],
      ],
    ),
  };
}

/** file (under docs/) → generated part name → its text */
export function generatedParts(): Record<string, Record<string, string>> {
  return {
    'api.md': apiParts(),
    'webhooks.md': webhookParts(),
    'plans.md': planParts(),
    'configuration.md': configurationParts(),
  };
}

/** `text` with each generated part replaced */
export function fillParts(text: string, parts: Record<string, string>): string {
  let out = text;
  for (const [name, body] of Object.entries(parts)) {
    const begin = `<!-- generated:${name} -->`;
    const end = `<!-- end generated:${name} -->`;
    const from = out.indexOf(begin);
    const to = out.indexOf(end);
    if (from < 0 || to < from) throw new Error(`missing markers ${begin} … ${end}`);
    out = `${out.slice(0, from + begin.length)}\n\n${body}\n\n${out.slice(to)}`;
  }
  return out;
}

/**
 * `text` as prettier writes it (the repository's config) for the file at `full`. Run as a child
 * process: prettier's API loads its plugins with dynamic imports, which jest's module runtime refuses.
 */
function formatted(text: string, full: string): string {
  const bin = require.resolve('prettier/bin/prettier.cjs');
  return execFileSync(process.execPath, [bin, '--stdin-filepath', full], { input: text, encoding: 'utf8' });
}

/** each reference file as it should be (generated parts filled in, formatted as prettier does) next to what it is */
export function referenceFiles(): { file: string; current: string; expected: string }[] {
  const out = [];
  for (const [file, parts] of Object.entries(generatedParts())) {
    const full = path.join(REPO_ROOT, 'docs', file);
    const current = readFileSync(full, 'utf8');
    const expected = formatted(fillParts(current, parts), full);
    out.push({ file: `docs/${file}`, current, expected });
  }
  return out;
}

function main(): void {
  const check = process.argv.includes('--check');
  const stale = referenceFiles().filter((f) => f.current !== f.expected);
  for (const f of stale) {
    if (check) console.error(`${f.file}: the generated parts are stale`);
    else writeFileSync(path.join(REPO_ROOT, f.file), f.expected);
  }
  if (check && stale.length > 0) {
    console.error('run `npx tsx scripts/reference.ts` to regenerate them');
    process.exit(1);
  }
}

if (require.main === module) main();
