/**
 * Compares a live database with the Prisma schema, without Prisma's native schema engine: the
 * schema is read through Prisma's own schema parser (WebAssembly), the database through
 * information_schema and pg_catalog. Returns a list of differences, empty when they agree. A
 * partitioned table counts as one table: its partitions, their indexes and their cloned foreign
 * keys are the parent's, not tables of their own.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from 'pg';

interface DmmfField {
  name: string;
  dbName?: string | null;
  kind: 'scalar' | 'object' | 'enum' | 'unsupported';
  isList: boolean;
  isRequired: boolean;
  type: string;
  nativeType?: [string, string[]] | null;
  hasDefaultValue: boolean;
  relationFromFields?: string[];
  relationToFields?: string[];
  relationOnDelete?: string;
}
interface DmmfModel {
  name: string;
  dbName: string | null;
  fields: DmmfField[];
}
interface DmmfIndex {
  model: string;
  type: 'id' | 'unique' | 'normal' | 'fulltext';
  dbName?: string | null;
  fields: { name: string; sortOrder?: 'asc' | 'desc' }[];
  algorithm?: string;
}
interface Dmmf {
  datamodel: {
    models: DmmfModel[];
    enums: { name: string; dbName?: string | null; values: { name: string; dbName?: string | null }[] }[];
    indexes: DmmfIndex[];
  };
}

const SCHEMA_FILE = path.resolve(__dirname, '../prisma/schema.prisma');

function readDmmf(schemaFile = SCHEMA_FILE): Dmmf {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const wasm = require('@prisma/prisma-schema-wasm') as { get_dmmf(params: string): string };
  const text = readFileSync(schemaFile, 'utf8');
  const dmmf = JSON.parse(wasm.get_dmmf(JSON.stringify({ prismaSchema: text }))) as Dmmf;
  // The DMMF leaves out Unsupported("...") fields; read them from the schema text.
  for (const block of text.matchAll(/^model\s+(\w+)\s*\{([\s\S]*?)^\}/gm)) {
    const model = dmmf.datamodel.models.find((m) => m.name === block[1]);
    for (const f of block[2]!.matchAll(/^\s*(\w+)\s+Unsupported\("([^"]+)"\)(\?)?(.*)$/gm)) {
      const mapped = /@map\("([^"]+)"\)/.exec(f[4] ?? '');
      model?.fields.push({
        name: f[1]!,
        dbName: mapped?.[1] ?? null,
        kind: 'unsupported',
        isList: false,
        isRequired: f[3] !== '?',
        type: f[2]!,
        hasDefaultValue: /@default\(/.test(f[4] ?? ''),
      });
    }
  }
  return dmmf;
}

/** Postgres type (format_type) Prisma uses for a scalar without a native type attribute. */
function expectedType(f: DmmfField): string {
  if (f.kind === 'enum') return `"${f.type}"`.replace(/^"([a-z_][a-z0-9_]*)"$/, '$1');
  if (f.kind === 'unsupported') return f.type;
  const native = f.nativeType;
  let t: string;
  if (native) {
    const [name, args] = native;
    const map: Record<string, string> = {
      Uuid: 'uuid',
      Char: `character(${args[0]})`,
      VarChar: `character varying(${args[0]})`,
      Timestamptz: `timestamp(${args[0] ?? 3}) with time zone`,
      Timestamp: `timestamp(${args[0] ?? 3}) without time zone`,
      Text: 'text',
      Integer: 'integer',
      BigInt: 'bigint',
    };
    t = map[name] ?? name.toLowerCase();
  } else {
    const map: Record<string, string> = {
      String: 'text',
      Int: 'integer',
      BigInt: 'bigint',
      Boolean: 'boolean',
      DateTime: 'timestamp(3) without time zone',
      Json: 'jsonb',
      Float: 'double precision',
      Decimal: 'numeric(65,30)',
      Bytes: 'bytea',
    };
    t = map[f.type] ?? f.type;
  }
  return f.isList ? `${t}[]` : t;
}

function col(f: DmmfField): string {
  return f.dbName ?? f.name;
}

