import { Router } from 'express';
import type { UseCases } from '@sts/usecases';
import { keysPage } from '../views/keys';
import { overviewPage } from '../views/overview';
import { planPage } from '../views/plan';
import { formErrors, str } from './forms';
import { accountId, pageContext, setFlash } from './session';

/** Overview, API keys and plan pages (signed in). */
export function accountRouter(
  uc: UseCases,
  opts: {
    apiUrl: string;
    trialEnd?: (accountId: string) => Promise<{ endedAt: string; paused: string[] } | null>;
  },
): Router {
  const r = Router();

  r.get('/', async (req, res) => {
    const overview = await uc.overview(accountId(req));
    const ended = overview.trial.state === 'ended' ? await opts.trialEnd?.(accountId(req)) : null;
    const ctx = pageContext(req);
    if (ended && ended.paused.length > 0) {
      // the trial-end banner: which monitors were paused, and why
      const notice = `Your Starter trial ended on ${ended.endedAt.slice(0, 10)}. These monitors were paused (not deleted) because the Free plan allows ${overview.plan.maxMonitors}: ${ended.paused.join(', ')}. Resume one after pausing another, or upgrade.`;
      ctx.flash = { ...ctx.flash, error: notice };
    }
    res.type('html').send(overviewPage(ctx, overview));
  });

  r.get('/keys', async (req, res) => {
    const keys = await uc.keys.list(accountId(req));
    res.type('html').send(keysPage(pageContext(req), keys, opts.apiUrl));
  });

  r.post('/keys', async (req, res) => {
    const name = str(req, 'name');
    const scope = str(req, 'scope');
    try {
      const created = await uc.keys.create(accountId(req), { name: name.trim() || undefined, scope });
      setFlash(req, {
        secret: {
          label: `API key ${created.name || created.prefix} (${created.scope})`,
          value: created.key,
          hint: 'copy it now: it is not shown again.',
        },
      });
      res.redirect(303, '/keys');
    } catch (err) {
      const errors = formErrors(err, ['name', 'scope']);
      if (!errors) throw err;
      const keys = await uc.keys.list(accountId(req));
      res
        .status(422)
        .type('html')
        .send(keysPage(pageContext(req), keys, opts.apiUrl, { name, scope, errors }));
    }
  });

  r.post('/keys/:id/revoke', async (req, res) => {
    const revoked = await uc.keys.revoke(accountId(req), req.params.id ?? '');
    setFlash(req, { notice: `Key ${revoked.prefix}… revoked. It stops working at the gateway within seconds.` });
    res.redirect(303, '/keys');
  });

  r.get('/plan', async (req, res) => {
    const [overview, facts] = await Promise.all([uc.overview(accountId(req)), Promise.resolve(uc.plans.facts())]);
    res.type('html').send(planPage(pageContext(req), overview, facts));
  });

  r.post('/plan/trial', async (req, res) => {
    try {
      const account = await uc.plans.startTrial(accountId(req));
      setFlash(req, {
        notice: `Your Starter trial runs until ${account.trialEndsAt?.toISOString().slice(0, 10) ?? ''}.`,
      });
    } catch (err) {
      const errors = formErrors(err, []);
      if (!errors) throw err;
      setFlash(req, { error: errors._form });
    }
    res.redirect(303, '/plan');
  });

  return r;
}
