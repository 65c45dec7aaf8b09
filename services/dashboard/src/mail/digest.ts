/**
 * Notices and their digest, as pure functions. A notice (a watched account's status, an
 * endpoint's health, a quota threshold) is not mailed on its own: the notices of an account are
 * gathered into one digest per MAIL_DIGEST_MINUTES, listing at most MAX_DIGEST_ITEMS of them
 * (oldest first) and then how many more. A digest of one notice is that notice's own mail.
 * Every other mail (verification, reset, trial) is an account mail: sent at once, in its own lane.
 */
import { html } from '../views/html';
import type { MailLane } from './outbox';
import { renderMail, type MailSpec, type RenderedMail } from './templates';

const NOTICE_KINDS = ['quota', 'webhook', 'target'] as const;
export type NoticeSpec = Extract<MailSpec, { kind: (typeof NOTICE_KINDS)[number] }>;

/** the most notices a digest lists; the rest are counted ("and N more") */
export const MAX_DIGEST_ITEMS = 50;

const PRODUCT = 'Social Timeline';

export function isNotice(spec: MailSpec): spec is NoticeSpec {
  return (NOTICE_KINDS as readonly string[]).includes(spec.kind);
}

export function laneOf(spec: MailSpec): MailLane {
  return isNotice(spec) ? 'notice' : 'account';
}

/** where a notice's reader goes next (the same page its own mail links to) */
function noticeLink(spec: NoticeSpec, base: string): string {
  switch (spec.kind) {
    case 'quota':
      return `${base}/`;
    case 'webhook':
      return `${base}/monitors/${spec.monitorId}/deliveries`;
    case 'target':
      return `${base}/monitors`;
  }
}

/**
 * The digest of `total` notices, `items` the oldest of them (at most MAX_DIGEST_ITEMS are listed,
 * whatever is passed); `base` is DASHBOARD_PUBLIC_URL without a trailing slash.
 */
export function renderDigest(items: readonly NoticeSpec[], total: number, base: string): RenderedMail {
  const listed = items.slice(0, MAX_DIGEST_ITEMS);
  if (total === 1 && listed.length === 1) return renderMail(listed[0]!, base);
  const lines = listed.map((spec) => ({ subject: renderMail(spec, base).subject, href: noticeLink(spec, base) }));
  const more = Math.max(0, total - listed.length);
  const subject = `${total} notices about your ${PRODUCT} account`;
  const intro = `${total} things changed on your account since the last email (the oldest first):`;
  const moreLine = more > 0 ? `and ${more} more.` : '';
  const outro = 'You get this email because notifications are on for your account; turn them off on the account page.';
  const text =
    [intro, lines.map((l) => `- ${l.subject}: ${l.href}`).join('\n') + (more > 0 ? `\n${moreLine}` : ''), outro].join(
      '\n\n',
    ) + `\n\n-- ${PRODUCT}\n`;
  const body = html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <title>${subject}</title>
      </head>
      <body style="font-family: sans-serif; line-height: 1.5; color: #111">
        <h1 style="font-size: 20px">${subject}</h1>
        <p>${intro}</p>
        <ul>
          ${lines.map((l) => html`<li><a href="${l.href}">${l.subject}</a></li>`)}
        </ul>
        ${more > 0 ? html`<p>${moreLine}</p>` : ''}
        <p><a href="${`${base}/monitors`}">See your monitors</a></p>
        <p style="color: #555; font-size: 12px">${outro}</p>
        <p style="color: #555; font-size: 12px">${PRODUCT}</p>
      </body>
    </html>`.toString();
  return { subject, text, html: body };
}
