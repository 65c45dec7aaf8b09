import { Router, type Request, type Response } from 'express';
import { standardWebhookSecret } from '@sts/signing';
import {
  RateLimitedError,
  UnavailableError,
  UnverifiedError,
  ValidationError,
  type MonitorView,
  type Preview,
  type RecoverOutcome,
  type UseCases,
} from '@sts/usecases';
import { attemptPage, deliveriesPage, deliveryRows, hitRows, hitsPage } from '../views/logs';
import {
  monitorFormPage,
  monitorPage,
  monitorsPage,
  watched,
  type MonitorFormMode,
  type MonitorFormValues,
} from '../views/monitors';
import { OUTCOMES_SHOWN, recoverNotice } from '../views/recover';
import { parseFormTime } from '../domain/since';
import { EVENTS_SHOWN } from '../views/eventsField';
import { formErrors, optionalInt, query, str, strings } from './forms';
import { accountId, pageContext, setFlash } from './session';

const PLAN = { free: 'Free', starter: 'Starter' } as const;
const MONITOR_FIELDS = ['target', 'query', 'keywords', 'exclude', 'lang', 'events', 'intervalSec', 'webhookUrl'];

function secretFlash(secret: string, standardSecret: string) {
  return {
    label: 'Signing secret',
    value: secret,
    hint: 'copy it into your receiver now: it is not shown again. Rotate to get a new one.',
    standard: { label: 'The same secret for Standard Webhooks libraries', value: standardSecret },
  };
}

/** Monitors, their webhook, delivery log and hit history (signed in). */
export function monitorRouter(uc: UseCases, opts: { liveRefreshMs: number }): Router {
  const r = Router();
  const shared = monitorHelpers(uc);
  monitorRoutes(r, uc, shared);
  webhookRoutes(r, uc, shared);
  logRoutes(r, uc, opts);
  recoverRoute(r, uc, opts);
  return r;
}

type Helpers = ReturnType<typeof monitorHelpers>;

/** What the route groups share: the plan facts, the form's values and the two page senders. */
function monitorHelpers(uc: UseCases) {
  const planFacts = async (req: Request) => {
    const overview = await uc.overview(accountId(req));
    const plan = overview.account.effectivePlan;
    return { overview, plan, facts: uc.plans.facts()[plan] };
  };
  const values = (req: Request): MonitorFormValues => ({
    target: str(req, 'target'),
    query: str(req, 'query'),
    keywords: str(req, 'keywords'),
    exclude: str(req, 'exclude'),
    lang: str(req, 'lang'),
    intervalSec: str(req, 'intervalSec'),
    webhookUrl: str(req, 'webhookUrl'),
    // the checkboxes' values when the form carried them: none ticked is [] (refused by the use-case)
    ...(str(req, EVENTS_SHOWN) === '1' ? { events: strings(req, 'events') } : {}),
  });
  const showMonitor = async (req: Request, m: MonitorView, status = 200, form = {}) => {
    const [{ facts }, payloads, record] = await Promise.all([
      planFacts(req),
      uc.webhooks.payloadPreview(accountId(req), m.id),
      uc.coverage.read(accountId(req), m.id),
    ]);
    const coverage = { record, now: new Date() };
    return { status, page: monitorPage(pageContext(req), m, facts.liveWebhooks, form, payloads, coverage) };
  };

  /** the monitor form (new or edit) with the plan's poll interval, its values and any field errors */
  const sendMonitorForm = async (
    req: Request,
    res: Response,
    mode: Parameters<typeof monitorFormPage>[1],
    v: MonitorFormValues,
    errors?: Parameters<typeof monitorFormPage>[3],
    preview?: Preview,
  ) => {
    const { facts } = await planFacts(req);
    res
      .status(errors ? 422 : 200)
      .type('html')
      .send(monitorFormPage(pageContext(req), mode, v, errors, facts.pollIntervalSec, preview));
  };
  return { planFacts, values, showMonitor, sendMonitorForm };
}

