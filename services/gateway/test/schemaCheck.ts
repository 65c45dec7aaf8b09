/**
 * Checks a value against a schema of the OpenAPI document with ajv (JSON Schema 2020-12, the
 * dialect of OpenAPI 3.1, with ajv-formats for date-time and uri). Tests use it to hold the
 * document to what the API really answers. Object schemas are closed for the check
 * (closeObjects): an answer with a field the document does not name fails.
 *
 * `schema` may `$ref` into the document (`#/components/schemas/User`); the refs are resolved
 * against `root`. Returns one line per problem (`$.path: message`), none when the value fits.
 */
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { closeObjects } from '@sts/api-contract';

const DOC_ID = 'openapi.json';
const validators = new WeakMap<object, Ajv2020>();

function ajvFor(root: object): Ajv2020 {
  let ajv = validators.get(root);
  if (!ajv) {
    // strict: false because the document holds OpenAPI keywords (paths, content, ...) next to the schemas
    ajv = new Ajv2020({ allErrors: true, strict: false });
    addFormats(ajv);
    ajv.addSchema(closeObjects(root), DOC_ID);
    validators.set(root, ajv);
  }
  return ajv;
}

/** Points `#/...` refs at the document, so a schema taken out of it resolves its refs there. */
function anchored(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(anchored);
  if (node === null || typeof node !== 'object') return node;
  return Object.fromEntries(
    Object.entries(node).map(([key, value]) => [
      key,
      key === '$ref' && typeof value === 'string' && value.startsWith('#') ? `${DOC_ID}${value}` : anchored(value),
    ]),
  );
}

function describe(e: ErrorObject): string {
  const path = `$${e.instancePath.replace(/\//g, '.')}`;
  if (e.keyword === 'additionalProperties') {
    return `${path}.${String(e.params.additionalProperty)}: not in the document`;
  }
  return `${path}: ${e.message ?? e.keyword}`;
}

export function validate(schema: unknown, value: unknown, root: object): string[] {
  const check = ajvFor(root).compile(closeObjects(anchored(schema)) as object);
  return check(value) ? [] : (check.errors ?? []).map(describe);
}
