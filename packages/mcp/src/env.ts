/** The MCP server's environment: a missing or malformed setting exits 2 naming it (main.ts). */
import { DEFAULT_BASE_URL } from '@sts/client';
import { z } from 'zod';
import { isLoopbackUrl } from './loopback';

export const mcpEnvSchema = z.object({
  /** an API key of the service; a manage key adds the monitor tools */
  STS_API_KEY: z
    .string({ error: 'STS_API_KEY is required: an API key of the service (a manage key adds the monitor tools)' })
    .min(1, 'STS_API_KEY is required: an API key of the service (a manage key adds the monitor tools)'),
  /** the gateway's address: https://, or plain http:// only to a loopback address (the key travels in every request) */
  STS_BASE_URL: z
    .url({ protocol: /^https?$/, error: 'STS_BASE_URL must be an http(s) URL, e.g. http://127.0.0.1:3000' })
    .refine((u) => u.startsWith('https:') || isLoopbackUrl(u), {
      error:
        'STS_BASE_URL must be https:// (plain http:// only to a loopback address: the API key is sent with every request)',
    })
    .default(DEFAULT_BASE_URL),
  /** 1 offers the write tools to a manage key */
  STS_MCP_ALLOW_WRITES: z
    .enum(['0', '1'], { error: 'STS_MCP_ALLOW_WRITES must be 0 or 1 (1 offers the write tools to a manage key)' })
    .default('0'),
});
