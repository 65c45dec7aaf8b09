/** Accounts, their email links and their usage, as the use-cases read and change them. */
import type { PlanName } from '@sts/core';

export interface AccountRecord {
  id: string;
  email: string;
  plan: PlanName;
  /** when the stored plan last changed (its creation until then) */
  planSince: Date;
  trialStartedAt: Date | null;
  trialEndsAt: Date | null;
  passwordHash: string | null;
  createdAt: Date;
  emailVerifiedAt: Date | null;
  notifyQuota: boolean;
  notifyWebhook: boolean;
  notifyTrial: boolean;
  /** dashboard sessions made under another generation are refused when loaded */
  sessionGeneration: number;
}

export type AccountChange = Partial<
  Pick<
    AccountRecord,
    'plan' | 'trialStartedAt' | 'trialEndsAt' | 'passwordHash' | 'notifyQuota' | 'notifyWebhook' | 'notifyTrial'
  >
> & {
  /** increments the session generation in the same update: every session of the account ends */
  endSessions?: true;
};

/** What `startTrial` did: started, or refused because the address or the account had the trial. */
export type TrialStart = 'started' | 'address_used' | 'account_used';

export interface AccountsRepository {
  findById(id: string): Promise<AccountRecord | null>;
  /** by the normalised (lower-cased) address */
  findByEmail(email: string): Promise<AccountRecord | null>;
  /** null when the address has an account already (also when a concurrent create took it) */
  create(input: {
    email: string;
    plan: PlanName;
    passwordHash: string | null;
    emailVerifiedAt: Date | null;
  }): Promise<AccountRecord | null>;
  /** false when there is no such account */
  update(id: string, change: AccountChange): Promise<boolean>;
  /** sets emailVerifiedAt when it is not set yet */
  markVerified(id: string, at: Date): Promise<void>;
  /**
   * Starts the trial in one transaction: with `grantKey`, first records the once-per-address
   * grant (`address_used` when it exists); then sets the trial when the account never had one
   * (`account_used` otherwise, the grant undone). Of two concurrent starts exactly one succeeds.
   */
  startTrial(id: string, trial: { startedAt: Date; endsAt: Date; grantKey: string | null }): Promise<TrialStart>;
}

export type TokenPurpose = 'verify' | 'reset';

interface EmailTokenRecord {
  id: string;
  accountId: string;
  purpose: string;
  expiresAt: Date;
  usedAt: Date | null;
  /** the account's address (a reset checks the new password against it) */
  email: string;
}

export interface EmailTokensRepository {
  create(token: { accountId: string; purpose: TokenPurpose; tokenHash: string; expiresAt: Date }): Promise<void>;
  findByHash(tokenHash: string): Promise<EmailTokenRecord | null>;
  /** marks the token used when it is not yet; false when another use came first */
  use(id: string, at: Date): Promise<boolean>;
  /** marks every unused token of the account for `purpose` used */
  useAll(accountId: string, purpose: TokenPurpose, at: Date): Promise<void>;
}

export interface UsageRepository {
  /** the month's count (`period` "YYYY-MM"), 0 without a row */
  monthly(accountId: string, period: string): Promise<number>;
  /** the days from `from` to `to` (UTC dates, both included) that have a count */
  daily(accountId: string, from: Date, to: Date): Promise<{ day: Date; used: number }[]>;
}
