/**
 * The management endpoints, by method and path: what only a `manage` key may call.
 * The gateway passes these writes on to read-api (any other write is its own 405) and refuses them
 * for a `read` key before the call is admitted (403 INSUFFICIENT_SCOPE, no quota used); read-api
 * checks the forwarded scope again. The delivery log (GET …/deliveries), a webhook's settings
 * (GET …/webhook) and the events by sequence (GET …/events, the payloads the webhooks deliver) are
 * here too: they show the account's endpoints and what they answered.
 */
const ID = '[^/]+';
const MANAGEMENT: readonly (readonly [method: string, path: RegExp])[] = [
  ['POST', /^\/api\/v1\/monitors$/],
  ['POST', /^\/api\/v1\/monitors\/preview$/],
  ['PATCH', new RegExp(`^/api/v1/monitors/${ID}$`)],
  ['DELETE', new RegExp(`^/api/v1/monitors/${ID}$`)],
  ['POST', new RegExp(`^/api/v1/monitors/${ID}/(?:pause|resume|recover)$`)],
  ['PUT', new RegExp(`^/api/v1/monitors/${ID}/webhook$`)],
  ['PATCH', new RegExp(`^/api/v1/monitors/${ID}/webhook$`)],
  ['GET', new RegExp(`^/api/v1/monitors/${ID}/webhook$`)],
  ['DELETE', new RegExp(`^/api/v1/monitors/${ID}/webhook$`)],
  ['POST', new RegExp(`^/api/v1/monitors/${ID}/webhook/(?:test|rotate|enable)$`)],
  ['GET', new RegExp(`^/api/v1/monitors/${ID}/(?:deliveries|events)$`)],
  ['POST', new RegExp(`^/api/v1/deliveries/${ID}/redeliver$`)],
];

/** one trailing slash is tolerated, as read-api's router does */
const trimmed = (path: string) => (path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path);

/** the write methods (POST, PUT, PATCH, DELETE) the management endpoints take at `path` */
export function managementWrites(path: string): string[] {
  const p = trimmed(path);
  return MANAGEMENT.filter(([method, re]) => method !== 'GET' && re.test(p)).map(([method]) => method);
}

/** on the gateway's hot path: a read elsewhere than under /api/v1/monitors costs one prefix test */
export function needsManageScope(method: string, path: string): boolean {
  if (!path.startsWith('/api/v1/monitors') && !path.startsWith('/api/v1/deliveries/')) return false;
  const m = method === 'HEAD' ? 'GET' : method;
  const p = trimmed(path);
  return MANAGEMENT.some(([want, re]) => want === m && re.test(p));
}

/** the longest Idempotency-Key accepted (Stripe's bound); longer is a 400 */
export const IDEMPOTENCY_KEY_MAX_LENGTH = 255;
/** how long an Idempotency-Key's first answer is kept and replayed */
export const IDEMPOTENCY_TTL_SEC = 86_400;
