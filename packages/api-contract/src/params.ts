/**
 * The bounds of the API's parameters: read-api's parsers enforce them (services/read-api
 * src/domain/params.ts, hand-written on purpose: strict about "1e2", "+5", repeats) and the OpenAPI
 * document publishes them.
 */
export const LIMIT = { default: 20, min: 1, max: 100 } as const;
export const HIT_LIMIT = { default: 3, min: 1, max: 10 } as const;
export const Q_MAX_LENGTH = 512;
export const CURSOR_MAX_LENGTH = 1024;
/** the largest `after` of the events endpoint: any sequence a monitor can reach, exact in a JSON number */
export const SEQUENCE_MAX = Number.MAX_SAFE_INTEGER;
/** Cursors are opaque base64url text. */
export const CURSOR_PATTERN = `^[A-Za-z0-9_-]{1,${CURSOR_MAX_LENGTH}}$`;
export const TWEET_TEXT_MAX_LENGTH = 280;
