/**
 * The generated parts of the product reference in docs/ (api.md, webhooks.md, plans.md,
 * configuration.md) agree with the code they are generated from (scripts/reference.ts): change a
 * record, a payload contract, a header, a plan default or an env schema without regenerating, and
 * this fails.
 */
import { ERROR_CODES } from '../../../packages/api-contract/src';
import { ERROR_TABLE } from '../../../scripts/errorCodes';
import { fillParts, generatedParts, referenceFiles } from '../../../scripts/reference';
import { openApiDocument } from '../../../services/gateway/src/http/openapi';

const parts = () => generatedParts();

describe('docs/ product reference', () => {
  it('has every generated part up to date (regenerate with `npx tsx scripts/reference.ts`)', () => {
    const files = referenceFiles();
    expect(files.map((f) => f.file).sort()).toEqual([
      'docs/api.md',
      'docs/configuration.md',
      'docs/plans.md',
      'docs/webhooks.md',
    ]);
    for (const f of files) expect({ file: f.file, text: f.current }).toEqual({ file: f.file, text: f.expected });
  });

  it('names the exact contract values the code uses', () => {
    const parts = generatedParts();
    expect(parts['webhooks.md']!.headers).toContain('X-Service-Signature');
    expect(parts['webhooks.md']!.headers).toContain('`Service-Webhook/1.0`');
    expect(parts['webhooks.md']!['monitor.hit']).toContain('`tweet.authorUsername`');
    expect(parts['api.md']!.endpoints).toContain('`/api/v1/monitors/{id}/hits`');
    expect(parts['api.md']!['error-codes']).toContain('`RATE_LIMIT_EXCEEDED`');
    expect(parts['plans.md']!.limits).toContain('150,000 (`PLAN_STARTER_MONTHLY_QUOTA`)');
  });

  it('has one error row per code, whose statuses include every status the OpenAPI document gives it', () => {
    const table = parts()['api.md']!['error-codes']!;
    for (const code of ERROR_CODES) expect(table.split(`| \`${code}\` |`)).toHaveLength(2);
    const paths = openApiDocument.paths as unknown as Record<
      string,
      Record<string, { responses: Record<string, { description: string }> }>
    >;
    const given: string[] = [];
    for (const methods of Object.values(paths))
      for (const op of Object.values(methods))
        for (const [status, r] of Object.entries(op.responses))
          for (const code of ERROR_CODES)
            if (new RegExp(`\\b${code}\\b`).test(r.description)) given.push(`${code} ${status}`);
    expect(given.length).toBeGreaterThan(20);
    const missing = given.filter((g) => {
      const [code, status] = g.split(' ') as [keyof typeof ERROR_TABLE, string];
      return !ERROR_TABLE[code].status.includes(Number(status));
    });
    expect([...new Set(missing)]).toEqual([]);
    expect(table).toContain('| `HTTP_VERSION_NOT_SUPPORTED` | 505 |');
  });

  it('lists every variable of every service schema, with its default, bounds and comment', () => {
    const variables = parts()['configuration.md']!.variables!;
    const section = (name: string) => variables.split('### ').find((s) => s.startsWith(`${name}\n`)) ?? '';
    for (const name of ['dashboard', 'gateway', 'poller', 'read-api', 'webhook-dispatcher'])
      expect(section(name)).toContain('| `OPS_PORT` |');
    expect(section('dashboard')).toMatch(/\| `SMTP_URL` \| unset \| string \| outgoing mail: /);
    expect(section('gateway')).toContain('| `INTERNAL_TOKEN` | **required** | string, 16+ characters |');
    expect(section('gateway')).toContain('| `OPS_PORT` | `3100` | integer ≥ 0 ≤ 65535 |');
    expect(section('webhook-dispatcher')).toContain('| `WEBHOOK_TIMEOUT_MS` | `15000` | integer ≥ 1 ≤ 120000 |');
    expect(variables).toContain('### `npm run mcp` (the MCP server)');
  });

  it('replaces only what stands between the markers, and refuses a file without them', () => {
    const text = 'intro\n<!-- generated:a -->\nold\n<!-- end generated:a -->\noutro\n';
    expect(fillParts(text, { a: 'new' })).toBe(
      'intro\n<!-- generated:a -->\n\nnew\n\n<!-- end generated:a -->\noutro\n',
    );
    expect(() => fillParts('no markers', { a: 'new' })).toThrow('missing markers <!-- generated:a -->');
  });
});
