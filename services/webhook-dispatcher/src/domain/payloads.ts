/**
 * The webhook bodies (native / Discord / Slack) live in @sts/messaging (webhookBodies.ts) so the
 * dashboard's payload preview is built by the very functions the dispatcher sends with.
 */
export {
  buildBody,
  canonicalPayload,
  DISCORD_LIMITS,
  discordBody,
  escapeDiscordMarkdown,
  escapeSlack,
  MAX_BODY_BYTES,
  nativeBody,
  postUrl,
  profileUrl,
  SLACK_LIMITS,
  slackBody,
  truncate,
  type DiscordBody,
  type HitPayload,
  type SlackBody,
  type TestPayload,
  type WebhookKind,
  type WebhookPayload,
} from '@sts/messaging';
import type { MonitorHitEvent } from '@sts/messaging';

export type MonitorRef = MonitorHitEvent['monitor'];
