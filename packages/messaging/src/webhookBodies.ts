/**
 * The bodies a webhook receives. Pure functions, no I/O. The webhook-dispatcher sends exactly
 * these; the dashboard's payload preview shows them (one home, so the preview cannot drift).
 *
 * - native: the docs/webhooks.md payloads, field for field (camelCase), serialised once; the
 *   signature is computed over exactly these bytes.
 * - discord: an Execute Webhook body with one embed (title, description = the post's text,
 *   author, link to the post, timestamp, footer naming the monitor) and `allowed_mentions`
 *   mentioning nobody; every length within Discord's limits (content 2000, title 256,
 *   description 4096, author name 256, footer 2048, all embed text together 6000).
 * - slack: an incoming-webhook body with `text` (the notification fallback) and `blocks`
 *   (a mrkdwn section with the linked title and the text, and a context block naming the
 *   monitor and the time); `&`, `<` and `>` escaped so text cannot form links or mentions.
 */
import {
  PROFILE_FIELDS,
  type MonitorHitEvent,
  type MonitorPostDeletedEvent,
  type MonitorProfileChangedEvent,
  type MonitorTargetUnavailableEvent,
  type MonitorTestEvent,
} from './contracts';

/** The payload types are the message contracts of @sts/messaging (docs/webhooks.md), not copies. */
export type HitPayload = MonitorHitEvent;
export type TestPayload = MonitorTestEvent;
type MonitorRef = MonitorHitEvent['monitor'];
export type ProfileChangedPayload = MonitorProfileChangedEvent;
export type TargetUnavailablePayload = MonitorTargetUnavailableEvent;
export type PostDeletedPayload = MonitorPostDeletedEvent;
export type WebhookPayload =
  HitPayload | TestPayload | ProfileChangedPayload | TargetUnavailablePayload | PostDeletedPayload;
/** the events told as a notice (not a post): a profile change, a target's status, a deleted post */
type NoticePayload = ProfileChangedPayload | TargetUnavailablePayload | PostDeletedPayload;

function isNotice(p: WebhookPayload): p is NoticePayload {
  return (
    p.event === 'monitor.profile_changed' ||
    p.event === 'monitor.target_unavailable' ||
    p.event === 'monitor.post_deleted'
  );
}
export type WebhookKind = 'native' | 'discord' | 'slack';

/** The largest body the dispatcher sends; larger ones are logged as failed, never sent. */
export const MAX_BODY_BYTES = 256 * 1024;

export const DISCORD_LIMITS = {
  content: 2000,
  title: 256,
  description: 4096,
  authorName: 256,
  footer: 2048,
  total: 6000,
} as const;

const SLACK_LIMITS = { sectionText: 3000, contextText: 2000, text: 3000 } as const;

const ELLIPSIS = '…';

