/**
 * Username → X account, in batches, cached for the fleet.
 *
 * `resolve(usernames)` answers from the cache (Redis: `x:user:<lowercase username>`, shared by
 * every poller and read-api replica, TTL X_USER_CACHE_TTL_SECONDS) and asks X for the rest with
 * `GET /2/users/by?usernames=` (up to 100 a call). X's partial `errors` say which names are missing
 * or suspended. A missing name whose account this cache knew (`x:uid:<name>`, kept 30 days) was
 * renamed or deactivated: one `GET /2/users?ids=` (batched too) tells which, and the new username.
 * Problems are cached for at most 10 minutes, so a reinstated account comes back soon.
 * `rememberMany` seeds the cache from the authors X sends with posts anyway (`includes.users`), so
 * an account that posts stays cached without a lookup of its own.
 */
import type { RedisClient } from '@sts/common';
import { isValidUsername, chunks } from '@sts/core';
import type { SocialUser } from '../types';
import type { XClient } from './client';
import type { XPriority } from './governor';
import { failed, isSuspended, mapXUser, X_USER_FIELDS, type XUser } from './wire';

export type XUserResolution =
  | { status: 'ok'; user: SocialUser }
  | { status: 'not_found'; message: string }
  | { status: 'suspended'; message: string }
  | { status: 'renamed'; message: string; id: string; newUsername: string | null };

export interface XUserDirectory {
  /** keyed by lowercase username; every given name has an entry */
  resolve(usernames: readonly string[], priority?: XPriority): Promise<Map<string, XUserResolution>>;
  /** a user read elsewhere (profile read) refreshes the cache */
  remember(user: SocialUser): Promise<void>;
  /**
   * users seen elsewhere (the authors in a search's or the stream's `includes.users`) refresh the
   * cache in one round: a target that posts is never looked up
   */
  rememberMany(users: readonly SocialUser[]): Promise<void>;
  forget(username: string): Promise<void>;
  /** true when the cache holds a problem for the name (missing, suspended, renamed): no X call needed */
  knownMissing(username: string): Promise<boolean>;
  /**
   * X answered 404 for the name elsewhere (a profile read): remembered as missing for up to 10
   * minutes, so a loop over it costs X nothing, unless this cache knew its account (then the
   * next resolve explains it: renamed or deactivated)
   */
  rememberMissing(username: string): Promise<void>;
}

export interface XUserDirectoryOptions {
  client: XClient;
  /** shared cache; without it a process-local one */
  redis?: RedisClient;
  /** default 3600 */
  ttlSeconds?: number;
  /** concurrent resolutions within this window share X calls (100 names each); default 20 ms */
  batchWindowMs?: number;
}

const BATCH = 100;
const ID_MEMORY_SECONDS = 30 * 86_400;
const PROBLEM_TTL_SECONDS = 600;

interface Store {
  get(keys: string[]): Promise<(string | null)[]>;
  set(entries: Array<[string, string, number]>): Promise<void>;
  del(key: string): Promise<void>;
}

function redisStore(redis: RedisClient): Store {
  return {
    // one GET per key (a cluster spreads them over slots; ioredis pipelines them on the connection)
    get: (keys) => Promise.all(keys.map((k) => redis.get(k))),
    set: async (entries) => void (await Promise.all(entries.map(([k, v, ttl]) => redis.set(k, v, 'EX', ttl)))),
    del: async (key) => void (await redis.del(key)),
  };
}

function memoryStore(): Store {
  const m = new Map<string, { value: string; until: number }>();
  return {
    get: (keys) =>
      Promise.resolve(
        keys.map((k) => {
          const e = m.get(k);
          return e && e.until > Date.now() ? e.value : null;
        }),
      ),
    set: (entries) => {
      for (const [k, value, ttl] of entries) m.set(k, { value, until: Date.now() + ttl * 1000 });
      return Promise.resolve();
    },
    del: (key) => Promise.resolve(void m.delete(key)),
  };
}

const userKey = (lower: string) => `x:user:${lower}`;
const idKey = (lower: string) => `x:uid:${lower}`;

