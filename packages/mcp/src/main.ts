/**
 * `npm run mcp` (or `node --import tsx packages/mcp/src/main.ts`): the MCP server on stdio.
 * STS_API_KEY (required), STS_BASE_URL (default http://127.0.0.1:3000, the local gateway; plain
 * http only to a loopback address, since the key travels in every request) and
 * STS_MCP_ALLOW_WRITES (1 offers the write tools to a manage key; default 0); a missing or
 * malformed setting exits 2 naming it. Stdout carries the protocol only; messages go to stderr.
 */
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createClient } from '@sts/client';
import { mcpEnvSchema } from './env';
import { createMcpServer, keyScope } from './server';

const VERSION = '0.1.0';

async function main(): Promise<void> {
  const parsed = mcpEnvSchema.safeParse(process.env);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) process.stderr.write(`${issue.message}\n`);
    process.exit(2);
  }
  const env = parsed.data;
  const client = createClient({
    apiKey: env.STS_API_KEY,
    baseUrl: env.STS_BASE_URL,
    headers: { 'User-Agent': `sts-mcp/${VERSION}` },
  });
  let scope: 'read' | 'manage' = 'read';
  try {
    scope = await keyScope(client);
  } catch (err) {
    // the read tools still answer (each with the API's error until the API is reachable)
    process.stderr.write(
      `could not ask ${env.STS_BASE_URL} for the key's scope (${err instanceof Error ? err.message : String(err)}); offering the read tools\n`,
    );
  }
  const allowWrites = env.STS_MCP_ALLOW_WRITES === '1';
  const server = createMcpServer(client, { scope, allowWrites, version: VERSION });
  await server.connect(new StdioServerTransport());
  process.stderr.write(
    `social-timeline MCP server on stdio (${env.STS_BASE_URL}, ${scope} key, writes ${allowWrites ? 'allowed' : 'off'})\n`,
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
