/**
 * Keeps asyncapi.yaml in step with the zod contracts: every routing key is a channel, every
 * object of every payload schema appears with the same required field list, and the header
 * schemas name the AMQP headers the client writes.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { contracts, DEAD_LETTER_EXCHANGE, EXCHANGE, HEADER_NAMES, ROUTING_KEYS } from './contracts';

const doc = readFileSync(path.join(__dirname, '..', 'asyncapi.yaml'), 'utf8');

interface JsonSchema {
  type?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  anyOf?: JsonSchema[];
  items?: JsonSchema;
}

function objectSchemas(schema: JsonSchema, out: JsonSchema[] = []): JsonSchema[] {
  if (schema.type === 'object') out.push(schema);
  for (const child of Object.values(schema.properties ?? {})) objectSchemas(child, out);
  for (const child of schema.anyOf ?? []) objectSchemas(child, out);
  if (schema.items) objectSchemas(schema.items, out);
  return out;
}

describe('asyncapi.yaml', () => {
  it('is AsyncAPI and names both exchanges', () => {
    expect(doc).toMatch(/^asyncapi: (2\.6\.0|3\.0\.0)$/m);
    expect(doc).toContain(`name: ${EXCHANGE}\n`);
    expect(doc).toContain('type: topic');
    expect(doc).toContain(DEAD_LETTER_EXCHANGE);
    expect(doc).toContain('x-dead-letter-routing-key: <queue>');
  });

  it.each(ROUTING_KEYS)('documents %s as a channel with its message', (key) => {
    expect(doc).toContain(`\n  ${key}:\n`);
    expect(doc).toContain(`messageType: ${key}\n`);
  });

  it.each(ROUTING_KEYS)('documents every field of the %s payload with the same required list', (key) => {
    const schema = z.toJSONSchema(contracts[key].payload) as JsonSchema;
    for (const obj of objectSchemas(schema)) {
      expect(doc).toContain(`required: [${(obj.required ?? []).join(', ')}]`);
      for (const field of Object.keys(obj.properties ?? {})) expect(doc).toMatch(new RegExp(`^\\s+${field}:$`, 'm'));
    }
  });

  it.each(ROUTING_KEYS)('documents the AMQP headers of %s', (key) => {
    const fields = Object.keys(contracts[key].headers.shape) as (keyof typeof HEADER_NAMES)[];
    expect(doc).toContain(`required: [${fields.map((f) => HEADER_NAMES[f]).join(', ')}]`);
  });
});