function encode(r: XUserResolution): string {
  return JSON.stringify(
    r.status === 'ok' ? { ...r, user: { ...r.user, createdAt: r.user.createdAt?.toISOString() ?? null } } : r,
  );
}

function decode(raw: string): XUserResolution {
  const r = JSON.parse(raw) as XUserResolution & { user?: { createdAt: string | null } };
  if (r.status === 'ok') {
    const created = (r.user as unknown as { createdAt: string | null }).createdAt;
    return { status: 'ok', user: { ...r.user, createdAt: created ? new Date(created) : null } };
  }
  return r;
}

type Fetch = (names: string[], priority: XPriority) => Promise<Map<string, XUserResolution>>;

/**
 * Coalesces the names of concurrent resolutions (e.g. the poller's concurrent timeline polls)
 * arriving within `windowMs` into one fetch, so they share users/by calls; a name already being
 * fetched waits for that fetch. The batch runs at the highest priority any caller asked for.
 */
function createBatcher(fetch: Fetch, windowMs: number): Fetch {
  let queue: Array<{ names: string[]; priority: XPriority; done: (r: Promise<Map<string, XUserResolution>>) => void }> =
    [];
  let timer: NodeJS.Timeout | null = null;
  const inFlight = new Map<string, Promise<Map<string, XUserResolution>>>();
  function flush() {
    timer = null;
    const waiters = queue;
    queue = [];
    const names = [...new Set(waiters.flatMap((w) => w.names))];
    const priority = waiters.some((w) => w.priority === 'high') ? 'high' : 'low';
    const p = fetch(names, priority);
    for (const n of names) inFlight.set(n, p);
    void p.then(
      () => names.forEach((n) => inFlight.get(n) === p && inFlight.delete(n)),
      () => names.forEach((n) => inFlight.get(n) === p && inFlight.delete(n)),
    );
    for (const w of waiters) w.done(p);
  }
  return async (names, priority) => {
    const waiting = [...new Set(names.map((n) => inFlight.get(n)).filter((p) => p !== undefined))];
    const rest = names.filter((n) => !inFlight.has(n));
    const parts = [...waiting];
    if (rest.length) {
      parts.push(
        new Promise<Map<string, XUserResolution>>((resolve, reject) => {
          queue.push({ names: rest, priority, done: (r) => void r.then(resolve, reject) });
          timer ??= setTimeout(flush, windowMs);
        }),
      );
    }
    const out = new Map<string, XUserResolution>();
    for (const m of await Promise.all(parts)) for (const [k, v] of m) out.set(k, v);
    return out;
  };
}

