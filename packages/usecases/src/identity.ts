/**
 * Email identity: sign-up with the same answer for new and taken addresses, verification links
 * (24 h), password reset links (30 min), notification preferences. Links are single-use and
 * stored as SHA-256 only; the plaintext token is returned once, for the mail.
 */
import { createHash, randomBytes } from 'node:crypto';
import { changeAccount, loadAccount, normaliseEmail, toAccountView, type Ctx } from './context';
import { checkPassword } from './accounts';
import { ValidationError } from './errors';
import { hashPassword } from './password';
import type { TokenPurpose } from './repositories/accounts';
import type { AccountView, NotificationPrefs } from './types';

export const VERIFY_TTL_MS = 24 * 3600 * 1000;
export const RESET_TTL_MS = 30 * 60 * 1000;

/** a link's token (plaintext, for the mail only) and when it stops working */
export interface IssuedToken {
  token: string;
  expiresAt: Date;
}

export type Registration =
  ({ kind: 'created'; account: AccountView } & IssuedToken) | { kind: 'exists'; accountId: string; email: string };

export interface IdentityUseCases {
  /** the sign-up form's checks alone (no I/O): the normalised address, or ValidationError('email' | 'password') */
  checkRegistration(input: { email: string; password: string }): string;
  /** a new unverified Free account and its verification token, or `exists` (nothing changed) when the address has an account */
  register(input: { email: string; password: string }): Promise<Registration>;
  /** a fresh verification token for an unverified account; null when it is verified already */
  issueVerification(accountId: string): Promise<({ email: string } & IssuedToken) | null>;
  /** marks the address verified; ValidationError('token') when the link is unknown, used or expired */
  verify(token: string): Promise<AccountView>;
  /** a reset token for the address's account; null for an unknown address (the caller answers the same) */
  requestReset(email: string): Promise<({ accountId: string; email: string } & IssuedToken) | null>;
  /** sets a new password with a reset token; ValidationError('token') or ('password') */
  resetPassword(token: string, password: string): Promise<AccountView>;
  setNotifications(accountId: string, prefs: NotificationPrefs): Promise<AccountView>;
}

export function tokenHash(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export function identityUseCases(ctx: Ctx): IdentityUseCases {
  const { accounts, emailTokens } = ctx.repos;

  async function issue(accountId: string, purpose: TokenPurpose): Promise<IssuedToken> {
    const token = randomBytes(32).toString('base64url');
    const ttl = purpose === 'verify' ? VERIFY_TTL_MS : RESET_TTL_MS;
    const expiresAt = new Date(ctx.now().getTime() + ttl);
    await emailTokens.create({ accountId, purpose, tokenHash: tokenHash(token), expiresAt });
    return { token, expiresAt };
  }

  /** uses the token once (a conditional update: of two concurrent uses one wins); its account id */
  async function consume(token: unknown, purpose: TokenPurpose): Promise<string> {
    const invalid = new ValidationError(
      'token',
      'this link is not valid: it was used already, has expired or is wrong',
    );
    if (typeof token !== 'string' || !/^[A-Za-z0-9_-]{20,100}$/.test(token)) throw invalid;
    const row = await emailTokens.findByHash(tokenHash(token));
    if (!row || row.purpose !== purpose || row.usedAt || row.expiresAt <= ctx.now()) throw invalid;
    if (!(await emailTokens.use(row.id, ctx.now()))) throw invalid;
    return row.accountId;
  }

  return {
    checkRegistration(input) {
      const email = normaliseEmail(input.email);
      checkPassword(input.password, email);
      return email;
    },

    async register(input) {
      const email = normaliseEmail(input.email);
      const password = checkPassword(input.password, email);
      // the same work for a taken address as for a new one (no answer by timing): the hash, then
      // the insert, which a taken address refuses
      const passwordHash = await hashPassword(password, ctx.scrypt);
      const a = await accounts.create({ email, plan: 'free', passwordHash, emailVerifiedAt: null });
      if (a) return { kind: 'created', account: toAccountView(a, ctx.now()), ...(await issue(a.id, 'verify')) };
      const existing = await accounts.findByEmail(email);
      if (!existing) throw new Error(`the account of ${email} was created and deleted during this sign-up`);
      return { kind: 'exists', accountId: existing.id, email };
    },

    async issueVerification(accountId) {
      const a = await loadAccount(ctx, accountId);
      if (a.emailVerifiedAt) return null;
      return { email: a.email, ...(await issue(a.id, 'verify')) };
    },

    async verify(token) {
      const accountId = await consume(token, 'verify');
      await accounts.markVerified(accountId, ctx.now());
      return toAccountView(await loadAccount(ctx, accountId), ctx.now());
    },

    async requestReset(rawEmail) {
      let email: string;
      try {
        email = normaliseEmail(rawEmail);
      } catch {
        return null;
      }
      const a = await accounts.findByEmail(email);
      if (!a) return null;
      return { accountId: a.id, email: a.email, ...(await issue(a.id, 'reset')) };
    },

    async resetPassword(token, password) {
      // the password first: a bad one does not use up the link
      if (typeof token !== 'string') throw new ValidationError('token', 'this link is not valid');
      const row = await emailTokens.findByHash(tokenHash(token));
      checkPassword(password, row?.email);
      const accountId = await consume(token, 'reset');
      const passwordHash = await hashPassword(password, ctx.scrypt);
      // following the emailed link proves the address too
      await changeAccount(ctx, accountId, { passwordHash, endSessions: true });
      await accounts.markVerified(accountId, ctx.now());
      // every other reset link of the account is void now
      await emailTokens.useAll(accountId, 'reset', ctx.now());
      return toAccountView(await loadAccount(ctx, accountId), ctx.now());
    },

    async setNotifications(accountId, prefs) {
      const a = await loadAccount(ctx, accountId);
      await changeAccount(ctx, a.id, {
        notifyQuota: prefs.quota,
        notifyWebhook: prefs.webhook,
        notifyTrial: prefs.trial,
      });
      return toAccountView(await loadAccount(ctx, a.id), ctx.now());
    },
  };
}
