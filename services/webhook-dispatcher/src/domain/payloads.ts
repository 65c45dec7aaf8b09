/**
 * The webhook bodies (native / Discord / Slack) live in @sts/messaging (webhookBodies.ts) so the
 * dashboard's payload preview is built by the very functions the dispatcher sends with.
 */
export {
  buildBody,
  DISCORD_LIMITS,
  discordBody,
  escapeSlack,
  MAX_BODY_BYTES,
  nativeBody,
  sequenceHeader,
  slackBody,
  truncate,
  type HitPayload,
  type TestPayload,
  type WebhookKind,
  type WebhookPayload,
} from '@sts/messaging';
