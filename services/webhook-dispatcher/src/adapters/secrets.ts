/**
 * The webhooks' signing secrets: stored encrypted (SECRETS_ENCRYPTION_KEY, @sts/core's secret
 * box, bound to the monitor's id), decrypted here once per rotation and kept in memory.
 */
import { createSecretBox, SecretBoxError, type SecretBox } from '@sts/core';

/** A stored secret cannot be decrypted: a server-side fault (wrong SECRETS_ENCRYPTION_KEY), not the message's. */
export class SecretsUnavailableError extends Error {
  override name = 'SecretsUnavailableError';
}

export interface SigningKeys {
  secret: string;
  standardSecrets: string[];
}

/** a webhook's stored secrets: the current one and, during an overlapped rotation, the previous */
interface StoredSecrets {
  secretCiphertext: string;
  previousSecretCiphertext: string | null;
  previousSecretUntil: Date | null;
}

/** The webhooks' signing secrets in plain text, each decrypted once per rotation. */
export class SigningSecrets {
  private readonly box: SecretBox;
  // Decrypting is cheap but not free at 1000/s; the ciphertext changes on every rotation, so a
  // cache keyed by it can never hand out an old secret.
  private readonly secrets = new Map<string, string>();

  constructor(key: string | Buffer, oldKeys: readonly string[] = []) {
    this.box = createSecretBox(key, oldKeys);
  }

  /**
   * The secrets of a delivery. During an overlapped rotation X-Service-Signature stays on the old
   * secret and webhook-signature carries the new one and the old one; afterwards only the new.
   */
  keysFor(monitorId: string, webhook: StoredSecrets, now: Date): SigningKeys {
    const current = this.get(monitorId, webhook.secretCiphertext);
    const until = webhook.previousSecretUntil;
    if (!webhook.previousSecretCiphertext || !until || until.getTime() <= now.getTime()) {
      return { secret: current, standardSecrets: [current] };
    }
    const previous = this.get(monitorId, webhook.previousSecretCiphertext);
    return { secret: previous, standardSecrets: [current, previous] };
  }

  private get(monitorId: string, ciphertext: string): string {
    const key = `${monitorId}|${ciphertext}`;
    let s = this.secrets.get(key);
    if (s === undefined) {
      s = this.decrypt(monitorId, ciphertext);
      if (this.secrets.size >= 10_000) this.secrets.clear();
      this.secrets.set(key, s);
    }
    return s;
  }

  private decrypt(monitorId: string, ciphertext: string): string {
    try {
      return this.box.decrypt(ciphertext, monitorId);
    } catch (err) {
      if (err instanceof SecretBoxError) {
        throw new SecretsUnavailableError(
          'a stored webhook signing secret cannot be decrypted: SECRETS_ENCRYPTION_KEY is not the key the secrets were stored with',
        );
      }
      throw err;
    }
  }
}
