/**
 * A small JSON-Schema checker for the subset the OpenAPI document uses (type incl. type arrays,
 * properties, required, items, enum, pattern, minimum/maximum, $ref into the document). Tests use
 * it to hold the document to what the API really answers.
 */
type Schema = Record<string, unknown>;

function typeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

export function validate(schema: unknown, value: unknown, root: unknown, path = '$'): string[] {
  let s = schema as Schema;
  if (typeof s.$ref === 'string') {
    s = s.$ref
      .replace(/^#\//, '')
      .split('/')
      .reduce<unknown>((node, key) => (node as Record<string, unknown>)[key], root) as Schema;
  }
  const errors: string[] = [];
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? (s.type as string[]) : [s.type as string];
    const t = typeOf(value);
    if (!types.includes(t) && !(t === 'integer' && types.includes('number')))
      return [`${path}: expected ${types.join('|')}, got ${t}`];
  }
  if (Array.isArray(s.enum) && !s.enum.includes(value)) errors.push(`${path}: ${JSON.stringify(value)} not in enum`);
  if (typeof value === 'string' && typeof s.pattern === 'string' && !new RegExp(s.pattern).test(value))
    errors.push(`${path}: does not match ${s.pattern}`);
  if (typeof value === 'string' && s.format === 'date-time' && Number.isNaN(Date.parse(value)))
    errors.push(`${path}: not a date-time`);
  if (typeof value === 'number') {
    if (typeof s.minimum === 'number' && value < s.minimum) errors.push(`${path}: below ${s.minimum}`);
    if (typeof s.maximum === 'number' && value > s.maximum) errors.push(`${path}: above ${s.maximum}`);
  }
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    const obj = value as Record<string, unknown>;
    for (const r of (s.required as string[] | undefined) ?? []) if (!(r in obj)) errors.push(`${path}.${r}: required`);
    const props = (s.properties as Record<string, unknown> | undefined) ?? {};
    for (const [k, v] of Object.entries(obj)) {
      if (props[k]) errors.push(...validate(props[k], v, root, `${path}.${k}`));
      else if (s.properties) errors.push(`${path}.${k}: not in the document`);
    }
  }
  if (Array.isArray(value) && s.items)
    value.forEach((v, i) => errors.push(...validate(s.items, v, root, `${path}[${i}]`)));
  return errors;
}