/** Enums: the same names with the same values in the same order. */
async function enumDrift(db: Client, dmmf: Dmmf): Promise<string[]> {
  const diffs: string[] = [];
  const enums = await db.query<{ name: string; values: string[] }>(`
    SELECT t.typname AS name, array_agg(e.enumlabel ORDER BY e.enumsortorder)::text[] AS values
    FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid GROUP BY t.typname`);
  const dbEnums = new Map(enums.rows.map((r) => [r.name, r.values]));
  for (const e of dmmf.datamodel.enums) {
    const name = e.dbName ?? e.name;
    const want = e.values.map((v) => v.dbName ?? v.name);
    const got = dbEnums.get(name);
    if (!got) diffs.push(`enum ${name} is missing`);
    else if (got.join(',') !== want.join(','))
      diffs.push(`enum ${name}: database has [${got.join(', ')}], schema [${want.join(', ')}]`);
    dbEnums.delete(name);
  }
  for (const name of dbEnums.keys()) diffs.push(`enum ${name} exists in the database but not in the schema`);
  return diffs;
}

/** Tables and their columns: type, nullability, whether there is a default. */
async function tableDrift(db: Client, dmmf: Dmmf): Promise<string[]> {
  const diffs: string[] = [];
  const cols = await db.query<{
    table_name: string;
    column_name: string;
    type: string;
    not_null: boolean;
    has_default: boolean;
  }>(`
    SELECT c.relname AS table_name, a.attname AS column_name, format_type(a.atttypid, a.atttypmod) AS type,
           a.attnotnull AS not_null, (a.atthasdef) AS has_default
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND a.attnum > 0 AND NOT a.attisdropped`);
  const tables = new Map<string, Map<string, (typeof cols.rows)[number]>>();
  for (const r of cols.rows) {
    if (!tables.has(r.table_name)) tables.set(r.table_name, new Map());
    tables.get(r.table_name)!.set(r.column_name, r);
  }
  const modelTables = new Set<string>();
  for (const m of dmmf.datamodel.models) {
    const table = m.dbName ?? m.name;
    modelTables.add(table);
    const dbCols = tables.get(table);
    if (!dbCols) {
      diffs.push(`table ${table} is missing`);
      continue;
    }
    const seen = new Set<string>();
    for (const f of m.fields) {
      if (f.kind === 'object') continue;
      const c = col(f);
      seen.add(c);
      const got = dbCols.get(c);
      if (!got) {
        diffs.push(`column ${table}.${c} is missing`);
        continue;
      }
      const want = expectedType(f);
      if (got.type !== want) diffs.push(`column ${table}.${c}: database type ${got.type}, schema ${want}`);
      const wantNotNull = f.isRequired && !f.isList;
      if (got.not_null !== wantNotNull)
        diffs.push(
          `column ${table}.${c}: database ${got.not_null ? 'NOT NULL' : 'nullable'}, schema ${wantNotNull ? 'required' : 'optional'}`,
        );
      if (f.kind !== 'unsupported' && got.has_default !== f.hasDefaultValue) {
        diffs.push(
          `column ${table}.${c}: database ${got.has_default ? 'has' : 'has no'} default, schema ${f.hasDefaultValue ? 'has' : 'has no'} default`,
        );
      }
    }
    for (const c of dbCols.keys())
      if (!seen.has(c)) diffs.push(`column ${table}.${c} exists in the database but not in the schema`);
  }
  for (const t of tables.keys()) {
    if (!modelTables.has(t) && t !== '_prisma_migrations')
      diffs.push(`table ${t} exists in the database but not in the schema`);
  }
  return diffs;
}

/** What the schema wants and the database has, each as a set of one-line descriptions: what is in only one. */
function setDrift(what: string, want: Set<string>, got: Set<string>): string[] {
  const diffs: string[] = [];
  for (const k of want) if (!got.has(k)) diffs.push(`${what} missing in the database: ${k}`);
  for (const k of got) if (!want.has(k)) diffs.push(`${what} in the database but not in the schema: ${k}`);
  return diffs;
}