export function createXUserDirectory(options: XUserDirectoryOptions): XUserDirectory {
  const { client } = options;
  const store = options.redis ? redisStore(options.redis) : memoryStore();
  const ttl = options.ttlSeconds ?? 3600;
  if (!Number.isInteger(ttl) || ttl < 1) throw new RangeError('ttlSeconds must be a positive integer');

  /** One users/by call: found users and the names X reported (suspended or missing). */
  async function lookup(names: string[], priority: XPriority, out: Map<string, XUserResolution>): Promise<string[]> {
    const { status, body } = await client.request<XUser[]>({
      family: 'users',
      path: '/2/users/by',
      params: { usernames: names.join(','), 'user.fields': X_USER_FIELDS },
      priority,
    });
    if (status !== 200) throw failed(status, body);
    for (const u of body.data ?? []) out.set(u.username.toLowerCase(), { status: 'ok', user: mapXUser(u) });
    const missing: string[] = [];
    for (const p of body.errors ?? []) {
      const name = (p.value ?? p.resource_id ?? '').toLowerCase();
      if (!name) continue;
      if (isSuspended(p)) out.set(name, { status: 'suspended', message: `@${p.value ?? name} is suspended on X` });
      else missing.push(name);
    }
    // a name X neither found nor reported counts as missing
    for (const n of names)
      if (!out.has(n.toLowerCase()) && !missing.includes(n.toLowerCase())) missing.push(n.toLowerCase());
    return missing;
  }

  /** Names X no longer finds: renamed or deactivated when this cache knew their account. */
  async function explain(missing: string[], priority: XPriority, out: Map<string, XUserResolution>): Promise<void> {
    const ids = await store.get(missing.map(idKey));
    const known = new Map<string, string>();
    missing.forEach((name, i) => {
      const id = ids[i];
      if (id) known.set(id, name);
      else out.set(name, { status: 'not_found', message: `target user @${name} not found on X` });
    });
    for (const batch of chunks([...known.keys()], BATCH)) {
      const { status, body } = await client.request<XUser[]>({
        family: 'users',
        path: '/2/users',
        params: { ids: batch.join(','), 'user.fields': X_USER_FIELDS },
        priority,
      });
      if (status !== 200) throw failed(status, body);
      const found = new Map((body.data ?? []).map((u) => [u.id, u]));
      for (const id of batch) {
        const name = known.get(id)!;
        const now = found.get(id);
        const problem = (body.errors ?? []).find((p) => (p.value ?? p.resource_id) === id);
        if (problem && isSuspended(problem))
          out.set(name, { status: 'suspended', message: `@${name} is suspended on X` });
        else
          out.set(name, {
            status: 'renamed',
            id,
            newUsername: now?.username ?? null,
            message: now
              ? `@${name} was renamed on X: account ${id} is now @${now.username}`
              : `@${name} no longer exists on X (account ${id} was renamed or deactivated)`,
          });
      }
    }
  }

  async function save(results: Map<string, XUserResolution>): Promise<void> {
    const entries: Array<[string, string, number]> = [];
    for (const [name, r] of results) {
      entries.push([userKey(name), encode(r), r.status === 'ok' ? ttl : Math.min(ttl, PROBLEM_TTL_SECONDS)]);
      if (r.status === 'ok') entries.push([idKey(name), r.user.id, ID_MEMORY_SECONDS]);
    }
    await store.set(entries);
  }

  /** X lookups for names no cache holds, ≤ 100 a call; saved for the fleet */
  async function fetchNames(misses: string[], priority: XPriority): Promise<Map<string, XUserResolution>> {
    const fresh = new Map<string, XUserResolution>();
    for (const batch of chunks(misses, BATCH)) {
      const missing = await lookup(batch, priority, fresh);
      if (missing.length) await explain(missing, priority, fresh);
    }
    await save(fresh);
    return fresh;
  }

  const batcher = createBatcher(fetchNames, options.batchWindowMs ?? 20);

  return {
    async resolve(usernames, priority = 'high') {
      const names = [...new Set(usernames.map((u) => u.toLowerCase()))];
      const result = new Map<string, XUserResolution>();
      const valid = names.filter((n) => {
        if (isValidUsername(n)) return true;
        result.set(n, { status: 'not_found', message: `"${n}" is not an X username` });
        return false;
      });
      const cached = await store.get(valid.map(userKey));
      const misses: string[] = [];
      valid.forEach((n, i) => (cached[i] ? result.set(n, decode(cached[i])) : misses.push(n)));
      if (misses.length) for (const [k, v] of await batcher(misses, priority)) if (misses.includes(k)) result.set(k, v);
      return result;
    },
    remember: (user) => save(new Map([[user.username.toLowerCase(), { status: 'ok', user }]])),
    rememberMany: (users) =>
      save(
        new Map(
          users
            .filter((u) => u.id !== '' && u.username !== '')
            .map((user) => [user.username.toLowerCase(), { status: 'ok', user }] as const),
        ),
      ),
    forget: (username) => store.del(userKey(username.toLowerCase())),
    async knownMissing(username) {
      const [raw] = await store.get([userKey(username.toLowerCase())]);
      return raw ? decode(raw).status !== 'ok' : false;
    },
    async rememberMissing(username) {
      const name = username.toLowerCase();
      const [id] = await store.get([idKey(name)]);
      if (id) return store.del(userKey(name));
      return save(new Map([[name, { status: 'not_found', message: `target user @${name} not found on X` }]]));
    },
  };
}
