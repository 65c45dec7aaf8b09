/**
 * The mails, as pure functions: subject, plain text and HTML (escaped by the views' `html`
 * template), links built from DASHBOARD_PUBLIC_URL. Every mail says why it was sent and, for
 * notifications, where to turn them off.
 */
import { html, type SafeHtml } from '../views/html';

export interface RenderedMail {
  subject: string;
  text: string;
  html: string;
}

export type MailSpec =
  | { kind: 'verify'; token: string; expiresAt: Date }
  | { kind: 'already_registered' }
  | { kind: 'reset'; token: string; expiresAt: Date }
  | { kind: 'quota'; threshold: 80 | 100; used: number; quota: number; month: string }
  | {
      kind: 'webhook';
      state: 'failing' | 'broken' | 'disabled' | 'held_dropped' | 'due_dropped' | 'recovered';
      consecutiveFailures: number;
      monitorId: string;
      target: string;
    }
  | {
      kind: 'target';
      status: 'ok' | 'suspended' | 'protected' | 'not_found' | 'renamed';
      username: string;
      newUsername: string | null;
      monitors: number;
    }
  | { kind: 'trial_ending'; endsAt: string }
  | { kind: 'trial_ended'; paused: string[] };

const PRODUCT = 'Social Timeline';

function page(title: string, paragraphs: (string | SafeHtml)[], link?: { href: string; label: string }): string {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <title>${title}</title>
      </head>
      <body style="font-family: sans-serif; line-height: 1.5; color: #111">
        <h1 style="font-size: 20px">${title}</h1>
        ${paragraphs.map((p) => html`<p>${p}</p>`)}
        ${
          link
            ? html`<p><a href="${link.href}">${link.label}</a></p>
                <p style="color:#555">${link.href}</p>`
            : ''
        }
        <p style="color: #555; font-size: 12px">${PRODUCT}</p>
      </body>
    </html>`.toString();
}

function text(paragraphs: string[], link?: { href: string; label: string }): string {
  return [...paragraphs, ...(link ? [`${link.label}: ${link.href}`] : []), `-- ${PRODUCT}`].join('\n\n') + '\n';
}

function mail(subject: string, paragraphs: string[], link?: { href: string; label: string }): RenderedMail {
  return { subject, text: text(paragraphs, link), html: page(subject, paragraphs, link) };
}

const OPT_OUT = 'You get this email because notifications are on for your account; turn them off on the account page.';

/** Renders one mail; `base` is DASHBOARD_PUBLIC_URL without a trailing slash. */
export function renderMail(spec: MailSpec, base: string): RenderedMail {
  switch (spec.kind) {
    case 'verify':
      return mail(
        `Verify your email address for ${PRODUCT}`,
        [
          'Welcome! Confirm that this address is yours to create API keys, save webhook URLs and start the Starter trial.',
          'The link works once and expires in 24 hours. If you did not sign up, ignore this email.',
        ],
        { href: `${base}/verify?token=${encodeURIComponent(spec.token)}`, label: 'Verify my email address' },
      );
    case 'already_registered':
      return mail(
        `You already have a ${PRODUCT} account`,
        [
          'Someone (probably you) tried to sign up with this address, but it already has an account.',
          `Sign in at ${base}/signin, or reset your password if you forgot it. If it was not you, nothing changed.`,
        ],
        { href: `${base}/reset`, label: 'Reset my password' },
      );
    case 'reset':
      return mail(
        `Reset your ${PRODUCT} password`,
        [
          'Use this link to choose a new password. It works once and expires in 30 minutes; every other session of your account is signed out.',
          'If you did not ask for it, ignore this email: your password stays as it is.',
        ],
        { href: `${base}/reset/confirm?token=${encodeURIComponent(spec.token)}`, label: 'Choose a new password' },
      );
    case 'quota':
      return mail(
        spec.threshold === 100
          ? `You have used your whole monthly API quota (${spec.month})`
          : `You have used ${spec.threshold} % of your monthly API quota (${spec.month})`,
        [
          `Your account has made ${spec.used.toLocaleString('en-US')} of ${spec.quota.toLocaleString('en-US')} API calls this month.`,
          spec.threshold === 100
            ? 'Further calls are refused (429) until the quota resets at the start of next month, or until you upgrade.'
            : 'At 100 % further calls are refused (429) until the quota resets at the start of next month.',
          OPT_OUT,
        ],
        { href: `${base}/`, label: 'See your usage' },
      );
    case 'webhook': {
      if (spec.state === 'recovered') return recoveredMail(spec, base);
      const what =
        spec.state === 'failing'
          ? `has failed ${spec.consecutiveFailures} times in a row`
          : spec.state === 'broken'
            ? 'was marked broken (it answers in a way that cannot succeed)'
            : spec.state === 'held_dropped'
              ? 'is disabled, and more events arrived than are held for it (or they were held too long): the oldest held ones were dropped and are logged as skipped; Recover can send them again once the endpoint works'
              : spec.state === 'due_dropped'
                ? 'fails, and more deliveries wait for it (retries, or events in line behind a fifo delivery) than are kept: the oldest waiting ones were dropped and are logged as skipped; Recover can send them again once the endpoint works'
                : 'was disabled after 3 days of only failures: new events are held (a bounded number, for a few days) and sent in order once it is enabled again (a successful Test webhook, or Enable)';
      const subject =
        spec.state === 'failing'
          ? 'is failing'
          : spec.state === 'held_dropped'
            ? 'dropped held events'
            : spec.state === 'due_dropped'
              ? 'dropped waiting deliveries'
              : `is ${spec.state}`;
      return mail(
        `Your webhook for ${spec.target} ${subject}`,
        [
          `The webhook endpoint of your monitor watching ${spec.target} ${what}.`,
          'Check the delivery log for the answers it gave, fix the endpoint, then use Test webhook.',
          OPT_OUT,
        ],
        { href: `${base}/monitors/${spec.monitorId}/deliveries`, label: 'Open the delivery log' },
      );
    }
    case 'target':
      return targetMail(spec, base);
    case 'trial_ending':
      return mail(
        `Your Starter trial ends on ${spec.endsAt.slice(0, 10)}`,
        [
          `Your 30-day Starter trial ends on ${spec.endsAt.slice(0, 10)} (in 3 days or less).`,
          'After that the account is on the Free plan: monitors over the Free limit are paused (not deleted), and hits are no longer delivered live.',
          OPT_OUT,
        ],
        { href: `${base}/plan`, label: 'Compare the plans' },
      );
    case 'trial_ended':
      return mail(
        'Your Starter trial has ended',
        [
          'Your account is on the Free plan now.',
          spec.paused.length > 0
            ? `These monitors were paused (not deleted) to fit the Free limit: ${spec.paused.join(', ')}.`
            : 'No monitor had to be paused.',
          OPT_OUT,
        ],
        { href: `${base}/monitors`, label: 'See your monitors' },
      );
  }
}

/** A failing, disabled or broken endpoint works again (a success, or it was enabled). */
function recoveredMail(spec: Extract<MailSpec, { kind: 'webhook' }>, base: string): RenderedMail {
  return mail(
    `Your webhook for ${spec.target} works again`,
    [
      `The webhook endpoint of your monitor watching ${spec.target} works again: a delivery or a Test webhook succeeded, or it was enabled.`,
      'Live events go out as usual; any held while it was disabled are sent first, oldest first.',
      OPT_OUT,
    ],
    { href: `${base}/monitors/${spec.monitorId}/deliveries`, label: 'Open the delivery log' },
  );
}

const TARGET_SUBJECTS: Record<Extract<MailSpec, { kind: 'target' }>['status'], string> = {
  ok: 'is available again',
  suspended: 'is suspended',
  protected: 'is protected',
  not_found: 'no longer exists',
  renamed: 'was renamed',
};

/** A watched account's status changed: what it means for the monitors and what happens now. */
function targetMail(spec: Extract<MailSpec, { kind: 'target' }>, base: string): RenderedMail {
  const which = spec.monitors === 1 ? 'Your monitor watching' : `Your ${spec.monitors} monitors watching`;
  const what =
    spec.status === 'renamed'
      ? `@${spec.username} is now @${spec.newUsername ?? '?'}. ${which} it follow the account (same id) and now watch @${spec.newUsername ?? '?'}.`
      : spec.status === 'ok'
        ? `@${spec.username} can be read again; ${which.toLowerCase()} it are polled as usual.`
        : `${which} @${spec.username} cannot read its posts while it ${TARGET_SUBJECTS[spec.status]}: polling slows down until it is back, and nothing is lost when it returns.`;
  return mail(`@${spec.username} ${TARGET_SUBJECTS[spec.status]}`, [what, OPT_OUT], {
    href: `${base}/monitors`,
    label: 'See your monitors',
  });
}

/** When a mail's link stops working (its token's expiry); null for mails without such a link. */
export function linkExpiry(spec: MailSpec): Date | null {
  return spec.kind === 'verify' || spec.kind === 'reset' ? spec.expiresAt : null;
}

/** The http(s) links of a plain-text mail (the development sink prints them). */
export function linksOf(textBody: string): string[] {
  return [...textBody.matchAll(/https?:\/\/[^\s<>"]+/g)].map((m) => m[0]);
}