/** Indexes, primary keys and unique constraints: compare column lists, uniqueness, order, method. */
async function indexDrift(db: Client, dmmf: Dmmf): Promise<string[]> {
  const byModel = new Map(dmmf.datamodel.models.map((m) => [m.name, m]));
  const idx = await db.query<{
    table_name: string;
    index_name: string;
    is_unique: boolean;
    is_primary: boolean;
    method: string;
    columns: string[];
    desc: boolean[];
  }>(`
    SELECT t.relname AS table_name, i.relname AS index_name, ix.indisunique AS is_unique, ix.indisprimary AS is_primary,
           am.amname AS method,
           array(SELECT a.attname FROM unnest(ix.indkey) WITH ORDINALITY k(attnum, ord)
                 JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum ORDER BY k.ord)::text[] AS columns,
           array(SELECT (o & 1) = 1 FROM unnest(ix.indoption::int2[]) WITH ORDINALITY x(o, ord) ORDER BY x.ord)::boolean[] AS desc
    FROM pg_index ix JOIN pg_class t ON t.oid = ix.indrelid JOIN pg_class i ON i.oid = ix.indexrelid
    JOIN pg_am am ON am.oid = i.relam JOIN pg_namespace n ON n.oid = t.relnamespace
    WHERE n.nspname = 'public' AND t.relname <> '_prisma_migrations' AND NOT t.relispartition`);
  const key = (table: string, kind: string, columns: string[], desc: boolean[], method: string) =>
    `${table} ${kind} ${method} (${columns.map((c, i) => `${c}${desc[i] ? ' DESC' : ''}`).join(', ')})`;
  const dbIdx = new Set(
    idx.rows.map((r) =>
      key(r.table_name, r.is_primary ? 'pk' : r.is_unique ? 'unique' : 'index', r.columns, r.desc, r.method),
    ),
  );
  const wantIdx = new Set<string>();
  for (const i of dmmf.datamodel.indexes) {
    const m = byModel.get(i.model)!;
    const table = m.dbName ?? m.name;
    const fieldCol = (name: string) => col(m.fields.find((f) => f.name === name)!);
    const kind = i.type === 'id' ? 'pk' : i.type === 'unique' ? 'unique' : 'index';
    const method = (i.algorithm ?? 'BTree').toLowerCase() === 'gin' ? 'gin' : 'btree';
    wantIdx.add(
      key(
        table,
        kind,
        i.fields.map((f) => fieldCol(f.name)),
        i.fields.map((f) => f.sortOrder === 'desc'),
        method,
      ),
    );
  }
  return setDrift('index', wantIdx, dbIdx);
}

/** Foreign keys with their referential actions. */
async function foreignKeyDrift(db: Client, dmmf: Dmmf): Promise<string[]> {
  const byModel = new Map(dmmf.datamodel.models.map((m) => [m.name, m]));
  const fks = await db.query<{
    table_name: string;
    columns: string[];
    ref_table: string;
    ref_columns: string[];
    on_delete: string;
  }>(`
    SELECT c.conrelid::regclass::text AS table_name, c.confrelid::regclass::text AS ref_table,
           array(SELECT attname FROM pg_attribute WHERE attrelid = c.conrelid AND attnum = ANY(c.conkey))::text[] AS columns,
           array(SELECT attname FROM pg_attribute WHERE attrelid = c.confrelid AND attnum = ANY(c.confkey))::text[] AS ref_columns,
           c.confdeltype::text AS on_delete
    FROM pg_constraint c WHERE c.contype = 'f' AND c.conparentid = 0`);
  const actions: Record<string, string> = {
    a: 'NoAction',
    r: 'Restrict',
    c: 'Cascade',
    n: 'SetNull',
    d: 'SetDefault',
  };
  const dbFks = new Set(
    fks.rows.map(
      (r) =>
        `${r.table_name}(${r.columns.join(',')}) -> ${r.ref_table}(${r.ref_columns.join(',')}) on delete ${actions[r.on_delete]}`,
    ),
  );
  const wantFks = new Set<string>();
  for (const m of dmmf.datamodel.models) {
    for (const f of m.fields) {
      if (f.kind !== 'object' || !f.relationFromFields?.length) continue;
      const target = byModel.get(f.type)!;
      const from = f.relationFromFields.map((n) => col(m.fields.find((x) => x.name === n)!));
      const to = (f.relationToFields ?? []).map((n) => col(target.fields.find((x) => x.name === n)!));
      const onDelete = f.relationOnDelete ?? (f.isRequired ? 'Restrict' : 'SetNull');
      wantFks.add(
        `${m.dbName ?? m.name}(${from.join(',')}) -> ${target.dbName ?? target.name}(${to.join(',')}) on delete ${onDelete}`,
      );
    }
  }
  return setDrift('foreign key', wantFks, dbFks);
}

export async function schemaDrift(databaseUrl: string, schemaFile = SCHEMA_FILE): Promise<string[]> {
  const dmmf = readDmmf(schemaFile);
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    return [
      ...(await enumDrift(db, dmmf)),
      ...(await tableDrift(db, dmmf)),
      ...(await indexDrift(db, dmmf)),
      ...(await foreignKeyDrift(db, dmmf)),
    ];
  } finally {
    await db.end();
  }
}
