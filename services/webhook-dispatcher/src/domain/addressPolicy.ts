/**
 * The address rules live in @sts/core (packages/core/src/addressPolicy.ts) so that the save-time
 * check of a webhook URL (`checkWebhookUrlForSave`) and this dial-time guard share ONE definition
 * of "public address". Re-exported here for the dispatcher's imports.
 */
export { blockedReason, createHostAllowList, normalizeHostname } from '@sts/core';
