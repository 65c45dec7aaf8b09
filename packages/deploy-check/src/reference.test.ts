/**
 * The generated parts of the product reference in docs/ (api.md, webhooks.md, plans.md,
 * configuration.md) agree with the code they are generated from (scripts/reference.ts): change a
 * record, a payload contract, a header, a plan default or an env schema without regenerating, and
 * this fails.
 */
import { fillParts, generatedParts, referenceFiles } from '../../../scripts/reference';

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
