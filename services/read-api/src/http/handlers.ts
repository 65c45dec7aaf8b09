/**
 * The /api/v1 endpoints. Each validates all of its input before any I/O, reads through the social
 * source or the monitor repository, and returns the record shapes of src/domain/records.ts.
 */
import { NotFoundError, NotImplementedError, UnauthorizedError } from '@sts/common';
import { retentionSince, type Retention } from '@sts/core';
import type { SocialSource } from '@sts/social';
import type { MonitorRepository } from '../adapters/monitors';
import {
  isUuid,
  parseCursor,
  parseHitLimit,
  parseIncludeHits,
  parseLimit,
  parseNewTweet,
  parseSearchQuery,
  parseTweetId,
  parseUsername,
} from '../domain/params';
import { hitRecord, listBody, monitorRecord, tweetRecord } from '../domain/records';
import { readJsonBody } from './body';
import type { RequestContext, Route } from './router';
import type { UserCache } from './userCache';

export interface HandlerDeps {
  source: SocialSource;
  monitors: MonitorRepository;
  users: UserCache;
  retention: Retention;
}

/**
 * The oldest post whose hits the caller's plan shows: the API lists hits by this window, never by
 * what storage still holds, so a week being dropped (or not yet) never changes a listing. An
 * unknown plan gets Free's window.
 */
export function hitsSince(retention: Retention, plan: string | null): Date {
  const days = plan === 'starter' ? retention.starter.hitsDays : retention.free.hitsDays;
  return retentionSince(days);
}

function requireAccount(ctx: RequestContext): string {
  if (!ctx.accountId) throw new UnauthorizedError('missing or invalid x-account-id');
  return ctx.accountId;
}

function userNotFound(username: string): NotFoundError {
  return new NotFoundError('USER_NOT_FOUND', `user "${username}" not found`);
}

export function apiRoutes(deps: HandlerDeps): Route[] {
  const { source, monitors, users, retention } = deps;
  return [
    {
      pattern: '/api/v1/users/:username',
      handlers: {
        GET: async (ctx) => {
          const username = parseUsername(ctx.params.username!);
          const json = await users.get(username);
          if (json === null) throw userNotFound(username);
          return { status: 200, body: undefined, json };
        },
      },
    },
    {
      pattern: '/api/v1/users/:username/tweets',
      handlers: {
        GET: async (ctx) => {
          const username = parseUsername(ctx.params.username!);
          const limit = parseLimit(ctx.query);
          const cursor = parseCursor(ctx.query);
          const page = await source.getUserTimeline(username, { limit, cursor });
          if (!page) throw userNotFound(username);
          return { status: 200, body: listBody(page.items.map(tweetRecord), page.nextCursor) };
        },
      },
    },
    {
      pattern: '/api/v1/tweets/:id',
      handlers: {
        GET: async (ctx) => {
          const id = parseTweetId(ctx.params.id!);
          const tweet = await source.getTweet(id);
          if (!tweet) throw new NotFoundError('TWEET_NOT_FOUND', `tweet ${id} not found`);
          return { status: 200, body: { data: tweetRecord(tweet) } };
        },
      },
    },
    {
      pattern: '/api/v1/tweets',
      handlers: {
        POST: async (ctx) => {
          parseNewTweet(await readJsonBody(ctx.req));
          throw new NotImplementedError('posting tweets is coming soon');
        },
      },
    },
    {
      pattern: '/api/v1/search',
      handlers: {
        GET: async (ctx) => {
          const q = parseSearchQuery(ctx.query);
          const limit = parseLimit(ctx.query);
          const cursor = parseCursor(ctx.query);
          const page = await source.search(q, { limit, cursor });
          return { status: 200, body: listBody(page.items.map(tweetRecord), page.nextCursor) };
        },
      },
    },
    {
      pattern: '/api/v1/monitors',
      handlers: {
        GET: async (ctx) => {
          const includeHits = parseIncludeHits(ctx.query);
          const hitLimit = parseHitLimit(ctx.query);
          const accountId = requireAccount(ctx);
          const rows = await monitors.listMonitors(accountId);
          const hits = includeHits
            ? await monitors.recentHits(
                rows.map((m) => m.id),
                hitLimit,
                hitsSince(retention, ctx.plan),
              )
            : null;
          const data = rows.map((m) => monitorRecord(m, hits ? (hits.get(m.id) ?? []) : undefined));
          return { status: 200, body: listBody(data, null) };
        },
      },
    },
    {
      pattern: '/api/v1/monitors/:id/hits',
      handlers: {
        GET: async (ctx) => {
          const limit = parseLimit(ctx.query);
          const cursor = parseCursor(ctx.query);
          const accountId = requireAccount(ctx);
          const id = ctx.params.id!.toLowerCase();
          const monitor = isUuid(id) ? await monitors.findMonitor(accountId, id) : null;
          if (!monitor) throw new NotFoundError('NOT_FOUND', 'monitor not found');
          const page = await monitors.listHits(monitor.id, { limit, cursor, since: hitsSince(retention, ctx.plan) });
          return { status: 200, body: listBody(page.items.map(hitRecord), page.nextCursor) };
        },
      },
    },
  ];
}