/** "Preview" on the monitor form: the same form again, with the last 50 posts marked. */
async function previewForm(req: Request, res: Response, uc: UseCases, h: Helpers, mode: MonitorFormMode) {
  const v = h.values(req);
  try {
    const preview = await uc.monitors.preview(accountId(req), {
      ...watchedInput(v, mode),
      keywords: v.keywords,
      exclude: v.exclude,
      lang: v.lang,
    });
    await h.sendMonitorForm(req, res, mode, v, undefined, preview);
  } catch (err) {
    // over the preview bound, upstream unavailable, address unverified: said on the form, which keeps its values
    const refused =
      err instanceof RateLimitedError || err instanceof UnavailableError || err instanceof UnverifiedError;
    const errors = refused ? { _form: err.message } : formErrors(err, MONITOR_FIELDS);
    if (!errors) throw err;
    if (err instanceof RateLimitedError) res.set('retry-after', String(err.retryAfterSec));
    await h.sendMonitorForm(req, res, mode, v, errors);
  }
}

/**
 * The form's username or query: on a new monitor whichever is filled in (both: refused by the
 * use-case, naming the query); an edit keeps the monitor's kind.
 */
function watchedInput(v: MonitorFormValues, mode: MonitorFormMode): { target?: string; query?: string } {
  if (mode.kind === 'edit') return mode.monitor.query !== null ? { query: v.query ?? '' } : { target: v.target ?? '' };
  const query = v.query?.trim() ? v.query : undefined;
  return { target: v.target ?? '', ...(query !== undefined ? { query } : {}) };
}

function monitorRoutes(r: Router, uc: UseCases, h: Helpers): void {
  const { planFacts, values, showMonitor, sendMonitorForm } = h;
  r.get('/monitors', async (req, res) => {
    const [monitors, { overview, plan }] = await Promise.all([uc.monitors.list(accountId(req)), planFacts(req)]);
    res.type('html').send(monitorsPage(pageContext(req), monitors, overview.monitors, PLAN[plan]));
  });

  r.get('/monitors/new', async (req, res) => {
    await sendMonitorForm(req, res, { kind: 'new' }, {});
  });

  r.post('/monitors', async (req, res) => {
    if (str(req, 'action') === 'preview') return previewForm(req, res, uc, h, { kind: 'new' });
    const v = values(req);
    try {
      const { monitor, secret } = await uc.monitors.create(accountId(req), {
        ...watchedInput(v, { kind: 'new' }),
        keywords: v.keywords,
        exclude: v.exclude,
        lang: v.lang,
        events: v.events,
        intervalSec: optionalInt(v.intervalSec ?? '', 'intervalSec'),
        webhookUrl: v.webhookUrl?.trim() || undefined,
      });
      setFlash(req, {
        notice: `Monitor of ${watched(monitor)} created.`,
        ...(secret ? { secret: secretFlash(secret, standardWebhookSecret(secret)) } : {}),
      });
      res.redirect(303, `/monitors/${monitor.id}`);
    } catch (err) {
      const errors = formErrors(err, MONITOR_FIELDS);
      if (!errors) throw err;
      await sendMonitorForm(req, res, { kind: 'new' }, v, errors);
    }
  });

  r.get('/monitors/:id', async (req, res) => {
    const m = await uc.monitors.get(accountId(req), req.params.id ?? '');
    const shown = await showMonitor(req, m);
    res.status(shown.status).type('html').send(shown.page);
  });

  r.get('/monitors/:id/edit', async (req, res) => {
    const m = await uc.monitors.get(accountId(req), req.params.id ?? '');
    const v = {
      ...(m.query !== null ? { query: m.query } : { target: m.targetUsername ?? '' }),
      keywords: m.keywords.join(', '),
      exclude: m.filters.exclude.join(', '),
      lang: m.filters.lang.join(', '),
      events: m.events,
      intervalSec: String(m.intervalSec),
    };
    await sendMonitorForm(req, res, { kind: 'edit', monitor: m }, v);
  });

  r.post('/monitors/:id', async (req, res) => {
    const id = req.params.id ?? '';
    const m = await uc.monitors.get(accountId(req), id);
    if (str(req, 'action') === 'preview') return previewForm(req, res, uc, h, { kind: 'edit', monitor: m });
    const v = values(req);
    try {
      await uc.monitors.update(accountId(req), id, {
        ...(m.query !== null ? { query: v.query ?? '' } : { target: v.target }),
        keywords: v.keywords,
        exclude: v.exclude,
        lang: v.lang,
        events: v.events,
        intervalSec: optionalInt(v.intervalSec ?? '', 'intervalSec'),
      });
      setFlash(req, { notice: 'Monitor saved.' });
      res.redirect(303, `/monitors/${id}`);
    } catch (err) {
      const errors = formErrors(err, MONITOR_FIELDS);
      if (!errors) throw err;
      await sendMonitorForm(req, res, { kind: 'edit', monitor: m }, v, errors);
    }
  });

  for (const action of ['pause', 'resume'] as const) {
    r.post(`/monitors/:id/${action}`, async (req, res) => {
      const m = await uc.monitors[action](accountId(req), req.params.id ?? '');
      setFlash(req, {
        notice: action === 'pause' ? 'Monitor paused: no checks until you resume it.' : 'Monitor resumed.',
      });
      res.redirect(303, `/monitors/${m.id}`);
    });
  }

  r.post('/monitors/:id/delete', async (req, res) => {
    await uc.monitors.remove(accountId(req), req.params.id ?? '');
    setFlash(req, { notice: 'Monitor deleted.' });
    res.redirect(303, '/monitors');
  });
}

