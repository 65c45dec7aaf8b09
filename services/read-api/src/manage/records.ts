/** The use-cases' views (@sts/usecases) as the API's management records (@sts/api-contract). */
import type { DeliveryRecord, PreviewRecord, WebhookRecord, WebhookWithSecret } from '@sts/api-contract';
import type { DeliveryDetail, Preview, WebhookView, WebhookWithSecret as WebhookWithSecretView } from '@sts/usecases';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function webhookRecord(monitorId: string, w: WebhookView): WebhookRecord {
  return {
    monitor_id: monitorId,
    url: w.shownUrl,
    kind: w.kind,
    is_broken: w.isBroken,
    broken_reason: w.brokenReason,
    health: w.health.state,
    consecutive_failures: w.health.consecutiveFailures,
    held_events: w.health.held,
    held_dropped: w.health.heldDropped,
    secret_rotated_at: iso(w.secretRotatedAt),
    previous_secret_until: iso(w.previousSecretUntil),
    retry_policy: w.retryPolicy,
    ordering: w.ordering,
    created_at: w.createdAt.toISOString(),
  };
}

export function webhookWithSecret(monitorId: string, w: WebhookWithSecretView): WebhookWithSecret {
  return {
    ...webhookRecord(monitorId, w.webhook),
    webhook_secret: w.secret,
    standard_webhook_secret: w.standardSecret,
    warnings: w.warnings,
  };
}

export function deliveryRecord(d: DeliveryDetail): DeliveryRecord {
  return {
    id: d.id,
    monitor_id: d.monitorId,
    event: d.event,
    delivery_id: d.deliveryId,
    hit_id: d.hitId,
    outcome: d.outcome,
    attempt: d.attempt,
    next_attempt_at: iso(d.nextAttemptAt),
    held: d.held,
    status_code: d.statusCode,
    latency_ms: d.latencyMs,
    error: d.error,
    url: d.url,
    request: d.request,
    response: d.response
      ? { status: d.response.status, headers: d.response.headers, body: d.response.body.toString('utf8') }
      : null,
    created_at: d.createdAt.toISOString(),
  };
}

export function previewRecord(p: Preview): PreviewRecord {
  return {
    target_username: p.target,
    query: p.query,
    keywords: p.keywords,
    filters: { exclude: p.filters.exclude, lang: p.filters.lang },
    cached: p.cached,
    posts: p.posts.map((post) => ({
      id: post.id,
      text: post.text,
      created_at: post.createdAt.toISOString(),
      lang: post.lang,
      matched: post.matched,
      code: post.code,
      reason: post.reason,
    })),
  };
}
