/** `secrets rotate` re-encrypts stored webhook secrets under a new key while the old one still decrypts (real PostgreSQL). */
import { createCipheriv, randomBytes } from 'node:crypto';
import { createSecretBox, encryptionKeyId } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase } from '@sts/testing';
import { runCli } from '../main';
import { allCommands } from './index';

const OLD = randomBytes(32).toString('base64');
const NEW = randomBytes(32).toString('hex');

/** the format before key ids: `v1.<iv>.<tag>.<ct>` */
function v1(key: string, plaintext: string, ad: string): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', Buffer.from(key, 'base64'), iv, { authTagLength: 16 });
  c.setAAD(Buffer.from(ad));
  const ct = Buffer.concat([c.update(plaintext, 'utf8'), c.final()]);
  return ['v1', iv.toString('base64url'), c.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
}

describe('secrets rotate', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  const monitors: string[] = [];
  const cli = (env: NodeJS.ProcessEnv) =>
    runCli(['secrets', 'rotate', '--json'], { DATABASE_URL: testDb.url, ...env }, allCommands);

  beforeAll(async () => {
    testDb = await createTestDatabase();
    db = createDbClient({ url: testDb.url, poolSize: 2 });
    const account = await db.account.create({ data: { email: 'rotate@example.test', plan: 'starter' } });
    for (const t of ['a', 'b', 'c']) {
      const m = await db.monitor.create({ data: { accountId: account.id, targetUsername: t, targetKey: t } });
      monitors.push(m.id);
    }
    const old = createSecretBox(OLD);
    // a: stored before key ids (v1); b: v2 under the old key with an overlapping previous secret
    await db.webhookEndpoint.create({
      data: {
        monitorId: monitors[0]!,
        url: 'https://example.com/a',
        secretCiphertext: v1(OLD, 'whsec_a', monitors[0]!),
      },
    });
    await db.webhookEndpoint.create({
      data: {
        monitorId: monitors[1]!,
        url: 'https://example.com/b',
        secretCiphertext: old.encrypt('whsec_b', monitors[1]!),
        previousSecretCiphertext: old.encrypt('whsec_b_prev', monitors[1]!),
        previousSecretUntil: new Date(Date.now() + 3_600_000),
      },
    });
  });

  afterAll(async () => {
    await db?.$disconnect();
    await testDb?.drop();
  });

  it('re-encrypts under the new key while the old decrypts; then the new key alone reads every secret', async () => {
    const r = await cli({ SECRETS_ENCRYPTION_KEY: NEW, SECRETS_ENCRYPTION_KEYS_OLD: OLD });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      key_id: encryptionKeyId(Buffer.from(NEW, 'hex')),
      rotated: 2,
      already_current: 0,
      failed: [],
    });
    const only = createSecretBox(NEW);
    const rows = await db.webhookEndpoint.findMany({ orderBy: { url: 'asc' } });
    expect(rows.map((w) => only.decrypt(w.secretCiphertext, w.monitorId))).toEqual(['whsec_a', 'whsec_b']);
    expect(only.decrypt(rows[1]!.previousSecretCiphertext!, rows[1]!.monitorId)).toBe('whsec_b_prev');
    expect(rows.every((w) => only.isCurrent(w.secretCiphertext))).toBe(true);
    // again: nothing to do
    expect(JSON.parse((await cli({ SECRETS_ENCRYPTION_KEY: NEW })).stdout)).toMatchObject({
      rotated: 0,
      already_current: 2,
    });
  });

  it('names a secret no configured key decrypts and exits 1; refuses a malformed SECRETS_ENCRYPTION_KEYS_OLD', async () => {
    const stranger = randomBytes(32).toString('base64');
    await db.webhookEndpoint.create({
      data: {
        monitorId: monitors[2]!,
        url: 'https://example.com/c',
        secretCiphertext: createSecretBox(stranger).encrypt('whsec_c', monitors[2]!),
      },
    });
    const r = await cli({ SECRETS_ENCRYPTION_KEY: NEW, SECRETS_ENCRYPTION_KEYS_OLD: OLD });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(monitors[2]!);
    expect(r.stderr).not.toContain(stranger);
    for (const bad of [`${OLD},`, `${OLD},short`]) {
      const refused = await cli({ SECRETS_ENCRYPTION_KEY: NEW, SECRETS_ENCRYPTION_KEYS_OLD: bad });
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain('SECRETS_ENCRYPTION_KEYS_OLD');
      expect(refused.stderr).not.toContain(OLD);
    }
  });
});