function webhookRoutes(r: Router, uc: UseCases, h: Helpers): void {
  const { showMonitor } = h;
  r.post('/monitors/:id/webhook', async (req, res) => {
    const id = req.params.id ?? '';
    const m = await uc.monitors.get(accountId(req), id);
    const url = str(req, 'webhookUrl').trim();
    try {
      const { webhook, secret, standardSecret } = await uc.webhooks.set(accountId(req), id, url);
      setFlash(req, { notice: `${webhook.label} URL saved.`, secret: secretFlash(secret, standardSecret) });
      res.redirect(303, `/monitors/${id}`);
    } catch (err) {
      const errors = formErrors(err, ['webhookUrl']);
      if (!errors) throw err;
      const shown = await showMonitor(req, m, 422, { url, errors });
      res.status(shown.status).type('html').send(shown.page);
    }
  });

  r.post('/monitors/:id/webhook/rules', async (req, res) => {
    const id = req.params.id ?? '';
    const m = await uc.monitors.get(accountId(req), id);
    const settings = { retryPolicy: str(req, 'retryPolicy'), ordering: str(req, 'ordering') };
    try {
      await uc.webhooks.configure(accountId(req), id, settings);
      setFlash(req, { notice: 'Delivery rules saved.' });
      res.redirect(303, `/monitors/${id}`);
    } catch (err) {
      const errors = formErrors(err, ['retryPolicy', 'ordering']);
      if (!errors) throw err;
      const shown = await showMonitor(req, m, 422, { errors });
      res.status(shown.status).type('html').send(shown.page);
    }
  });

  r.post('/monitors/:id/webhook/rotate', async (req, res) => {
    const id = req.params.id ?? '';
    const now = str(req, 'now') === '1';
    const { secret, standardSecret, webhook } = await uc.webhooks.rotate(accountId(req), id, { now });
    setFlash(req, {
      notice: webhook.previousSecretUntil
        ? `Signing secret rotated. Until ${webhook.previousSecretUntil.toISOString()} (or "Use the new secret now") X-Service-Signature stays on the old secret and webhook-signature carries both.`
        : 'Signing secret rotated now. The old secret no longer signs deliveries.',
      secret: secretFlash(secret, standardSecret),
    });
    res.redirect(303, `/monitors/${id}`);
  });

  r.post('/monitors/:id/webhook/use-new-secret', async (req, res) => {
    const id = req.params.id ?? '';
    await uc.webhooks.useNewSecret(accountId(req), id);
    setFlash(req, { notice: 'Every delivery is now signed with the new secret only.' });
    res.redirect(303, `/monitors/${id}`);
  });

  r.post('/monitors/:id/webhook/delete', async (req, res) => {
    const id = req.params.id ?? '';
    await uc.monitors.get(accountId(req), id);
    await uc.webhooks.remove(accountId(req), id);
    setFlash(req, { notice: 'Webhook removed.' });
    res.redirect(303, `/monitors/${id}`);
  });

  r.post('/monitors/:id/webhook/enable', async (req, res) => {
    const id = req.params.id ?? '';
    const w = await uc.webhooks.enable(accountId(req), id);
    setFlash(req, {
      notice:
        w.health.held > 0
          ? `Webhook enabled: the ${w.health.held} held events go out first, oldest first.`
          : 'Webhook enabled.',
    });
    res.redirect(303, `/monitors/${id}`);
  });

  r.post('/monitors/:id/webhook/test', async (req, res) => {
    const id = req.params.id ?? '';
    const queued = await uc.webhooks.sendTest(accountId(req), id);
    setFlash(req, {
      notice: `Test ping queued (delivery ${queued.deliveryId}). It appears in the delivery log within seconds.`,
    });
    res.redirect(303, `/monitors/${id}/deliveries`);
  });
}

