/** Why a webhook failed verification; the message says the same thing in words. */
export type WebhookVerificationReason =
  | 'MISSING_HEADER'
  | 'DUPLICATE_HEADER'
  | 'INVALID_TIMESTAMP'
  | 'TIMESTAMP_TOO_OLD'
  | 'TIMESTAMP_TOO_NEW'
  | 'MALFORMED_SIGNATURE'
  | 'SIGNATURE_MISMATCH';

/**
 * The one error `verify` throws for a request that must be refused (answer 401).
 * Programming errors (an empty secret, a parsed object passed as the body) are TypeErrors instead.
 */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
  /** The error code receivers answer with, as in `{"error": "...", "code": "INVALID_SIGNATURE"}`. */
  readonly code = 'INVALID_SIGNATURE';

  constructor(
    message: string,
    readonly reason: WebhookVerificationReason,
  ) {
    super(message);
  }
}
