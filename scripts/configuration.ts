/**
 * The generated part of docs/configuration.md: one table per process, one row per variable its
 * zod env schema reads, with the default, type and bounds from the schema itself and the text of
 * the JSDoc comment written on the schema field. The processes are every service (the
 * `…EnvSchema` export of services/<name>/src/env.ts, as packages/deploy-check finds them), the
 * migration runner, the CLI's `maintenance run` and `x cost`, and the MCP server.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { maintenanceEnv } from '../packages/admin-cli/src/commands/maintenance';
import { xCostEnv } from '../packages/admin-cli/src/commands/xCost';
import { databaseEnvSchema } from '../packages/common/src/env';
import { mcpEnvSchema } from '../packages/mcp/src/env';

const REPO_ROOT = path.resolve(__dirname, '..');

/** what this script needs of a zod field (zod itself is a dependency of the packages, not of the root) */
interface EnvField {
  safeParse(value: unknown): { success: boolean };
  toJSONSchema(params: { io: 'input'; unrepresentable: 'any' }): Record<string, unknown>;
}

interface EnvSchema {
  shape: Record<string, EnvField>;
}

const isEnvSchema = (v: unknown): v is EnvSchema => typeof v === 'object' && v !== null && 'shape' in v;

interface Process {
  /** the heading: the service or the command */
  name: string;
  schema: EnvSchema;
  /** directories whose comments describe its fields before the shared packages' */
  own: string[];
}

function processes(): Process[] {
  const out: Process[] = [];
  const services = path.join(REPO_ROOT, 'services');
  for (const name of readdirSync(services).sort()) {
    const file = path.join(services, name, 'src/env.ts');
    if (!existsFile(file)) continue;
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- every service, found by its directory
    const mod = require(file) as Record<string, unknown>;
    const schema = Object.entries(mod).find(([k, v]) => /EnvSchema$/.test(k) && isEnvSchema(v))?.[1];
    if (!isEnvSchema(schema)) throw new Error(`services/${name}/src/env.ts exports no …EnvSchema zod object`);
    out.push({ name, schema, own: [path.join(services, name, 'src')] });
  }
  out.push(
    { name: '`npm run migrate` (the migration runner)', schema: databaseEnvSchema, own: [] },
    {
      name: '`npm run cli -- maintenance run`',
      schema: maintenanceEnv,
      own: [path.join(REPO_ROOT, 'packages/admin-cli/src')],
    },
    {
      name: '`npm run cli -- x cost`',
      schema: xCostEnv,
      own: [path.join(REPO_ROOT, 'packages/admin-cli/src')],
    },
    { name: '`npm run mcp` (the MCP server)', schema: mcpEnvSchema, own: [path.join(REPO_ROOT, 'packages/mcp/src')] },
  );
  return out;
}

function existsFile(file: string): boolean {
  try {
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!['node_modules', 'generated', 'dist'].includes(entry.name)) out.push(...sourceFiles(full));
    } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) out.push(full);
  }
  return out;
}

const ENV_NAME = /^[A-Z][A-Z0-9_]+$/;

/** the text of the last JSDoc comment before `node`, on one line */
function jsDoc(node: ts.Node, text: string): string | undefined {
  const ranges = ts.getLeadingCommentRanges(text, node.getFullStart()) ?? [];
  const last = ranges.filter((r) => text.startsWith('/**', r.pos)).pop();
  if (!last) return undefined;
  return text
    .slice(last.pos + 3, last.end - 2)
    .split('\n')
    .map((l) => l.replace(/^\s*\*\s?/, '').trim())
    .filter(Boolean)
    .join(' ');
}

/** the first two parts of a name: `READ_CACHE` of `READ_CACHE_TWEET_TTL_MS` */
const group = (name: string) => name.split('_').slice(0, 2).join('_');

/**
 * name → its description in the files under `dir`: the JSDoc on the schema field, or, for a field
 * without one after a described field of the same group (`group()`), a pointer to that field.
 */
function descriptionsIn(dir: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const file of sourceFiles(dir)) {
    const text = readFileSync(file, 'utf8');
    if (!/[A-Z][A-Z0-9]+_[A-Z0-9_]+\s*:/.test(text)) continue;
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node): void => {
      if (ts.isObjectLiteralExpression(node)) {
        let previous: string | undefined;
        for (const prop of node.properties) {
          if (!ts.isPropertyAssignment(prop) || !ts.isIdentifier(prop.name) || !ENV_NAME.test(prop.name.text)) {
            previous = undefined;
            continue;
          }
          const name = prop.name.text;
          const doc = jsDoc(prop, text);
          if (doc && !found.has(name)) found.set(name, doc);
          else if (!doc && previous && group(name) === group(previous) && !found.has(name))
            found.set(name, `see \`${previous}\``);
          if (doc) previous = name;
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

/** a schema value as the table shows it */
const shown = (v: unknown) => (v === '' ? 'empty' : `\`${typeof v === 'string' ? v : JSON.stringify(v)}\``);

/** type and bounds of one field, as its input (the environment's text) is read */
function typeOf(field: EnvField): string {
  const json = field.toJSONSchema({ io: 'input', unrepresentable: 'any' });
  let text = Array.isArray(json.enum)
    ? `one of ${json.enum.map((v) => `\`${String(v)}\``).join(', ')}`
    : typeof json.type === 'string'
      ? json.type
      : 'text';
  if (typeof json.minimum === 'number') text += ` ≥ ${json.minimum}`;
  if (typeof json.exclusiveMinimum === 'number') text += ` > ${json.exclusiveMinimum}`;
  if (typeof json.maximum === 'number' && json.maximum < Number.MAX_SAFE_INTEGER) text += ` ≤ ${json.maximum}`;
  if (typeof json.minLength === 'number' && json.minLength > 0) text += `, ${json.minLength}+ characters`;
  return text;
}

function defaultOf(field: EnvField): string {
  const json = field.toJSONSchema({ io: 'input', unrepresentable: 'any' });
  if ('default' in json) return shown(json.default);
  return field.safeParse(undefined).success ? 'unset' : '**required**';
}

const cell = (s: string) => s.replaceAll('|', '\\|');

function processTable(p: Process, shared: Map<string, string>): string {
  const own = new Map<string, string>();
  for (const dir of p.own) for (const [k, v] of descriptionsIn(dir)) if (!own.has(k)) own.set(k, v);
  const rows = Object.entries(p.schema.shape).map(([name, field]) => [
    `\`${name}\``,
    defaultOf(field),
    typeOf(field),
    own.get(name) ?? shared.get(name) ?? '',
  ]);
  return [
    `### ${p.name}`,
    '',
    '| variable | default | type and bounds | what |',
    '|---|---|---|---|',
    ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`),
  ].join('\n');
}

/** the generated part of docs/configuration.md */
export function configurationParts(): Record<string, string> {
  const shared = descriptionsIn(path.join(REPO_ROOT, 'packages'));
  return {
    variables: processes()
      .map((p) => processTable(p, shared))
      .join('\n\n'),
  };
}
