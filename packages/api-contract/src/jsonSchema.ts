/**
 * The record schemas as JSON Schema 2020-12 (the dialect of OpenAPI 3.1), through zod 4's own
 * `z.toJSONSchema`. Chosen over an OpenAPI generator (@asteasolutions/zod-to-openapi): the
 * document's paths, parameters and headers are few and stable and stay plain data in the
 * gateway; only the record shapes needed one source, and zod already converts them, without
 * another dependency or zod-specific extension API.
 *
 * The output is normalised to the form the document has always had, so clients see the same
 * document: `["string", "null"]` type arrays instead of `anyOf` with null; no zod-internal
 * safe-integer bounds; no regex behind `format: date-time`; no `$schema`/`$id` per component; and
 * objects left open (no `additionalProperties: false`): the published shapes may grow by fields
 * without breaking a validating client. Tests close them again (see closeObjects) to catch a
 * serialiser that sends a field the document does not name.
 */
import { z } from 'zod';

export type JsonSchema = { [key: string]: unknown };

const SAFE = Number.MAX_SAFE_INTEGER;

function normaliseEach(map: JsonSchema): JsonSchema {
  return Object.fromEntries(Object.entries(map).map(([name, schema]) => [name, normalise(schema)]));
}

/** One schema node; `properties` and `$defs` hold names, not keywords, so their maps are walked by normaliseEach. */
function normalise(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(normalise);
  if (node === null || typeof node !== 'object') return node;
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    out[key] =
      (key === 'properties' || key === '$defs') && value ? normaliseEach(value as JsonSchema) : normalise(value);
  }
  delete out.$schema;
  delete out.$id;
  delete out.additionalProperties;
  if (out.type === 'integer') {
    if (out.minimum === -SAFE) delete out.minimum;
    if (out.maximum === SAFE) delete out.maximum;
  }
  if (out.format === 'date-time') delete out.pattern;
  const anyOf = out.anyOf;
  if (Array.isArray(anyOf) && anyOf.length === 2) {
    const [first, second] = anyOf as JsonSchema[];
    if (second?.type === 'null' && Object.keys(second).length === 1 && typeof first?.type === 'string') {
      delete out.anyOf;
      return { ...first, type: [first.type, 'null'], ...out };
    }
  }
  return out;
}

/**
 * Converts named schemas together: a schema that appears inside another is written as
 * `{"$ref": refBase + name}` when it is one of the named ones.
 */
export function toJsonSchemas<K extends string>(
  schemas: Record<K, z.ZodType>,
  refBase = '#/components/schemas/',
): Record<K, JsonSchema> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries<z.ZodType>(schemas)) registry.add(schema, { id });
  const { schemas: converted } = z.toJSONSchema(registry, { uri: (id) => `${refBase}${id}` });
  return normaliseEach(converted) as Record<K, JsonSchema>;
}

/**
 * A copy in which every object schema with `properties` refuses other properties: what the tests
 * validate real answers against, so a field the document does not name fails them.
 */
export function closeObjects<T>(node: T): T {
  if (Array.isArray(node)) return node.map(closeObjects) as T;
  if (node === null || typeof node !== 'object') return node;
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) out[key] = closeObjects(value);
  if (out.properties && typeof out.properties === 'object') out.additionalProperties = false;
  return out as T;
}
