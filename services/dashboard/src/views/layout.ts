import { html, type HtmlValue, type SafeHtml } from './html';

export interface Flash {
  notice?: string;
  error?: string;
  /** a secret shown once (API key, webhook signing secret) */
  secret?: { label: string; value: string; hint: string; standard?: { label: string; value: string } };
}

export interface PageContext {
  /** the synchronizer token every POST form carries */
  csrf: string;
  /** signed-in account's email; undefined on the public pages */
  email?: string;
  /** request path, to mark the current nav entry */
  path: string;
  flash?: Flash;
  /** signed in with an address not verified yet: the banner with the resend button */
  unverified?: boolean;
}

const NAV: [string, string][] = [
  ['/', 'Overview'],
  ['/keys', 'API keys'],
  ['/monitors', 'Monitors'],
  ['/plan', 'Plan'],
  ['/account', 'Account'],
];

function unverifiedBanner(ctx: PageContext): HtmlValue {
  if (!ctx.email || !ctx.unverified) return '';
  return html`<div class="alert" role="status">
    <p>
      Verify your email address to create API keys, save webhook URLs and start the Starter trial: follow the link we
      sent to ${ctx.email}.
    </p>
    ${postButton(ctx, { action: '/verify/resend', label: 'Send the link again', class: 'btn small' })}
  </div>`;
}

export function csrfField(ctx: PageContext): SafeHtml {
  return html`<input type="hidden" name="_csrf" value="${ctx.csrf}" />`;
}

/**
 * A form of one button that posts to `action` with the CSRF field (and `hidden` fields);
 * `confirm`: the question the page asks before it is sent (data-confirm).
 */
export function postButton(
  ctx: PageContext,
  o: { action: string; label: HtmlValue; class?: string; confirm?: string; hidden?: Record<string, string> },
): SafeHtml {
  const hidden = Object.entries(o.hidden ?? {}).map(([n, v]) => html`<input type="hidden" name="${n}" value="${v}" />`);
  return html`<form method="post" action="${o.action}" ${o.confirm ? html` data-confirm="${o.confirm}"` : ''}>
    ${csrfField(ctx)}${hidden}<button type="submit" class="${o.class ?? 'btn'}">${o.label}</button>
  </form>`;
}

function current(path: string, href: string): boolean {
  return href === '/' ? path === '/' : path === href || path.startsWith(`${href}/`);
}

function secretBox(secret: NonNullable<Flash['secret']>): SafeHtml {
  return html`<div class="secret" role="status">
    <p><strong>${secret.label}</strong> — ${secret.hint}</p>
    <div class="copyrow">
      <code id="shown-secret" class="mono">${secret.value}</code>
      <button type="button" class="btn small" data-copy="shown-secret" hidden>Copy</button>
    </div>
    ${
      secret.standard
        ? html`<p>${secret.standard.label}:</p>
            <div class="copyrow">
              <code id="shown-standard-secret" class="mono" data-testid="standard-secret"
                >${secret.standard.value}</code
              >
              <button type="button" class="btn small" data-copy="shown-standard-secret" hidden>Copy</button>
            </div>`
        : ''
    }
  </div>`;
}

function flashBlock(flash: Flash | undefined): HtmlValue {
  if (!flash) return '';
  return html`${flash.notice ? html`<p class="notice" role="status">${flash.notice}</p>` : ''}
  ${flash.error ? html`<p class="alert" role="alert">${flash.error}</p>` : ''}
  ${flash.secret ? secretBox(flash.secret) : ''}`;
}

export function layout(ctx: PageContext, title: string, body: HtmlValue, opts: { liveMs?: number } = {}): string {
  const nav = ctx.email
    ? html`<nav aria-label="Main">
          <ul>
            ${NAV.map(
              ([href, label]) =>
                html`<li>
                  <a href="${href}" ${current(ctx.path, href) ? html` aria-current="page"` : ''}>${label}</a>
                </li>`,
            )}
          </ul>
        </nav>
        <form method="post" action="/signout" class="signout">
          ${csrfField(ctx)}<span class="who">${ctx.email}</span>
          <button type="submit" class="btn link">Sign out</button>
        </form>`
    : html`<nav aria-label="Account">
        <ul>
          <li><a href="/signin" ${current(ctx.path, '/signin') ? html` aria-current="page"` : ''}>Sign in</a></li>
          <li><a href="/signup" ${current(ctx.path, '/signup') ? html` aria-current="page"` : ''}>Sign up</a></li>
        </ul>
      </nav>`;
  return `<!doctype html>${
    html`<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · Social Timeline dashboard</title>
<link rel="stylesheet" href="/static/app.css">
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
<script src="/static/app.js" defer></script>
</head>
<body${opts.liveMs ? html` data-live-ms="${opts.liveMs}"` : ''}>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <a class="brand" href="/">Social Timeline</a>
  ${nav}
</header>
<main id="main" tabindex="-1">
  <h1>${title}</h1>
  ${unverifiedBanner(ctx)} ${flashBlock(ctx.flash)}
  ${body}
</main>
<footer class="foot"><p>Social Timeline Service · dashboard</p></footer>
</body>
</html>`.value
  }`;
}
