/**
 * `secrets rotate`: every stored webhook signing secret (current and overlapping previous one)
 * re-encrypted under SECRETS_ENCRYPTION_KEY, decrypted with it or any key of
 * SECRETS_ENCRYPTION_KEYS_OLD. Each row is updated only if its ciphertexts did not change in the
 * meantime (a concurrent `webhook rotate` wins; run again). A secret no key decrypts is named and
 * left as it is; the command then fails, so the old key is not dropped by mistake.
 */
import {
  createSecretBox,
  encryptionKeyId,
  encryptionKeyListField,
  parseEncryptionKey,
  type SecretBox,
} from '@sts/core';
import type { Command } from '../command';

/** SECRETS_ENCRYPTION_KEYS_OLD, validated (an empty entry or a malformed key is an error naming it) */
export function oldKeysFromEnv(env: NodeJS.ProcessEnv): string[] {
  const raw = env.SECRETS_ENCRYPTION_KEYS_OLD;
  if (raw === undefined || raw === '') return [];
  const parsed = encryptionKeyListField().safeParse(raw);
  if (!parsed.success) {
    throw new Error(
      'SECRETS_ENCRYPTION_KEYS_OLD: every comma-separated entry must be 32 bytes, as base64 or 64 hex digits',
    );
  }
  return parsed.data;
}

function boxFromEnv(env: NodeJS.ProcessEnv): { box: SecretBox; keyId: string } {
  const key = env.SECRETS_ENCRYPTION_KEY;
  if (!key) throw new Error('SECRETS_ENCRYPTION_KEY is not set: it is the key the secrets are re-encrypted under');
  let parsed: Buffer;
  try {
    parsed = parseEncryptionKey(key);
  } catch {
    throw new Error('SECRETS_ENCRYPTION_KEY must be 32 bytes, as base64 or 64 hex digits');
  }
  return { box: createSecretBox(parsed, oldKeysFromEnv(env)), keyId: encryptionKeyId(parsed) };
}

const secretsRotate: Command = {
  name: 'secrets rotate',
  summary: 're-encrypt every stored webhook signing secret under SECRETS_ENCRYPTION_KEY',
  usage: [
    'usage: SECRETS_ENCRYPTION_KEY=NEW SECRETS_ENCRYPTION_KEYS_OLD=OLD[,OLDER] npm run cli -- secrets rotate [--json]',
    '',
    'Deploy the services with the new key and the old ones first (both decrypt), run this, then drop',
    'SECRETS_ENCRYPTION_KEYS_OLD. Exits 1 naming the monitors whose secret no key decrypts.',
  ].join('\n'),
  options: {},
  async run(ctx) {
    const { box, keyId } = boxFromEnv(ctx.env);
    const db = ctx.db();
    const rows = await db.webhookEndpoint.findMany({
      select: { id: true, monitorId: true, secretCiphertext: true, previousSecretCiphertext: true },
    });
    let rotated = 0;
    let current = 0;
    let changed = 0;
    const failed: { monitor_id: string; error: string }[] = [];
    for (const row of rows) {
      const redo = (stored: string) =>
        box.isCurrent(stored) ? stored : box.encrypt(box.decrypt(stored, row.monitorId), row.monitorId);
      let next: { secretCiphertext: string; previousSecretCiphertext: string | null };
      try {
        next = {
          secretCiphertext: redo(row.secretCiphertext),
          previousSecretCiphertext: row.previousSecretCiphertext === null ? null : redo(row.previousSecretCiphertext),
        };
      } catch (err) {
        failed.push({ monitor_id: row.monitorId, error: err instanceof Error ? err.message : String(err) });
        continue;
      }
      if (
        next.secretCiphertext === row.secretCiphertext &&
        next.previousSecretCiphertext === row.previousSecretCiphertext
      ) {
        current++;
        continue;
      }
      const done = await db.webhookEndpoint.updateMany({
        where: {
          id: row.id,
          secretCiphertext: row.secretCiphertext,
          previousSecretCiphertext: row.previousSecretCiphertext,
        },
        data: next,
      });
      if (done.count === 1) rotated++;
      else changed++;
    }
    const json = { key_id: keyId, rotated, already_current: current, changed_meanwhile: changed, failed };
    if (failed.length > 0) {
      throw new Error(
        `${failed.length} secret(s) decrypt with no configured key (monitors ${failed.map((f) => f.monitor_id).join(', ')}); ${rotated} re-encrypted. Keep the old key until they are fixed.`,
      );
    }
    const again = changed > 0 ? `; ${changed} changed meanwhile: run it again` : '';
    return {
      json,
      text: `webhook secrets under key ${keyId}: ${rotated} re-encrypted, ${current} already current${again}`,
    };
  },
};

export const secretsCommands: Command[] = [secretsRotate];
