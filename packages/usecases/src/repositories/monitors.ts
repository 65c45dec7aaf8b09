/**
 * Monitors and their webhook endpoints: the one projection the use-cases read (settings, state,
 * hit count, webhook without its secrets) and the changes they make.
 */
import type { WebhookKindName } from '@sts/core';
import type { OrderingName, RetryPolicyName } from '../types';
import type { MonitorSettings } from '@sts/db';

export interface WebhookRecord {
  url: string;
  kind: WebhookKindName;
  isBroken: boolean;
  brokenReason: string | null;
  secretRotatedAt: Date | null;
  previousSecretUntil: Date | null;
  consecutiveFailures: number;
  firstFailureAt: Date | null;
  disabledAt: Date | null;
  retryPolicy: RetryPolicyName;
  ordering: OrderingName;
  /** events held while disabled, not yet sent, and how many of this hold were dropped past its bounds (the dispatcher's) */
  heldCount: number;
  heldDropped: number;
  createdAt: Date;
}

/** the delivery rules to change; those left out stay */
export type WebhookSettings = Partial<Pick<WebhookRecord, 'retryPolicy' | 'ordering'>>;

export type MonitorRecord = MonitorSettings & {
  accountId: string;
  hitCount: number;
  webhook: WebhookRecord | null;
};

/** the settings a customer edits; the target's lookup key is the repository's business */
export type MonitorChange = Partial<
  Pick<
    MonitorRecord,
    'targetUsername' | 'query' | 'keywords' | 'excludeTypes' | 'langs' | 'checkIntervalSec' | 'isActive' | 'events'
  >
>;

interface NewMonitor {
  id: string;
  accountId: string;
  /** exactly one of the two: a username monitor or a query monitor */
  targetUsername: string | null;
  query: string | null;
  keywords: string[];
  excludeTypes?: string[];
  langs?: string[];
  /** what it sends: posts and/or profile (default posts) */
  events?: string[];
  checkIntervalSec: number;
  webhook: ({ url: string; kind: WebhookKindName; secretCiphertext: string } & WebhookSettings) | null;
}

interface SecretRotation {
  secretCiphertext: string;
  rotatedAt: Date;
  /** the secret kept for the overlap (null: dropped at once) and until when */
  previousSecretCiphertext: string | null;
  previousSecretUntil: Date | null;
}

/** What `setWebhook` and a new monitor's webhook start with: healthy, not disabled, no overlapped secret. */
export const FRESH_WEBHOOK = {
  isBroken: false,
  brokenReason: null,
  consecutiveFailures: 0,
  firstFailureAt: null,
  disabledAt: null,
  previousSecretCiphertext: null,
  previousSecretUntil: null,
} as const;

export interface MonitorsRepository {
  /** the account's monitors, newest first (createdAt, then id) */
  list(accountId: string): Promise<MonitorRecord[]>;
  /** the monitor when it belongs to the account */
  find(accountId: string, id: string): Promise<MonitorRecord | null>;
  /** whether the monitor exists and belongs to the account (no projection read) */
  owns(accountId: string, id: string): Promise<boolean>;
  ownerOf(id: string): Promise<string | null>;
  count(accountId: string): Promise<number>;
  /**
   * Creates the monitor (with its webhook) unless the account has `limit` monitors already:
   * false then, nothing written. Creates of one account are serialised, so none races past it.
   */
  createWithinLimit(monitor: NewMonitor, limit: number): Promise<boolean>;
  update(id: string, change: MonitorChange): Promise<void>;
  /** deletes it with its webhook, hits and delivery log; false when it was gone */
  remove(accountId: string, id: string): Promise<boolean>;
  /**
   * Sets or replaces the webhook: a new secret, healthy, no overlap; a replacement records
   * `at` as its rotation time.
   */
  setWebhook(
    monitorId: string,
    hook: { url: string; kind: WebhookKindName; secretCiphertext: string } & WebhookSettings,
    at: Date,
  ): Promise<void>;
  /** changes the webhook's delivery rules (it exists) */
  configureWebhook(monitorId: string, settings: WebhookSettings): Promise<void>;
  /** the current secret (ciphertext) of the monitor's webhook */
  webhookSecret(monitorId: string): Promise<string>;
  rotateSecret(monitorId: string, rotation: SecretRotation): Promise<void>;
  /** ends an overlap: the previous secret is dropped */
  dropPreviousSecret(monitorId: string): Promise<void>;
  removeWebhook(monitorId: string): Promise<void>;
  /**
   * enabled again: the health streak and the disabled mark cleared (the dispatcher then releases
   * the held events); a failing or disabled one tells the account it recovered (a notice)
   */
  enableWebhook(monitorId: string): Promise<void>;
}
