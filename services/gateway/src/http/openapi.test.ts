import { Ajv2020 } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import {
  COMPONENTS,
  COVERAGE_COMPONENTS,
  ERROR_CODES,
  MANAGE_COMPONENTS,
  type ErrorRecord,
  type HitRecord,
  type MonitorRecord,
  type TweetRecord,
  type UserRecord,
  listOf,
  MonitorRecord as MonitorSchema,
} from '@sts/api-contract';
import { openApiDocument } from './openapi';
import { validate } from '../../test/schemaCheck';

// The OAS 3.1 schema as published by the OpenAPI Initiative, in the form the maintained
// @seriousme/openapi-schema-validator ships for ajv ($dynamicRef replaced by $ref). That package's
// own entry point is ESM only, which jest here (CJS through @swc/jest) cannot load; the schema is data.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const oas31 = require('@seriousme/openapi-schema-validator/schemas/v3.1/schema.json') as Record<string, unknown>;

const doc = JSON.parse(JSON.stringify(openApiDocument)) as typeof openApiDocument;
const schemas = doc.components.schemas as Record<string, Record<string, unknown>>;

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document whose schemas are valid JSON Schema 2020-12', () => {
    const ajv = new Ajv2020({ allErrors: true, strict: false });
    addFormats(ajv);
    const check = ajv.compile(oas31);
    expect(check(doc) ? [] : check.errors).toEqual([]);
    expect(doc.openapi).toBe('3.1.0');
    // and the check is not a rubber stamp: a document without `info` or with a bad parameter fails
    expect(check({ ...doc, info: undefined })).toBe(false);
    const badParam = JSON.parse(JSON.stringify(doc)) as { paths: Record<string, { get?: { parameters?: object[] } }> };
    badParam.paths['/api/v1/search']!.get!.parameters!.push({ name: 'x', in: 'body' });
    expect(check(badParam)).toBe(false);
    // every component schema compiles under the 2020-12 dialect (refs into the document resolve)
    const dialect = new Ajv2020({ strict: false });
    addFormats(dialect);
    dialect.addSchema(doc, 'openapi.json');
    for (const name of Object.keys(schemas)) {
      expect([name, dialect.validateSchema(schemas[name]!)]).toEqual([name, true]);
      expect(() => dialect.getSchema(`openapi.json#/components/schemas/${name}`)).not.toThrow();
    }
  });

  it('names the record schemas of @sts/api-contract and nothing else', () => {
    expect(Object.keys(schemas).sort()).toEqual(
      Object.keys({ ...COMPONENTS, ...MANAGE_COMPONENTS, ...COVERAGE_COMPONENTS }).sort(),
    );
    const error = schemas.Error!.properties as Record<string, { enum?: string[] }>;
    expect(error.code!.enum).toEqual([...ERROR_CODES]);
    // the published promises, field by field (what clients already rely on)
    expect(schemas.User!.required).toEqual(['id', 'username', 'name', 'followers_count', 'verified']);
    expect(schemas.Monitor!.properties).toMatchObject({
      keywords: { type: ['array', 'null'], items: { type: 'string' } },
      last_check_at: { type: ['string', 'null'], format: 'date-time' },
      recent_hits: { type: 'array', items: { $ref: '#/components/schemas/Hit' } },
    });
    expect(schemas.Monitor!.required).not.toContain('recent_hits');
    expect(schemas.Tweet!.properties).toMatchObject({ author: { $ref: '#/components/schemas/User' } });
  });

  it('accepts what the serialiser types allow and refuses what they do not', () => {
    const user: UserRecord = { id: '1', username: 'a', name: 'A', followers_count: 1, verified: false };
    const tweet: TweetRecord = {
      id: '2',
      text: 't',
      author_id: '1',
      created_at: '2024-05-01T12:00:00.000Z',
      lang: null,
      public_metrics: { like_count: 0, retweet_count: 0, reply_count: 0, quote_count: 0 },
      referenced_tweets: [{ type: 'quoted', id: '1' }],
      author: user,
    };
    const hit: HitRecord = {
      id: 'h',
      tweet_id: '2',
      text: 't',
      author_username: 'a',
      tweet_created_at: '2024-05-01T12:00:00.000Z',
      detected_at: '2024-05-01T12:00:01.000Z',
      url: 'https://x.com/a/status/2',
    };
    const monitor: MonitorRecord = {
      id: 'm',
      target_username: 'a',
      query: null,
      keywords: null,
      filters: { exclude: ['replies'], lang: ['en'], excluded_keywords: [] },
      is_active: true,
      status: 'active',
      events: ['posts', 'profile'],
      target_status: 'suspended',
      target_status_at: '2024-05-01T12:00:00.000Z',
      check_interval_sec: 60,
      last_check_at: null,
      last_error: null,
      has_webhook: false,
      held_events: 0,
      created_at: '2024-05-01T12:00:00.000Z',
      updated_at: '2024-05-01T12:00:00.000Z',
      recent_hits: [hit],
    };
    const error: ErrorRecord = { error: 'e', code: 'QUOTA_EXCEEDED', request_id: 'r', retry_after: 5 };
    const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
    expect(validate(ref('Tweet'), tweet, doc)).toEqual([]);
    expect(validate(ref('Monitor'), monitor, doc)).toEqual([]);
    expect(validate(ref('Error'), error, doc)).toEqual([]);
    expect(validate(ref('Monitor'), { ...monitor, status: 'gone' }, doc)).toEqual([
      '$.status: must be equal to one of the allowed values',
    ]);
    expect(validate(ref('Hit'), { ...hit, detected_at: 'yesterday' }, doc)).toEqual([
      '$.detected_at: must match format "date-time"',
    ]);
    // the zod schemas and the document agree on the same value
    expect(listOf(MonitorSchema).safeParse({ data: [monitor], meta: { count: 1, next_cursor: null } }).success).toBe(
      true,
    );
  });
});
