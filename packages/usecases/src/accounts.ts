/** Accounts: sign-up, sign-in, passwords; and the admin's account and plan changes. */
import { isUuid, type PlanName } from '@sts/core';
import { changeAccount, loadAccount, normaliseEmail, toAccountView, type Ctx } from './context';
import { ConflictError, InvalidCredentialsError, ValidationError } from './errors';
import { hashPassword, needsRehash, verifyPassword } from './password';
import type { AccountView } from './types';

export const PASSWORD_MIN = 10;
export const PASSWORD_MAX = 200;

/** The password policy: 10 to 200 characters, not only spaces, not the email address. */
export function checkPassword(password: unknown, email?: string, field = 'password'): string {
  if (typeof password !== 'string' || password === '') throw new ValidationError(field, 'is required');
  if (password.length < PASSWORD_MIN) throw new ValidationError(field, `must be at least ${PASSWORD_MIN} characters`);
  if (password.length > PASSWORD_MAX) throw new ValidationError(field, `must be at most ${PASSWORD_MAX} characters`);
  if (password.trim() === '') throw new ValidationError(field, 'must not be only spaces');
  if (email !== undefined && password.trim().toLowerCase() === email) {
    throw new ValidationError(field, 'must not be your email address');
  }
  return password;
}

export interface AccountUseCases {
  /** a new Free account with a password; ConflictError('email_taken', field 'email') when the email is used */
  signUp(input: { email: string; password: string }): Promise<AccountView>;
  /** the account, or InvalidCredentialsError (same work whether or not the email exists) */
  authenticate(input: { email: string; password: string }): Promise<AccountView>;
  /** InvalidCredentialsError (field 'currentPassword') when the current password is wrong */
  changePassword(accountId: string, input: { currentPassword: string; newPassword: string }): Promise<void>;
  get(accountId: string): Promise<AccountView>;
  /** the account's session generation; null when the account is gone (checked as each session is loaded) */
  sessionGeneration(accountId: string): Promise<number | null>;
  /** ends every session of the account ("sign out everywhere"): the generation moves on */
  endSessions(accountId: string): Promise<void>;
}

export interface AccountAdminUseCases {
  /** `account create`: an account without password (the owner cannot sign in until one is set) */
  createAccount(input: { email: string; plan?: PlanName; password?: string }): Promise<AccountView>;
  /** `plan set`: trialDays N > 0 starts an N-day Starter trial (recorded as the account's trial), 0 ends one */
  setPlan(accountId: string, input: { plan: PlanName; trialDays?: number }): Promise<AccountView>;
  /** sets a password without the old one (seed, support) */
  setPassword(accountId: string, password: string): Promise<void>;
}

export function accountUseCases(ctx: Ctx): { accounts: AccountUseCases; admin: AccountAdminUseCases } {
  const repo = ctx.repos.accounts;
  // a hash to verify against when the email is unknown, so both paths cost one scrypt
  let dummy: Promise<string> | undefined;
  const dummyHash = () => (dummy ??= hashPassword('not a password of anyone', ctx.scrypt));

  async function create(
    email: string,
    plan: PlanName,
    passwordHash: string | null,
    emailVerifiedAt: Date | null = null,
  ): Promise<AccountView> {
    const a = await repo.create({ email, plan, passwordHash, emailVerifiedAt });
    if (!a) throw new ConflictError('email_taken', `an account with email ${email} already exists`, 'email');
    return toAccountView(a, ctx.now());
  }

  const accounts: AccountUseCases = {
    async signUp(input) {
      const email = normaliseEmail(input.email);
      const password = checkPassword(input.password, email);
      return create(email, 'free', await hashPassword(password, ctx.scrypt));
    },

    async authenticate(input) {
      let email: string | null = null;
      try {
        email = normaliseEmail(input.email);
      } catch {
        email = null;
      }
      const given = typeof input.password === 'string' ? input.password : '';
      // longer than any password can be: checked against the dummy (same work), never a match
      const tooLong = given.length > PASSWORD_MAX;
      const password = tooLong ? given.slice(0, PASSWORD_MAX) : given;
      // made on the first sign-in whatever its outcome, so that one is not slower for unknown emails only
      const dummy = await dummyHash();
      const a = email ? await repo.findByEmail(email) : null;
      const ok = await verifyPassword(password, (!tooLong && a?.passwordHash) || dummy);
      if (!a || !a.passwordHash || tooLong || !ok) throw new InvalidCredentialsError();
      if (needsRehash(a.passwordHash, ctx.scrypt)) {
        await changeAccount(ctx, a.id, { passwordHash: await hashPassword(password, ctx.scrypt) });
      }
      return toAccountView(a, ctx.now());
    },

    async changePassword(accountId, input) {
      const a = await loadAccount(ctx, accountId);
      const next = checkPassword(input.newPassword, a.email, 'newPassword');
      const current = typeof input.currentPassword === 'string' ? input.currentPassword : '';
      if (!a.passwordHash || current.length > PASSWORD_MAX || !(await verifyPassword(current, a.passwordHash))) {
        throw new ValidationError('currentPassword', 'is not your current password');
      }
      await changeAccount(ctx, a.id, { passwordHash: await hashPassword(next, ctx.scrypt), endSessions: true });
    },

    async get(accountId) {
      return toAccountView(await loadAccount(ctx, accountId), ctx.now());
    },

    async sessionGeneration(accountId) {
      if (!isUuid(accountId)) return null;
      return (await repo.findById(accountId.toLowerCase()))?.sessionGeneration ?? null;
    },

    async endSessions(accountId) {
      await changeAccount(ctx, (await loadAccount(ctx, accountId)).id, { endSessions: true });
    },
  };

  const admin: AccountAdminUseCases = {
    async createAccount(input) {
      const email = normaliseEmail(input.email);
      const hash =
        input.password === undefined ? null : await hashPassword(checkPassword(input.password, email), ctx.scrypt);
      // the operator vouches for the address of an account they create
      return create(email, input.plan ?? 'free', hash, ctx.now());
    },

    async setPlan(accountId, input) {
      const a = await loadAccount(ctx, accountId);
      const { trialDays } = input;
      if (trialDays !== undefined && (!Number.isInteger(trialDays) || trialDays < 0 || trialDays > 365)) {
        throw new ValidationError('trialDays', 'must be a whole number from 0 to 365');
      }
      const now = ctx.now();
      const trial =
        trialDays === undefined
          ? {}
          : trialDays === 0
            ? { trialEndsAt: null }
            : {
                trialEndsAt: new Date(now.getTime() + trialDays * 86_400_000),
                trialStartedAt: a.trialStartedAt ?? now,
              };
      await changeAccount(ctx, a.id, { plan: input.plan, ...trial });
      return toAccountView(await loadAccount(ctx, a.id), ctx.now());
    },

    async setPassword(accountId, password) {
      const a = await loadAccount(ctx, accountId);
      const hash = await hashPassword(checkPassword(password, a.email), ctx.scrypt);
      await changeAccount(ctx, a.id, { passwordHash: hash, endSessions: true });
    },
  };

  return { accounts, admin };
}