function logRoutes(r: Router, uc: UseCases, opts: { liveRefreshMs: number }): void {
  r.get('/monitors/:id/deliveries', async (req, res) => {
    const id = req.params.id ?? '';
    const cursor = query(req, 'cursor');
    const m = await uc.monitors.get(accountId(req), id); // another account's id: 404 before any cursor check
    const page = await uc.deliveries.list(accountId(req), id, { cursor });
    const ctx = pageContext(req);
    if (query(req, 'fragment')) res.type('html').send(deliveryRows(ctx, page).value);
    else res.type('html').send(deliveriesPage(ctx, m, page, cursor !== undefined, opts.liveRefreshMs));
  });

  r.get('/monitors/:id/hits', async (req, res) => {
    const id = req.params.id ?? '';
    const cursor = query(req, 'cursor');
    const [m, page] = await Promise.all([
      uc.monitors.get(accountId(req), id),
      uc.hits.list(accountId(req), id, { cursor }),
    ]);
    if (query(req, 'fragment')) res.type('html').send(hitRows(page).value);
    else res.type('html').send(hitsPage(pageContext(req), m, page, cursor !== undefined, opts.liveRefreshMs));
  });

  r.get('/deliveries/:id', async (req, res) => {
    const d = await uc.deliveries.detail(accountId(req), req.params.id ?? '');
    const m = await uc.monitors.get(accountId(req), d.monitorId);
    res.type('html').send(attemptPage(pageContext(req), m, d));
  });

  r.post('/deliveries/:id/redeliver', async (req, res) => {
    const queued = await uc.deliveries.redeliver(accountId(req), req.params.id ?? '');
    setFlash(req, { notice: `Redelivery queued with the same delivery id ${queued.deliveryId}.` });
    res.redirect(303, `/monitors/${queued.monitorId}/deliveries`);
  });
}

const FORM_TIME_HINT = 'must be a date and time (UTC), such as 2026-11-24T10:00';

/** Recover: redeliver by window and outcome (one outbound action of the account). */
function recoverRoute(r: Router, uc: UseCases, opts: { liveRefreshMs: number }): void {
  r.post('/monitors/:id/deliveries/recover', async (req, res) => {
    const id = req.params.id ?? '';
    const form = { since: str(req, 'since'), until: str(req, 'until'), outcomes: strings(req, 'outcomes') };
    try {
      const since = parseFormTime(form.since);
      if (!since) throw new ValidationError('since', FORM_TIME_HINT);
      const until = form.until.trim() === '' ? undefined : parseFormTime(form.until);
      if (until === null) throw new ValidationError('until', FORM_TIME_HINT);
      // the use-case names an unknown one; without the form's checkboxes, the default (all three)
      const outcomes = str(req, OUTCOMES_SHOWN) ? (form.outcomes as RecoverOutcome[]) : undefined;
      const recovered = await uc.deliveries.recover(accountId(req), id, { since, until, outcomes });
      setFlash(req, { notice: recoverNotice(recovered) });
      res.redirect(303, `/monitors/${id}/deliveries`);
    } catch (err) {
      const errors = formErrors(err, ['since', 'until', 'outcomes']);
      if (!errors) throw err;
      const m = await uc.monitors.get(accountId(req), id);
      const page = await uc.deliveries.list(accountId(req), id, {});
      const shown = deliveriesPage(pageContext(req), m, page, false, opts.liveRefreshMs, { ...form, errors });
      res.status(422).type('html').send(shown);
    }
  });
}