/** Cuts `s` to at most `max` UTF-16 units, ending with "…", never splitting a surrogate pair. */
export function truncate(s: string, max: number): string {
  if (s.length <= max) return s;
  if (max <= 0) return '';
  let cut = s.slice(0, max - ELLIPSIS.length);
  const last = cut.charCodeAt(cut.length - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut = cut.slice(0, -1);
  return cut + ELLIPSIS;
}

/** The public link of a post. */
function postUrl(username: string, tweetId: string): string {
  return `https://x.com/${encodeURIComponent(username)}/status/${encodeURIComponent(tweetId)}`;
}

function profileUrl(username: string): string {
  return `https://x.com/${encodeURIComponent(username)}`;
}

/** `sequence` last, when the event has one (the test event has none) */
function withSequence<P extends WebhookPayload>(p: P, sequence: number | undefined): P {
  return sequence === undefined ? p : { ...p, sequence };
}

/**
 * The payload a native webhook delivers: a copy with exactly the documented fields, in the order
 * of docs/webhooks.md (what the events endpoint answers too).
 */
export function webhookPayload(p: WebhookPayload): WebhookPayload {
  if (p.event === 'monitor.test') return fieldsOf(p);
  return withSequence(fieldsOf(p), p.sequence);
}

function fieldsOf(p: WebhookPayload): WebhookPayload {
  const monitor: MonitorRef = {
    id: p.monitor.id,
    targetUsername: p.monitor.targetUsername,
    query: p.monitor.query,
    keywords: p.monitor.keywords && p.monitor.keywords.length > 0 ? [...p.monitor.keywords] : null,
  };
  if (p.event === 'monitor.test') return { event: 'monitor.test', monitor, test: true };
  if (p.event === 'monitor.profile_changed') {
    const profile = (f: ProfileChangedPayload['before']) => ({
      username: f.username,
      name: f.name,
      description: f.description,
      profileImageUrl: f.profileImageUrl,
      verified: f.verified,
    });
    return {
      event: p.event,
      monitor,
      userId: p.userId,
      changed: [...p.changed],
      before: profile(p.before),
      after: profile(p.after),
      detectedAt: p.detectedAt,
    };
  }
  if (p.event === 'monitor.post_deleted') {
    return {
      event: p.event,
      monitor,
      postId: p.postId,
      username: p.username,
      hit: p.hit && { id: p.hit.id, text: p.hit.text, createdAt: p.hit.createdAt },
      deletedAt: p.deletedAt,
    };
  }
  if (p.event === 'monitor.target_unavailable') {
    return {
      event: p.event,
      monitor,
      status: p.status,
      previousStatus: p.previousStatus,
      username: p.username,
      newUsername: p.newUsername,
      detail: p.detail,
      detectedAt: p.detectedAt,
    };
  }
  return {
    event: 'monitor.hit',
    monitor,
    tweet: {
      id: p.tweet.id,
      text: p.tweet.text,
      authorUsername: p.tweet.authorUsername,
      createdAt: p.tweet.createdAt,
    },
    detectedAt: p.detectedAt,
  };
}

export function nativeBody(p: WebhookPayload): string {
  return JSON.stringify(webhookPayload(p));
}

// ---- Discord ----

const URL_IN_TEXT = /https?:\/\/[^\s<>]+/g;

/**
 * Backslash-escapes Discord markdown so a post's text shows as written: no bold/italic/spoilers,
 * no masked links, no headings or lists, no `<@id>` mention syntax. URLs are left as they are so
 * Discord still links them.
 */
function escapeDiscordMarkdown(s: string): string {
  const escapePart = (part: string) =>
    part.replace(/([\\*_~`|[\]<>])/g, '\\$1').replace(/^([ \t]*)([#>-]|\d+\.)/gm, '$1\\$2');
  let out = '';
  let last = 0;
  for (const m of s.matchAll(URL_IN_TEXT)) {
    out += escapePart(s.slice(last, m.index)) + m[0];
    last = m.index + m[0].length;
  }
  return out + escapePart(s.slice(last));
}

function cutEscaped(s: string, max: number): string {
  let out = truncate(s, max);
  if (out.length < s.length) {
    // do not leave a lone escaping backslash before the ellipsis
    const body = out.slice(0, -ELLIPSIS.length);
    const trailing = /\\+$/.exec(body)?.[0].length ?? 0;
    if (trailing % 2 === 1) out = body.slice(0, -1) + ELLIPSIS;
  }
  return out;
}

/** What a monitor watches, as the formats name it: `@alice` or `the query launch OR release`. */
function watched(m: MonitorRef): string {
  return m.targetUsername !== null ? `@${m.targetUsername}` : `the query ${m.query ?? ''}`;
}

function monitorLine(m: MonitorRef): string {
  const kw = m.keywords && m.keywords.length ? ` · keywords: ${m.keywords.join(', ')}` : '';
  return m.targetUsername !== null ? `Monitor @${m.targetUsername}${kw}` : `Monitor query: ${m.query ?? ''}${kw}`;
}

export interface DiscordBody {
  content?: string;
  allowed_mentions: { parse: never[] };
  embeds: {
    title: string;
    url?: string;
    description: string;
    author?: { name: string; url: string };
    timestamp?: string;
    footer: { text: string };
    color: number;
  }[];
}

/** A notice (not a post): its title, its lines (plain text), the account's link and the time. */
interface Notice {
  title: string;
  lines: string[];
  username: string;
  at: string;
  color: number;
}

/** How a profile field reads in a notice. */
function fieldText(value: string | boolean | null): string {
  if (value === null || value === '') return '(none)';
  return typeof value === 'boolean' ? (value ? 'yes' : 'no') : value;
}

const FIELD_LABELS: Record<(typeof PROFILE_FIELDS)[number], string> = {
  username: 'Username',
  name: 'Display name',
  description: 'Bio',
  profileImageUrl: 'Avatar',
  verified: 'Verified',
};

const STATUS_TEXT: Record<TargetUnavailablePayload['status'], string> = {
  suspended: 'is suspended',
  protected: 'is protected (its posts are private)',
  not_found: 'no longer exists',
  renamed: 'was renamed',
};

/** The notice of a profile change, a target's status change or a deleted post. */
function noticeOf(p: NoticePayload): Notice {
  if (p.event === 'monitor.post_deleted') {
    return {
      title: `@${p.username} deleted a post`,
      lines: [`Post ${p.postId}`, ...(p.hit ? [`It said: ${p.hit.text}`] : [])],
      username: p.username,
      at: p.deletedAt,
      color: 0x99aab5,
    };
  }
  if (p.event === 'monitor.profile_changed') {
    const lines = PROFILE_FIELDS.filter((f) => p.changed.includes(f)).map(
      (f) => `${FIELD_LABELS[f]}: ${fieldText(p.before[f])} → ${fieldText(p.after[f])}`,
    );
    return {
      title: `@${p.after.username} changed their profile`,
      lines,
      username: p.after.username,
      at: p.detectedAt,
      color: 0xfee75c,
    };
  }
  const now = p.newUsername ? ` The monitor now watches @${p.newUsername}.` : '';
  return {
    title: `@${p.username} ${STATUS_TEXT[p.status]}`,
    lines: [`${p.detail}${now}`],
    username: p.newUsername ?? p.username,
    at: p.detectedAt,
    color: 0xed4245,
  };
}

function discordNotice(n: Notice, footer: string): DiscordBody {
  const title = truncate(n.title, DISCORD_LIMITS.title);
  const room = Math.min(DISCORD_LIMITS.description, DISCORD_LIMITS.total - title.length - footer.length);
  const description = cutEscaped(escapeDiscordMarkdown(n.lines.join('\n')), room);
  return {
    allowed_mentions: { parse: [] },
    embeds: [
      {
        title,
        url: profileUrl(n.username),
        description,
        timestamp: n.at,
        footer: { text: footer },
        color: n.color,
      },
    ],
  };
}

export function discordBody(p: WebhookPayload): DiscordBody {
  const footer = truncate(monitorLine(p.monitor), DISCORD_LIMITS.footer);
  if (isNotice(p)) return discordNotice(noticeOf(p), footer);
  if (p.event === 'monitor.test') {
    const title = 'Test webhook';
    const description = cutEscaped(
      escapeDiscordMarkdown(
        `This is a test ping for the monitor watching ${watched(p.monitor)}. Your webhook is set up correctly.`,
      ),
      DISCORD_LIMITS.description,
    );
    return {
      allowed_mentions: { parse: [] },
      embeds: [{ title, description, footer: { text: footer }, color: 0x57f287, timestamp: new Date().toISOString() }],
    };
  }
  const author = truncate(`@${p.tweet.authorUsername}`, DISCORD_LIMITS.authorName);
  const title = truncate(`New post by @${p.tweet.authorUsername}`, DISCORD_LIMITS.title);
  const used = title.length + author.length + footer.length;
  const room = Math.min(DISCORD_LIMITS.description, DISCORD_LIMITS.total - used);
  const text = p.tweet.text.trim() === '' ? '(no text)' : p.tweet.text;
  const description = cutEscaped(escapeDiscordMarkdown(text), room);
  return {
    allowed_mentions: { parse: [] },
    embeds: [
      {
        title,
        url: postUrl(p.tweet.authorUsername, p.tweet.id),
        description,
        author: { name: author, url: profileUrl(p.tweet.authorUsername) },
        timestamp: p.tweet.createdAt,
        footer: { text: footer },
        color: 0x1d9bf0,
      },
    ],
  };
}

// ---- Slack ----

/**
 * Slack's control characters as HTML entities (so `<!channel>` cannot be written), and the
 * broadcast words `@channel`, `@here`, `@everyone` broken with a word joiner (U+2060) so no
 * client turns them into a ping; mrkdwn text objects are also sent with `verbatim: true`
 * (Slack then parses no mentions or links in them), and the fallback `text` with `parse: 'none'`.
 */
export function escapeSlack(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/@(channel|here|everyone)\b/gi, '@\u2060$1');
}

function cutSlack(escaped: string, max: number): string {
  let out = truncate(escaped, max);
  if (out.length < escaped.length) {
    // do not cut an entity in half
    const body = out.slice(0, -ELLIPSIS.length);
    const amp = body.lastIndexOf('&');
    if (amp >= 0 && !body.slice(amp).includes(';')) out = body.slice(0, amp) + ELLIPSIS;
  }
  return out;
}

export interface SlackBody {
  text: string;
  blocks: (
    | { type: 'section'; text: { type: 'mrkdwn'; text: string; verbatim: true } }
    | { type: 'context'; elements: { type: 'mrkdwn'; text: string; verbatim: true }[] }
  )[];
  parse: 'none';
  unfurl_links: false;
  unfurl_media: false;
}

function slackTime(iso: string): string {
  const ms = Date.parse(iso);
  if (!Number.isFinite(ms)) return escapeSlack(iso);
  return `<!date^${Math.floor(ms / 1000)}^{date_short_pretty} {time}|${escapeSlack(iso)}>`;
}

/** A Slack message: its notification text, one mrkdwn section and one context line. */
function slackMessage(text: string, section: string, context: string): SlackBody {
  return {
    text,
    blocks: [
      { type: 'section', text: { type: 'mrkdwn', text: section, verbatim: true } },
      { type: 'context', elements: [{ type: 'mrkdwn', text: context, verbatim: true }] },
    ],
    parse: 'none',
    unfurl_links: false,
    unfurl_media: false,
  };
}

/** `text` after a linked bold heading, the whole section within Slack's limit */
function slackSection(heading: string, text: string): string {
  return heading + cutSlack(text, SLACK_LIMITS.sectionText - heading.length);
}

function slackNotice(n: Notice, context: string): SlackBody {
  const heading = `*<${profileUrl(n.username)}|${escapeSlack(n.title)}>*\n`;
  const body = escapeSlack(n.lines.join('\n'));
  return slackMessage(
    cutSlack(`${escapeSlack(n.title)}: ${body}`, SLACK_LIMITS.text),
    slackSection(heading, body),
    `${context} · seen ${slackTime(n.at)}`,
  );
}

export function slackBody(p: WebhookPayload): SlackBody {
  const context = cutSlack(escapeSlack(monitorLine(p.monitor)), SLACK_LIMITS.contextText - 200);
  if (isNotice(p)) return slackNotice(noticeOf(p), context);
  if (p.event === 'monitor.test') {
    const text = escapeSlack(
      `Test webhook: this is a test ping for the monitor watching ${watched(p.monitor)}. Your webhook is set up correctly.`,
    );
    return slackMessage(text, `*Test webhook*\n${text}`, context);
  }
  const user = escapeSlack(p.tweet.authorUsername);
  const link = postUrl(p.tweet.authorUsername, p.tweet.id);
  const body = escapeSlack(p.tweet.text.trim() === '' ? '(no text)' : p.tweet.text);
  return slackMessage(
    cutSlack(`New post by @${user}: ${body}`, SLACK_LIMITS.text),
    slackSection(`*<${link}|New post by @${user}>*\n`, body),
    `${context} · posted ${slackTime(p.tweet.createdAt)} · <${link}|open post>`,
  );
}

/**
 * The X-Service-Sequence value of a delivery: the event's `sequence` on a native webhook. Discord
 * and Slack bodies are those platforms' own formats, which carry no sequence.
 */
export function sequenceHeader(kind: WebhookKind, payload: WebhookPayload): number | undefined {
  if (kind !== 'native' || payload.event === 'monitor.test') return undefined;
  return payload.sequence;
}

/** The exact bytes to send for an endpoint of `kind`. */
export function buildBody(kind: WebhookKind, payload: WebhookPayload): string {
  switch (kind) {
    case 'native':
      return nativeBody(payload);
    case 'discord':
      return JSON.stringify(discordBody(payload));
    case 'slack':
      return JSON.stringify(slackBody(payload));
  }
}
