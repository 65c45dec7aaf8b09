/**
 * The MCP server over the public API: the tools of ./tools.ts registered on the SDK's McpServer,
 * calling the API through the typed client (so every call is metered like any client's). The
 * write tools are registered when writes are allowed and the key has the manage scope, which one free call tells: a
 * management read of a monitor that does not exist answers 404 to a manage key and 403
 * INSUFFICIENT_SCOPE to a read key (errors use no quota).
 */
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { isApiError, type StsClient } from '@sts/client';
import { callTool, TOOLS } from './tools';

export type KeyScope = 'read' | 'manage';

/** the key's scope, asked of the API; an unreachable API or a refused key throws (the caller says so) */
export async function keyScope(client: StsClient): Promise<KeyScope> {
  try {
    await client.monitors.deliveries(randomUUID(), { limit: 1 });
    return 'manage';
  } catch (err) {
    if (isApiError(err, 'NOT_FOUND')) return 'manage';
    if (isApiError(err, 'INSUFFICIENT_SCOPE')) return 'read';
    throw err;
  }
}

/** the write tools need both a manage key and the operator's STS_MCP_ALLOW_WRITES=1 */
export function createMcpServer(
  client: StsClient,
  opts: { scope: KeyScope; allowWrites: boolean; version: string },
): McpServer {
  const server = new McpServer({ name: 'social-timeline', version: opts.version });
  for (const t of TOOLS) {
    if (t.manage && (opts.scope !== 'manage' || !opts.allowWrites)) continue;
    server.registerTool(
      t.name,
      {
        title: t.title,
        description: t.description,
        inputSchema: t.input,
        annotations: { title: t.title, ...t.annotations },
      },
      // the SDK checks the args against this tool's own schema before calling (typed per entry in the table)
      (args: unknown) => callTool(t, client, args),
    );
  }
  return server;
}
