/**
 * The webhook bodies (native / Discord / Slack) live in @sts/messaging (webhookBodies.ts) so the
 * dashboard's payload preview is built by the very functions the dispatcher sends with.
 */
import { buildBody, MAX_BODY_BYTES, sequenceHeader, type WebhookKind, type WebhookPayload } from '@sts/messaging';

export {
  buildBody,
  DISCORD_LIMITS,
  discordBody,
  escapeSlack,
  nativeBody,
  slackBody,
  truncate,
  type HitPayload,
  type TestPayload,
  type WebhookKind,
  type WebhookPayload,
} from '@sts/messaging';

/**
 * What every attempt of a delivery sends, built once: the body as text (the attempt log's copy)
 * and as UTF-8 bytes (what is signed, sent and measured), and the sequence header; or, for a body
 * over MAX_BODY_BYTES, the attempt log's error.
 */
export type RequestBody =
  { kind: 'body'; body: string; bytes: Buffer; sequence: number | undefined } | { kind: 'too-large'; error: string };

export function requestBody(kind: WebhookKind, payload: WebhookPayload): RequestBody {
  const body = buildBody(kind, payload);
  const bytes = Buffer.from(body, 'utf8');
  if (bytes.length > MAX_BODY_BYTES) {
    return { kind: 'too-large', error: `payload is ${bytes.length} bytes, more than the ${MAX_BODY_BYTES}-byte limit` };
  }
  return { kind: 'body', body, bytes, sequence: sequenceHeader(kind, payload) };
}
