/**
 * Keys, monitors, webhooks, the delivery log, redelivery and hit history on real PostgreSQL and
 * RabbitMQ: account isolation, plan limits, secrets shown once and stored encrypted, paging
 * cursors, and bad input refused with a named error and nothing saved.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger } from '@sts/common';
import {
  classifyWebhookUrl,
  createSecretBox,
  hashApiKey,
  WebhookUrlError,
  monitorLimitsFromEnv,
  planEnv,
  planMonitorEnv,
  plansFromEnv,
} from '@sts/core';
import type { Db } from '@sts/db';
import { AmqpClient, type Envelope } from '@sts/messaging';
import { createTestVhost, waitFor } from '@sts/testing';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import {
  ConflictError,
  createUseCases,
  evictApiKeyVia,
  NotConfiguredError,
  NotFoundError,
  PlanLimitError,
  RateLimitedError,
  redeliveryBudget,
  secretBoxFromEnv,
  ValidationError,
  type UseCases,
} from './index';
import { openStoreBed, rejection, type StoreBed } from '../test/storeBed';

const KEY = randomBytes(32).toString('hex');
const logger = createLogger({ service: 'usecases-test', level: 'error' });

describe('keys, monitors, webhooks, deliveries and hits', () => {
  let bed: StoreBed;
  let db: Db;
  let amqp: AmqpClient;
  let listener: AmqpClient;
  let uc: UseCases;
  const seen: Envelope<'monitor.test' | 'webhook.redeliver'>[] = [];
  let redis: Redis;
  let free: string; // a Free account
  let starter: string; // a Starter account
  let other: string; // another Starter account: its ids must be invisible to `starter`

  beforeAll(async () => {
    bed = await openStoreBed({ poolSize: 4 });
    ({ db, redis } = bed);
    const vhost = await createTestVhost();
    amqp = new AmqpClient({ url: vhost.url, logger, name: 'usecases-test' });
    await amqp.start();
    listener = new AmqpClient({ url: vhost.url, logger, name: 'usecases-test-listener' });
    await listener.start();
    await listener.consume({
      queue: 'usecases-test',
      bindings: ['monitor.test', 'webhook.redeliver'],
      handler: (e) => {
        seen.push(e);
        return Promise.resolve('ack' as const);
      },
    });
    const env = z.object({ ...planEnv, ...planMonitorEnv }).parse({});
    uc = createUseCases({
      db,
      plans: plansFromEnv(env),
      monitorLimits: monitorLimitsFromEnv(env),
      secretBox: secretBoxFromEnv(KEY),
      publisher: amqp,
      evictApiKey: evictApiKeyVia(redis),
      scrypt: { logN: 10, r: 8, p: 1 },
    });
    free = (await uc.admin.createAccount({ email: 'free@example.com' })).id;
    starter = (await uc.admin.createAccount({ email: 'starter@example.com', plan: 'starter' })).id;
    other = (await uc.admin.createAccount({ email: 'other@example.com', plan: 'starter' })).id;
  });

  afterAll(async () => {
    await listener.stop();
    await amqp.stop();
    await bed.close();
  });

  describe('API keys', () => {
    it('creates a key shown once (only its hash stored), lists without it, revokes within the account', async () => {
      const k = await uc.keys.create(starter, { name: '  ci   runner ' });
      expect(k.key).toMatch(/^sts_/);
      expect(k).toMatchObject({ name: 'ci runner', revokedAt: null, lastUsedAt: null });
      const row = await db.apiKey.findUniqueOrThrow({ where: { id: k.id } });
      expect(row.keyHash).toBe(hashApiKey(k.key));
      expect(JSON.stringify(row)).not.toContain(k.key);
      const listed = await uc.keys.list(starter);
      expect(listed.map((x) => x.id)).toContain(k.id);
      expect(JSON.stringify(listed)).not.toContain(k.key);
      expect(Object.keys(listed[0]!).sort()).toEqual([
        'createdAt',
        'id',
        'lastUsedAt',
        'name',
        'prefix',
        'revokedAt',
        'scope',
      ]);
      expect(listed[0]!.scope).toBe('read');

      // another account cannot see or revoke it
      expect(await uc.keys.list(other)).toEqual([]);
      expect(await rejection(uc.keys.revoke(other, k.id))).toMatchObject({ code: 'not_found', kind: 'apiKey' });
      expect((await db.apiKey.findUniqueOrThrow({ where: { id: k.id } })).revokedAt).toBeNull();

      // the gateways' cached lookup of the key (apikey:<sha256>) goes at once
      await redis.set(`apikey:${row.keyHash}`, JSON.stringify({ accountId: starter }));
      const revoked = await uc.keys.revoke(starter, k.id);
      expect(revoked).toMatchObject({ id: k.id, cacheEvicted: true });
      expect(revoked.revokedAt).toBeInstanceOf(Date);
      expect(await redis.get(`apikey:${row.keyHash}`)).toBeNull();
      // idempotent: the first revocation time stays
      expect((await uc.keys.revoke(starter, k.id)).revokedAt).toEqual(revoked.revokedAt);
      expect(await rejection(uc.keys.revoke(starter, 'not-a-uuid'))).toBeInstanceOf(NotFoundError);
    });

    it('refuses a too-long name with the field named, saving nothing', async () => {
      const before = await db.apiKey.count();
      const err = await rejection(uc.keys.create(starter, { name: 'x'.repeat(61) }));
      expect(err).toBeInstanceOf(ValidationError);
      expect(err.field).toBe('name');
      expect(await db.apiKey.count()).toBe(before);
    });
  });

  describe('monitors', () => {
    it('creates a monitor with a webhook: the secret is returned once and stored encrypted, monitor id bound in', async () => {
      const { monitor, secret } = await uc.monitors.create(starter, {
        target: '@NASA',
        keywords: 'launch, moon  landing,Launch',
        intervalSec: 120,
        webhookUrl: 'https://example.com/hooks/sts',
      });
      expect(secret).toMatch(/^whsec_/);
      expect(monitor).toMatchObject({
        targetUsername: 'NASA',
        keywords: ['launch', 'moon landing'],
        status: 'active',
        intervalSec: 120,
        hitCount: 0,
        lastCheckAt: null,
        webhook: { url: 'https://example.com/hooks/sts', kind: 'native', label: 'Webhook', isBroken: false },
      });
      expect(JSON.stringify(monitor)).not.toContain(secret!);
      const hook = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: monitor.id } });
      expect(hook.secretCiphertext).not.toContain(secret!);
      const box = createSecretBox(KEY);
      expect(box.decrypt(hook.secretCiphertext, monitor.id)).toBe(secret);
      expect(() => box.decrypt(hook.secretCiphertext, randomUUID())).toThrow();
      // reading it back never shows the secret
      expect(JSON.stringify(await uc.monitors.get(starter, monitor.id))).not.toContain(secret!);
      expect(JSON.stringify(await uc.monitors.list(starter))).not.toContain(secret!);
      await uc.monitors.remove(starter, monitor.id);
    });

    it('enforces the plan monitor limit with the limit and the upgrade path named (paused monitors count)', async () => {
      const first = await uc.monitors.create(free, { target: 'jack' });
      expect(first.secret).toBeNull();
      expect(first.monitor.intervalSec).toBe(300); // the Free plan's interval
      await uc.monitors.pause(free, first.monitor.id);
      const err = await rejection(uc.monitors.create(free, { target: 'nasa' }));
      expect(err).toBeInstanceOf(PlanLimitError);
      expect(err).toMatchObject({ code: 'plan_limit', limit: 1, plan: 'free' });
      expect(err.message).toMatch(/Free plan allows 1 monitor;.*Starter \(3 monitors\).*trial/);
      expect(await db.monitor.count({ where: { accountId: free } })).toBe(1);

      // Starter: 3, also when the creates race each other
      const results = await Promise.allSettled(
        ['a1', 'a2', 'a3', 'a4', 'a5'].map((t) => uc.monitors.create(other, { target: t })),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
      for (const r of results.filter((x) => x.status === 'rejected')) {
        expect(r.reason).toMatchObject({ code: 'plan_limit', limit: 3, plan: 'starter' });
      }
      expect(await db.monitor.count({ where: { accountId: other } })).toBe(3);
      // deleting one makes room
      const [m] = await uc.monitors.list(other);
      await uc.monitors.remove(other, m!.id);
      await uc.monitors.create(other, { target: 'a6' });
    });

    it('another account’s monitor id is NotFound for every monitor and webhook call, and nothing changes', async () => {
      const [theirs] = await uc.monitors.list(other);
      const id = theirs!.id;
      const calls: [string, () => Promise<unknown>][] = [
        ['get', () => uc.monitors.get(starter, id)],
        ['update', () => uc.monitors.update(starter, id, { keywords: 'x' })],
        ['pause', () => uc.monitors.pause(starter, id)],
        ['resume', () => uc.monitors.resume(starter, id)],
        ['remove', () => uc.monitors.remove(starter, id)],
        ['webhooks.set', () => uc.webhooks.set(starter, id, 'https://example.com/steal')],
        ['webhooks.set (bad URL)', () => uc.webhooks.set(starter, id, 'http://bad')],
        ['webhooks.rotate', () => uc.webhooks.rotate(starter, id)],
        ['webhooks.remove', () => uc.webhooks.remove(starter, id)],
        ['webhooks.sendTest', () => uc.webhooks.sendTest(starter, id)],
        ['deliveries.list', () => uc.deliveries.list(starter, id)],
        ['hits.list', () => uc.hits.list(starter, id)],
      ];
      for (const [name, call] of calls) {
        const err = await rejection(call());
        expect([name, err.constructor]).toEqual([name, NotFoundError]);
        expect(err.message).toBe(`no monitor with id ${id}`);
      }
      expect(await uc.monitors.get(other, id)).toEqual(theirs);
      expect(await db.webhookEndpoint.count({ where: { monitorId: id } })).toBe(0);
      expect(await rejection(uc.monitors.get(starter, 'garbage'))).toBeInstanceOf(NotFoundError);
    });

    it.each([
      [{ target: 'not a user!' }, 'target', /must be a username/],
      [{ target: '' }, 'target', /required/],
      [{ target: 'NASA', keywords: '!!!' }, 'keywords', /keyword "!!!" has no letters or digits/],
      [{ target: 'NASA', intervalSec: 30 }, 'intervalSec', /at least 60 seconds on the Starter plan/],
      [{ target: 'NASA', intervalSec: 86_401 }, 'intervalSec', /up to 86400/],
      [{ target: 'NASA', webhookUrl: 'http://example.com/h' }, 'webhookUrl', /must use https \(got http\)/],
      [{ target: 'NASA', webhookUrl: 'not a url' }, 'webhookUrl', /not a valid URL/],
      [{ target: 'NASA', webhookUrl: 'https://u:p@example.com/h' }, 'webhookUrl', /credentials/],
    ])('create refuses %j with field %s named; nothing saved', async (input, field, message) => {
      const before = [await db.monitor.count(), await db.webhookEndpoint.count()];
      const err = await rejection(uc.monitors.create(starter, input));
      expect(err).toBeInstanceOf(ValidationError);
      expect(err.field).toBe(field);
      expect(err.message).toMatch(message);
      expect([await db.monitor.count(), await db.webhookEndpoint.count()]).toEqual(before);
    });

    it('the Free plan’s interval floor names the Starter interval', async () => {
      const [m] = await uc.monitors.list(free);
      const err = await rejection(uc.monitors.update(free, m!.id, { intervalSec: 60 }));
      expect(err.message).toBe('must be at least 300 seconds on the Free plan (Starter checks every 60 s)');
    });

    it('without an encryption key a monitor with a webhook is refused before anything is written', async () => {
      const env = z.object({ ...planEnv, ...planMonitorEnv }).parse({});
      const nokey = createUseCases({
        db,
        plans: plansFromEnv(env),
        monitorLimits: monitorLimitsFromEnv(env),
        secretBox: secretBoxFromEnv(undefined),
      });
      const before = await db.monitor.count();
      const err = await rejection(nokey.monitors.create(starter, { target: 'x', webhookUrl: 'https://example.com/' }));
      expect(err).toBeInstanceOf(NotConfiguredError);
      expect(err.message).toMatch(/SECRETS_ENCRYPTION_KEY is not set/);
      expect(await db.monitor.count()).toBe(before);
      const bad = createUseCases({
        db,
        plans: plansFromEnv(env),
        monitorLimits: monitorLimitsFromEnv(env),
        secretBox: secretBoxFromEnv('short'),
      });
      expect(
        (await rejection(bad.monitors.create(starter, { target: 'x', webhookUrl: 'https://e.com/' }))).message,
      ).toMatch(/must be 32 bytes/);
      // a monitor without webhook needs no key, and sendTest needs a publisher
      const { monitor } = await nokey.monitors.create(starter, { target: 'nokey' });
      await uc.webhooks.set(starter, monitor.id, 'https://example.com/nokey');
      expect(await rejection(nokey.webhooks.sendTest(starter, monitor.id))).toBeInstanceOf(NotConfiguredError);
      await nokey.monitors.remove(starter, monitor.id);
    });

    it('uses the injected save-time URL check: its refusal is a field error, its warnings come back', async () => {
      const env = z.object({ ...planEnv, ...planMonitorEnv }).parse({});
      const checked: string[] = [];
      const strict = createUseCases({
        db,
        plans: plansFromEnv(env),
        monitorLimits: monitorLimitsFromEnv(env),
        secretBox: secretBoxFromEnv(KEY),
        webhookUrlCheck: (raw) => {
          checked.push(raw);
          if (raw.includes('internal')) {
            return Promise.reject(
              new WebhookUrlError('webhook URL host internal.test resolves only to non-public addresses'),
            );
          }
          return Promise.resolve({ ...classifyWebhookUrl(raw), warnings: ['could not resolve maybe.test'] });
        },
      });
      const before = await db.monitor.count();
      const err = await rejection(
        strict.monitors.create(starter, { target: 'x', webhookUrl: 'https://internal.test/h' }),
      );
      expect(err).toMatchObject({ code: 'invalid_input', field: 'webhookUrl' });
      expect(err.message).toMatch(/resolves only to non-public addresses/);
      expect(await db.monitor.count()).toBe(before);
      const made = await strict.monitors.create(starter, { target: 'x', webhookUrl: 'https://maybe.test/h' });
      expect(made.warnings).toEqual(['could not resolve maybe.test']);
      const set = await strict.webhooks.set(starter, made.monitor.id, 'https://maybe.test/other');
      expect(set.warnings).toEqual(['could not resolve maybe.test']);
      expect(checked).toEqual(['https://internal.test/h', 'https://maybe.test/h', 'https://maybe.test/other']);
      // without a check of its own: no warnings
      expect((await uc.webhooks.set(starter, made.monitor.id, 'https://example.com/x')).warnings).toEqual([]);
      await strict.monitors.remove(starter, made.monitor.id);
    });

    it('edits, pauses, resumes and deletes (with its webhook, hits and log)', async () => {
      const { monitor } = await uc.monitors.create(starter, { target: 'jack', webhookUrl: 'https://example.com/e' });
      const edited = await uc.monitors.update(starter, monitor.id, {
        target: '@Jill',
        keywords: ['a', 'b c'],
        intervalSec: 600,
      });
      expect(edited).toMatchObject({ targetUsername: 'Jill', keywords: ['a', 'b c'], intervalSec: 600 });
      expect((await db.monitor.findUniqueOrThrow({ where: { id: monitor.id } })).targetKey).toBe('jill');
      // only given fields change; bad input changes nothing
      expect(await uc.monitors.update(starter, monitor.id, { keywords: null })).toMatchObject({
        targetUsername: 'Jill',
        keywords: [],
        intervalSec: 600,
      });
      expect((await rejection(uc.monitors.update(starter, monitor.id, { target: 'bad name' }))).field).toBe('target');
      expect((await uc.monitors.get(starter, monitor.id)).targetUsername).toBe('Jill');

      expect((await uc.monitors.pause(starter, monitor.id)).status).toBe('paused');
      expect((await db.monitor.findUniqueOrThrow({ where: { id: monitor.id } })).isActive).toBe(false);
      expect((await uc.monitors.resume(starter, monitor.id)).status).toBe('active');

      await db.hit.create({
        data: {
          monitorId: monitor.id,
          tweetId: '1',
          tweetText: 't',
          tweetAuthorId: '1',
          tweetAuthorUsername: 'Jill',
          tweetCreatedAt: new Date(),
        },
      });
      expect((await uc.monitors.get(starter, monitor.id)).hitCount).toBe(1);
      await uc.monitors.remove(starter, monitor.id);
      expect(await rejection(uc.monitors.get(starter, monitor.id))).toBeInstanceOf(NotFoundError);
      expect(await db.hit.count({ where: { monitorId: monitor.id } })).toBe(0);
      expect(await db.webhookEndpoint.count({ where: { monitorId: monitor.id } })).toBe(0);
    });
  });

  describe('webhooks', () => {
    let monitorId: string;
    beforeAll(async () => {
      monitorId = (await uc.monitors.create(starter, { target: 'NASA', keywords: 'launch' })).monitor.id;
    });

    it('set: Discord and Slack are recognised, labelled and their tokens masked; the secret comes once', async () => {
      const d = await uc.webhooks.set(starter, monitorId, 'https://discord.com/api/webhooks/9/tok-en');
      expect(d.webhook).toMatchObject({
        kind: 'discord',
        label: 'Discord',
        url: 'https://discord.com/api/webhooks/9/tok-en',
      });
      expect(d.webhook.shownUrl).not.toContain('tok-en');
      const s = await uc.webhooks.set(starter, monitorId, 'https://hooks.slack.com/services/T1/B2/abc');
      expect(s.webhook).toMatchObject({ kind: 'slack', label: 'Slack' });
      expect(s.webhook.shownUrl).not.toContain('/abc');
      expect(s.secret).not.toBe(d.secret);
      const row = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } });
      expect(createSecretBox(KEY).decrypt(row.secretCiphertext, monitorId)).toBe(s.secret);
    });

    it('set clears a broken flag; bad URLs are refused with nothing changed', async () => {
      await db.webhookEndpoint.update({ where: { monitorId }, data: { isBroken: true, brokenReason: 'Discord 404' } });
      expect((await uc.monitors.get(starter, monitorId)).webhook).toMatchObject({
        isBroken: true,
        brokenReason: 'Discord 404',
      });
      const before = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } });
      const err = await rejection(uc.webhooks.set(starter, monitorId, 'ftp://example.com/'));
      expect(err).toMatchObject({ code: 'invalid_input', field: 'webhookUrl' });
      expect(await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } })).toEqual(before);
      const ok = await uc.webhooks.set(starter, monitorId, 'https://example.com/a');
      expect(ok.webhook).toMatchObject({ isBroken: false, brokenReason: null, kind: 'native' });
    });

    it('rotate: a new secret, returned once, replaces the old one', async () => {
      const before = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } });
      const old = createSecretBox(KEY).decrypt(before.secretCiphertext, monitorId);
      const r = await uc.webhooks.rotate(starter, monitorId);
      expect(r.secret).toMatch(/^whsec_/);
      expect(r.secret).not.toBe(old);
      const after = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } });
      expect(createSecretBox(KEY).decrypt(after.secretCiphertext, monitorId)).toBe(r.secret);
      expect(r.webhook.secretRotatedAt).toBeInstanceOf(Date);
      // overlapped by default: the old secret is kept 24 h, and the Standard Webhooks form is given
      expect(createSecretBox(KEY).decrypt(after.previousSecretCiphertext!, monitorId)).toBe(old);
      const overlap = after.previousSecretUntil!.getTime() - r.webhook.secretRotatedAt!.getTime();
      expect(overlap).toBe(24 * 3600_000);
      expect(r.webhook.previousSecretUntil).toEqual(after.previousSecretUntil);
      expect(r.standardSecret).toBe(`whsec_${Buffer.from(r.secret, 'utf8').toString('base64')}`);
      // "use the new secret now" ends the overlap
      expect((await uc.webhooks.useNewSecret(starter, monitorId)).previousSecretUntil).toBeNull();
      const switched = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } });
      expect([switched.previousSecretCiphertext, switched.previousSecretUntil]).toEqual([null, null]);
      // "rotate now" (a leaked secret): no overlap at all
      const leaked = await uc.webhooks.rotate(starter, monitorId, { now: true });
      expect(leaked.webhook.previousSecretUntil).toBeNull();
      expect(
        (await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } })).previousSecretCiphertext,
      ).toBeNull();
      expect((await rejection(uc.webhooks.rotate(starter, monitorId, { overlapSec: 5 }))).field).toBe('overlapSec');
    });

    it('sendTest publishes monitor.test to RabbitMQ on every plan, Free included', async () => {
      const q = await uc.webhooks.sendTest(starter, monitorId);
      expect(q.deliveryId).toBe(q.messageId);
      const msg = await waitFor(() => seen.find((e) => e.messageId === q.messageId), 20_000);
      expect(msg.routingKey).toBe('monitor.test');
      expect(msg.headers).toEqual({ accountId: starter });
      expect(msg.payload).toEqual({
        event: 'monitor.test',
        monitor: { id: monitorId, targetUsername: 'NASA', query: null, keywords: ['launch'] },
        test: true,
      });
      const [freeMonitor] = await uc.monitors.list(free);
      await uc.webhooks.set(free, freeMonitor!.id, 'https://example.com/free');
      const fq = await uc.webhooks.sendTest(free, freeMonitor!.id);
      await waitFor(() => seen.find((e) => e.messageId === fq.messageId), 20_000);
    });

    it('enable: a disabled webhook is enabled again, its held events shown until the dispatcher sends them', async () => {
      const since = new Date(Date.now() - 4 * 86_400_000);
      await db.webhookEndpoint.update({
        where: { monitorId },
        data: { consecutiveFailures: 9, firstFailureAt: since, disabledAt: new Date(), heldCount: 7, heldDropped: 2 },
      });
      const shown = (await uc.monitors.get(starter, monitorId)).webhook!.health;
      expect(shown).toMatchObject({ state: 'disabled', consecutiveFailures: 9, held: 7, heldDropped: 2 });
      const enabled = await uc.webhooks.enable(starter, monitorId);
      expect(enabled.health).toMatchObject({ state: 'ok', consecutiveFailures: 0, disabledAt: null, held: 7 });
      expect(await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } })).toMatchObject({
        consecutiveFailures: 0,
        firstFailureAt: null,
        disabledAt: null,
        heldCount: 7,
      });
      // the account is told it recovered (a notice for its digest), once however often it is enabled
      const recovered = () =>
        db.accountEvent.findMany({
          where: {
            routingKey: 'account.webhook.failing',
            AND: [
              { payload: { path: ['monitorId'], equals: monitorId } },
              { payload: { path: ['state'], equals: 'recovered' } },
            ],
          },
        });
      const told = await recovered();
      expect(told).toHaveLength(1);
      expect(told[0]!.payload).toMatchObject({ accountId: starter, monitorId, state: 'recovered' });
      await uc.webhooks.enable(starter, monitorId); // healthy already: nothing to tell
      expect(await recovered()).toHaveLength(1);
      // another account's monitor: NotFound, nothing changed
      await db.webhookEndpoint.update({
        where: { monitorId },
        data: { disabledAt: since, heldCount: 0, heldDropped: 0 },
      });
      expect(await rejection(uc.webhooks.enable(other, monitorId))).toBeInstanceOf(NotFoundError);
      expect((await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } })).disabledAt).toEqual(since);
      await uc.webhooks.enable(starter, monitorId);
    });

    it('remove: then rotate and sendTest say there is no webhook', async () => {
      await uc.webhooks.remove(starter, monitorId);
      expect((await uc.monitors.get(starter, monitorId)).webhook).toBeNull();
      for (const call of [
        () => uc.webhooks.rotate(starter, monitorId),
        () => uc.webhooks.sendTest(starter, monitorId),
        () => uc.webhooks.enable(starter, monitorId),
      ]) {
        const err = await rejection(call());
        expect(err).toBeInstanceOf(ConflictError);
        expect(err).toMatchObject({ reason: 'no_webhook', field: 'webhookUrl' });
      }
    });
  });

  describe('delivery log, redelivery and hits', () => {
    let monitorId: string;
    const attempts: string[] = [];
    const hitIds: string[] = [];
    const base = Date.parse('2026-11-20T10:00:00.000Z');

    beforeAll(async () => {
      const [m] = await uc.monitors.list(other);
      monitorId = m!.id;
      // 12 hits and 30 attempts; several share a timestamp, so paging must break ties by id
      for (let i = 0; i < 12; i++) {
        const h = await db.hit.create({
          data: {
            monitorId,
            tweetId: String(1_790_000_000_000_000_000n + BigInt(i)),
            tweetText: `post ${i}`,
            tweetAuthorId: '7',
            tweetAuthorUsername: 'a_1',
            tweetCreatedAt: new Date(base),
            detectedAt: new Date(base + Math.floor(i / 3) * 1000),
          },
        });
        hitIds.push(h.id);
      }
      for (let i = 0; i < 30; i++) {
        const a = await db.deliveryAttempt.create({
          data: {
            monitorId,
            hitId: i % 2 === 0 ? hitIds[i % 12]! : null,
            event: i % 2 === 0 ? 'monitor.hit' : 'monitor.test',
            deliveryId: `d-${i}`,
            url: 'https://example.com/d',
            outcome: i % 3 === 0 ? 'failed' : 'delivered',
            statusCode: i % 3 === 0 ? 500 : 200,
            latencyMs: 10 + i,
            error: i % 3 === 0 ? 'receiver answered HTTP 500' : null,
            responseSnippet: 'ok',
            createdAt: new Date(base + Math.floor(i / 4) * 1000),
          },
        });
        attempts.push(a.id);
      }
    });

    it('pages the delivery log newest first with an opaque cursor, each row once', async () => {
      const seenIds: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await uc.deliveries.list(other, monitorId, { limit: 7, ...(cursor ? { cursor } : {}) });
        seenIds.push(...page.items.map((d) => d.id));
        cursor = page.nextCursor ?? undefined;
        pages++;
        if (cursor) expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
      } while (cursor);
      expect(pages).toBe(5);
      expect(new Set(seenIds).size).toBe(30);
      const expected = await db.deliveryAttempt.findMany({
        where: { monitorId },
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
        select: { id: true },
      });
      expect(seenIds).toEqual(expected.map((e) => e.id));
      const first = (await uc.deliveries.list(other, monitorId, { limit: 1 })).items[0]!;
      expect(Object.keys(first).sort()).toEqual(
        [
          'attempt',
          'createdAt',
          'deliveryId',
          'error',
          'event',
          'held',
          'hitId',
          'id',
          'latencyMs',
          'nextAttemptAt',
          'outcome',
          'responseSnippet',
          'statusCode',
          'url',
        ].sort(),
      );
      // a made-up cursor or limit is a named error
      expect(await rejection(uc.deliveries.list(other, monitorId, { cursor: 'bm9wZQ' }))).toMatchObject({
        field: 'cursor',
      });
      expect(await rejection(uc.deliveries.list(other, monitorId, { limit: 0 }))).toMatchObject({ field: 'limit' });
    });

    it('pages the hit history newest first with the post URL', async () => {
      const p1 = await uc.hits.list(other, monitorId, { limit: 5 });
      const p2 = await uc.hits.list(other, monitorId, { limit: 5, cursor: p1.nextCursor! });
      const p3 = await uc.hits.list(other, monitorId, { limit: 5, cursor: p2.nextCursor! });
      expect([p1.items.length, p2.items.length, p3.items.length, p3.nextCursor]).toEqual([5, 5, 2, null]);
      const all = [...p1.items, ...p2.items, ...p3.items];
      expect(new Set(all.map((h) => h.id)).size).toBe(12);
      for (let i = 1; i < all.length; i++) {
        expect(all[i - 1]!.detectedAt.getTime()).toBeGreaterThanOrEqual(all[i]!.detectedAt.getTime());
      }
      expect(all[0]!.postUrl).toBe(`https://x.com/a_1/status/${all[0]!.tweetId}`);
      expect(all[0]).toMatchObject({ authorUsername: 'a_1', text: expect.stringMatching(/^post /) });
    });

    it('redeliver publishes webhook.redeliver with the attempt; other accounts get NotFound', async () => {
      const attemptId = attempts[0]!;
      const q = await uc.deliveries.redeliver(other, attemptId);
      expect(q).toMatchObject({ attemptId, deliveryId: 'd-0', monitorId });
      const msg = await waitFor(() => seen.find((e) => e.messageId === q.messageId), 20_000);
      expect(msg.routingKey).toBe('webhook.redeliver');
      expect(msg.payload).toEqual({ attemptId });
      expect(msg.headers).toEqual({ accountId: other });

      const before = seen.length;
      for (const call of [
        () => uc.deliveries.redeliver(starter, attemptId),
        () => uc.deliveries.get(starter, attemptId),
      ]) {
        const err = await rejection(call());
        expect(err).toBeInstanceOf(NotFoundError);
        expect(err).toMatchObject({ kind: 'delivery', message: `no delivery attempt with id ${attemptId}` });
      }
      expect(await rejection(uc.deliveries.redeliver(other, randomUUID()))).toBeInstanceOf(NotFoundError);
      expect((await uc.deliveries.get(other, attemptId)).monitorId).toBe(monitorId);
      await new Promise((r) => setTimeout(r, 300));
      expect(seen.length).toBe(before);
    });

    it('recover since T queues exactly the hit deliveries that failed since T and have not succeeded since', async () => {
      const owner = (await uc.admin.createAccount({ email: 'recover@example.com', plan: 'starter' })).id;
      const { monitor } = await uc.monitors.create(owner, { target: 'recover_me' });
      const T = new Date(Date.now() - 3600_000);
      const at = (minutes: number) => new Date(T.getTime() + minutes * 60_000);
      const hit = async (i: number) =>
        (
          await db.hit.create({
            data: {
              monitorId: monitor.id,
              tweetId: String(1_800_000_000_000_000_000n + BigInt(i)),
              tweetText: `r ${i}`,
              tweetAuthorId: '7',
              tweetAuthorUsername: 'recover_me',
              tweetCreatedAt: T,
            },
          })
        ).id;
      const attempt = async (
        deliveryId: string,
        hitId: string | null,
        outcome: 'failed' | 'delivered',
        createdAt: Date,
        event = 'monitor.hit',
      ) =>
        (
          await db.deliveryAttempt.create({
            data: { monitorId: monitor.id, hitId, event, deliveryId, url: 'https://example.com/r', outcome, createdAt },
          })
        ).id;
      const h = await Promise.all([1, 2, 3, 4, 5, 6].map(hit));
      const expected = [
        await attempt('r-failed', h[0]!, 'failed', at(1)), // failed since T: yes
        await attempt('r-twice', h[1]!, 'failed', at(3)),
      ];
      expected.push(await attempt('r-twice', h[1]!, 'failed', at(5))); // its latest failed attempt is the one sent
      expected.splice(1, 1);
      await attempt('r-fixed', h[2]!, 'failed', at(2));
      await attempt('r-fixed', h[2]!, 'delivered', at(4)); // succeeded since: no
      await attempt('r-before', h[3]!, 'failed', at(-5)); // failed before T only: no
      await attempt('r-ok', h[4]!, 'delivered', at(6)); // never failed: no
      await attempt('r-test', null, 'failed', at(7), 'monitor.test'); // a test ping: no
      await attempt('r-gone', null, 'failed', at(8)); // its hit was deleted: no
      const before = seen.length;
      const r = await uc.deliveries.recover(owner, monitor.id, { since: T, outcomes: ['failed'] });
      expect(r).toEqual({ queued: 2, remaining: 0, deliveryIds: ['r-failed', 'r-twice'], retryAfterSec: null });
      const msgs = await waitFor(() => {
        const got = seen.slice(before).filter((e) => e.routingKey === 'webhook.redeliver');
        return got.length >= 2 ? got : null;
      }, 20_000);
      expect(msgs.map((e) => (e.payload as { attemptId: string }).attemptId).sort()).toEqual([...expected].sort());
      expect(msgs.every((e) => e.headers.accountId === owner)).toBe(true);
      // another account's monitor is NotFound; a bad or future time names the field; nothing is queued
      expect(
        await rejection(uc.deliveries.recover(starter, monitor.id, { since: T, outcomes: ['failed'] })),
      ).toBeInstanceOf(NotFoundError);
      expect(
        (await rejection(uc.deliveries.recover(owner, monitor.id, { since: new Date(Date.now() + 60_000) }))).field,
      ).toBe('since');
      expect((await rejection(uc.deliveries.recover(owner, monitor.id, { since: new Date('nope') }))).field).toBe(
        'since',
      );
      // before the delivery log keeps anything (year 0 included, which PostgreSQL cannot store)
      for (const since of [new Date(Date.now() - 400 * 86_400_000), new Date('0000-01-01T00:00:00Z')]) {
        const err = await rejection(uc.deliveries.recover(owner, monitor.id, { since }));
        expect(err).toBeInstanceOf(ValidationError);
        expect(err).toMatchObject({ field: 'since', message: expect.stringMatching(/delivery log's retention/) });
      }
      await new Promise((res) => setTimeout(res, 300));
      expect(seen.length).toBe(before + 2);

      // clicked again while those redeliveries are pending: nothing is queued twice
      expect(await uc.deliveries.recover(owner, monitor.id, { since: T, outcomes: ['failed'] })).toEqual({
        queued: 0,
        remaining: 0,
        deliveryIds: [],
        retryAfterSec: null,
      });
      // the dispatcher recorded r-failed's redelivery (failed again): Recover may queue it again;
      // r-twice's mark is over an hour old (its message was lost): it may be queued again too
      await db.$executeRaw`DELETE FROM pending_redeliveries WHERE delivery_id = 'r-failed'`;
      await db.$executeRaw`UPDATE pending_redeliveries SET queued_at = now() - interval '2 hours' WHERE delivery_id = 'r-twice'`;
      const again = await uc.deliveries.recover(owner, monitor.id, { since: T, outcomes: ['failed'] });
      expect(again).toEqual({ queued: 2, remaining: 0, deliveryIds: ['r-failed', 'r-twice'], retryAfterSec: null });
      await waitFor(() => seen.length >= before + 4, 20_000);
    });

    it("recover counts against the account's redelivery budget, and two clicks at once queue each delivery once", async () => {
      const budgeted = createUseCases({
        db,
        plans: plansFromEnv(z.object({ ...planEnv, ...planMonitorEnv }).parse({})),
        monitorLimits: { free: 5, starter: 5 },
        publisher: amqp,
        redeliveryBudget: redeliveryBudget(redis, 3),
      });
      const owner = (await uc.admin.createAccount({ email: 'budget@example.com', plan: 'starter' })).id;
      const T = new Date(Date.now() - 3600_000);
      /** a monitor with 5 failed hit deliveries */
      const failing = async (target: string, n: bigint) => {
        const { monitor } = await uc.monitors.create(owner, { target });
        for (let i = 0; i < 5; i++) {
          const h = await db.hit.create({
            data: {
              monitorId: monitor.id,
              tweetId: String(n + BigInt(i)),
              tweetText: `b ${i}`,
              tweetAuthorId: '8',
              tweetAuthorUsername: target,
              tweetCreatedAt: T,
            },
          });
          await db.deliveryAttempt.create({
            data: {
              monitorId: monitor.id,
              hitId: h.id,
              event: 'monitor.hit',
              deliveryId: `${target}-${i}`,
              url: 'https://example.com/b',
              outcome: 'failed',
              createdAt: new Date(T.getTime() + (i + 1) * 60_000),
            },
          });
        }
        return monitor.id;
      };
      const before = seen.length;
      // two clicks at once: each delivery queued once between them
      const racing = await failing('race_me', 1_900_000_000_000_000_000n);
      const [a, b] = await Promise.all([
        uc.deliveries.recover(owner, racing, { since: T, outcomes: ['failed'] }),
        uc.deliveries.recover(owner, racing, { since: T, outcomes: ['failed'] }),
      ]);
      expect([...a.deliveryIds, ...b.deliveryIds].sort()).toEqual([0, 1, 2, 3, 4].map((i) => `race_me-${i}`));
      // a budget of 3 an hour: 3 queued, 2 left for later, then refused
      const budgeted_ = await failing('budget_me', 1_910_000_000_000_000_000n);
      const partial = await budgeted.deliveries.recover(owner, budgeted_, { since: T, outcomes: ['failed'] });
      expect(partial).toMatchObject({ queued: 3, remaining: 2 });
      // what did not fit is reported with the time the budget grants more
      expect(partial.retryAfterSec).toBeGreaterThan(0);
      expect(partial.retryAfterSec).toBeLessThanOrEqual(3600);
      const refused = await rejection(
        budgeted.deliveries.recover(owner, budgeted_, { since: T, outcomes: ['failed'] }),
      );
      expect(refused).toBeInstanceOf(RateLimitedError);
      expect(refused.retryAfterSec).toBeGreaterThan(0);
      await waitFor(() => seen.length >= before + 8, 20_000);
      await new Promise((res) => setTimeout(res, 300));
      expect(seen.length - before).toBe(8);
    });

    it('recover by window and outcome: skipped and failed between since and until, in one call', async () => {
      const owner = (await uc.admin.createAccount({ email: 'window@example.com', plan: 'starter' })).id;
      const { monitor } = await uc.monitors.create(owner, { target: 'window_me' });
      const T = new Date(Date.now() - 3600_000);
      const at = (minutes: number) => new Date(T.getTime() + minutes * 60_000);
      let n = 0;
      const delivery = async (deliveryId: string, outcomes: ['failed' | 'skipped' | 'delivered', number][]) => {
        const h = await db.hit.create({
          data: {
            monitorId: monitor.id,
            tweetId: String(1_920_000_000_000_000_000n + BigInt(n++)),
            tweetText: deliveryId,
            tweetAuthorId: '9',
            tweetAuthorUsername: 'window_me',
            tweetCreatedAt: T,
          },
        });
        for (const [outcome, minute] of outcomes) {
          await db.deliveryAttempt.create({
            data: {
              monitorId: monitor.id,
              hitId: h.id,
              event: 'monitor.hit',
              deliveryId,
              url: 'https://example.com/w',
              outcome,
              createdAt: at(minute),
            },
          });
        }
      };
      await delivery('w-skipped', [['skipped', 1]]); // skipped while disabled: yes
      await delivery('w-failed', [['failed', 2]]); // yes
      await delivery('w-late', [['skipped', 20]]); // after until: no
      await delivery('w-early', [['failed', -5]]); // before since: no
      await delivery('w-fixed', [
        ['skipped', 3],
        ['delivered', 4],
      ]); // delivered since: no
      await delivery('w-ok', [['delivered', 5]]); // no
      const before = seen.length;
      const skippedOnly = await uc.deliveries.recover(owner, monitor.id, {
        since: T,
        until: at(10),
        outcomes: ['skipped'],
      });
      expect(skippedOnly).toEqual({ queued: 1, remaining: 0, deliveryIds: ['w-skipped'], retryAfterSec: null });
      // the default outcomes are all three; w-skipped is pending already
      const all = await uc.deliveries.recover(owner, monitor.id, { since: T, until: at(10) });
      expect(all.deliveryIds).toEqual(['w-failed']);
      // no until: up to now
      expect((await uc.deliveries.recover(owner, monitor.id, { since: T })).deliveryIds).toEqual(['w-late']);
      await waitFor(() => seen.length >= before + 3, 20_000);

      // until before since, an unknown outcome, none at all: the field named, nothing queued
      const bad = [
        { since: at(5), until: at(1) },
        { since: T, outcomes: ['delivered' as never] },
        { since: T, outcomes: [] },
        { since: T, until: new Date('nope') },
      ];
      const fields = [];
      for (const w of bad) fields.push((await rejection(uc.deliveries.recover(owner, monitor.id, w))).field);
      expect(fields).toEqual(['until', 'outcomes', 'outcomes', 'until']);
      await new Promise((res) => setTimeout(res, 300));
      expect(seen.length).toBe(before + 3);
    });

    it('the log masks the token of a Discord or Slack URL', async () => {
      const a = await db.deliveryAttempt.create({
        data: {
          monitorId,
          event: 'monitor.test',
          deliveryId: 'discord',
          url: 'https://discord.com/api/webhooks/12/very-secret-token',
          outcome: 'delivered',
          createdAt: new Date(base + 3_600_000),
        },
      });
      const [row] = (await uc.deliveries.list(other, monitorId, { limit: 1 })).items;
      expect(row!.id).toBe(a.id);
      expect(row!.url).toBe('https://discord.com/api/webhooks/12/…');
      expect((await uc.deliveries.get(other, a.id)).url).not.toContain('very-secret-token');
      await db.deliveryAttempt.deleteMany({ where: { id: a.id } });
    });

    it('redeliver of a hit delivery whose hit was deleted is a clear conflict', async () => {
      const a = await db.deliveryAttempt.create({
        data: {
          monitorId,
          hitId: null,
          event: 'monitor.hit',
          deliveryId: 'gone',
          url: 'https://e.com/',
          outcome: 'failed',
        },
      });
      expect(await rejection(uc.deliveries.redeliver(other, a.id))).toMatchObject({ reason: 'hit_gone' });
    });

    it('admin lookups find the owner of a monitor or an attempt', async () => {
      expect(await uc.admin.ownerOfMonitor(monitorId)).toBe(other);
      expect(await uc.admin.ownerOfDelivery(attempts[1]!)).toBe(other);
      expect(await rejection(uc.admin.ownerOfMonitor(randomUUID()))).toBeInstanceOf(NotFoundError);
    });
  });
});
