/** The MCP server's environment: a missing or malformed setting exits 2 naming it (main.ts). */
import { DEFAULT_BASE_URL } from '@sts/client';
import { z } from 'zod';

export const mcpEnvSchema = z.object({
  /** an API key of the service; a manage key adds the monitor tools */
  STS_API_KEY: z
    .string({ error: 'STS_API_KEY is required: an API key of the service (a manage key adds the monitor tools)' })
    .min(1, 'STS_API_KEY is required: an API key of the service (a manage key adds the monitor tools)'),
  /** the gateway's address */
  STS_BASE_URL: z
    .url({ protocol: /^https?$/, error: 'STS_BASE_URL must be an http(s) URL, e.g. http://127.0.0.1:3000' })
    .default(DEFAULT_BASE_URL),
});
