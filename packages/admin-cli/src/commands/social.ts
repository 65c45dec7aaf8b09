/**
 * Commands for the `local` social store (PostgreSQL): create or update a user, post a tweet.
 * Bad input (invalid username, unknown author, empty or over-long text) is a usage error: exit 2,
 * nothing written.
 */
import {
  createSocialTweet,
  createSocialUser,
  deleteSocialTweet,
  SocialInputError,
  TWEET_MAX_LENGTH,
} from '@sts/social';
import { CliUsageError, optionalInt, optionalString, requireString, type Command } from '../command';

const MAX_COUNT = 2_147_483_647;

async function asUsage<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof SocialInputError) throw new CliUsageError(err.message);
    throw err;
  }
}

const socialUser: Command = {
  name: 'social user',
  summary: 'create a user of the local social store, or update the one with that username',
  usage: [
    'usage: npm run cli -- social user --username U --name N [--followers N] [--following N] [--verified]',
    '                                  [--description D] [--json]',
    '',
    'Creates the user, or updates the given fields of the existing user with the same username',
    '(case-insensitive). Prints the user id; --json prints {"id": ..., "username": ...}.',
  ].join('\n'),
  options: {
    username: { type: 'string' },
    name: { type: 'string' },
    followers: { type: 'string' },
    following: { type: 'string' },
    verified: { type: 'boolean' },
    description: { type: 'string' },
  },
  async run(ctx, values) {
    const username = requireString(values, 'username');
    const name = requireString(values, 'name');
    const followersCount = optionalInt(values, 'followers', 0, MAX_COUNT);
    const followingCount = optionalInt(values, 'following', 0, MAX_COUNT);
    const description = optionalString(values, 'description');
    const user = await asUsage(() =>
      createSocialUser(ctx.db(), {
        username,
        name,
        ...(followersCount !== undefined ? { followersCount } : {}),
        ...(followingCount !== undefined ? { followingCount } : {}),
        ...(values.verified === true ? { verified: true } : {}),
        ...(description !== undefined ? { description } : {}),
      }),
    );
    return {
      json: { id: user.id, username: user.username },
      text: `user @${user.username} id ${user.id} (${user.followersCount} followers${user.verified ? ', verified' : ''})`,
    };
  },
};

const socialTweet: Command = {
  name: 'social tweet',
  summary: 'post a tweet to the local social store as an existing user',
  usage: [
    'usage: npm run cli -- social tweet --author U --text T [--lang L]',
    '                                   [--reply-to ID | --quote ID | --repost ID] [--json]',
    '',
    `Stores a tweet (1 to ${TWEET_MAX_LENGTH} characters) by the user U; monitors of U see it on`,
    'their next poll. --reply-to, --quote and --repost record what it replies to, quotes or',
    "reposts (X's referenced_tweets; --reply-to and --quote may go together, --repost alone).",
    'Prints the tweet id; --json prints {"id": ...}.',
  ].join('\n'),
  options: {
    author: { type: 'string' },
    text: { type: 'string' },
    lang: { type: 'string' },
    'reply-to': { type: 'string' },
    quote: { type: 'string' },
    repost: { type: 'string' },
  },
  async run(ctx, values) {
    const author = requireString(values, 'author');
    const raw = values.text;
    if (typeof raw !== 'string') throw new CliUsageError('--text is required');
    const lang = optionalString(values, 'lang');
    if (lang !== undefined && !/^[a-z]{2,3}(-[A-Za-z0-9]{2,8})?$/.test(lang)) {
      throw new CliUsageError('--lang must be a language code such as en or pt-BR');
    }
    const replyToId = optionalString(values, 'reply-to');
    const quoteOfId = optionalString(values, 'quote');
    const repostOfId = optionalString(values, 'repost');
    const tweet = await asUsage(() =>
      createSocialTweet(ctx.db(), {
        authorUsername: author,
        text: raw,
        ...(lang ? { lang } : {}),
        ...(replyToId !== undefined ? { replyToId } : {}),
        ...(quoteOfId !== undefined ? { quoteOfId } : {}),
        ...(repostOfId !== undefined ? { repostOfId } : {}),
      }),
    );
    return {
      json: { id: tweet.id },
      text: `tweet ${tweet.id} by @${tweet.author.username} at ${tweet.createdAt.toISOString()}`,
    };
  },
};

const socialDelete: Command = {
  name: 'social delete',
  summary: 'delete a tweet of the local social store (its author deleting a post)',
  usage: [
    'usage: npm run cli -- social delete ID [--json]',
    '',
    'Deletes the tweet ID. Monitors of its author whose events include deletes send',
    'monitor.post_deleted (with the hit they had sent for it, if any) as soon as the poller is',
    'notified. Prints the deleted id; --json prints {"id": ..., "author": ...}.',
  ].join('\n'),
  options: { id: { type: 'string' } },
  positional: 'id',
  async run(ctx, values) {
    const id = requireString(values, 'id');
    const deleted = await asUsage(() => deleteSocialTweet(ctx.db(), id));
    return {
      json: { id: deleted.id, author: deleted.authorUsername },
      text: `deleted tweet ${deleted.id} by @${deleted.authorUsername}`,
    };
  },
};

export const socialCommands: Command[] = [socialUser, socialTweet, socialDelete];
