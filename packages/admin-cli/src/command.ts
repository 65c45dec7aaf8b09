import type { ParseArgsConfig } from 'node:util';
import { directDatabaseUrl } from '@sts/common';
import { isUuid, type HostResolver } from '@sts/core';
import type { Db } from '@sts/db';

export type OptionSpec = NonNullable<ParseArgsConfig['options']>;
export type OptionValues = Record<string, string | boolean | string[] | boolean[] | undefined>;

/** DATABASE_URL, else the local database `npm start` uses */
export function databaseUrl(env: NodeJS.ProcessEnv): string {
  return env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/sts';
}

/** for a session of its own (LISTEN): DATABASE_DIRECT_URL, never a transaction-mode PgBouncer; unset, databaseUrl() */
export function sessionDatabaseUrl(env: NodeJS.ProcessEnv): string {
  return directDatabaseUrl({
    DATABASE_URL: databaseUrl(env),
    DATABASE_DIRECT_URL: env.DATABASE_DIRECT_URL || undefined,
  });
}

/** A usage error: printed with the command's usage, exit code 2, nothing changed. */
export class CliUsageError extends Error {
  override name = 'CliUsageError';
}

export interface CliContext {
  /** Prisma client on DATABASE_URL, built on first use */
  db(): Db;
  env: NodeJS.ProcessEnv;
  /** registers cleanup run after the command (close connections) */
  onClose(fn: () => Promise<void>): void;
  /** DNS for the save-time webhook URL check; default the system resolver (tests inject one) */
  resolveHost?: HostResolver;
}

export interface CommandResult {
  /** what `--json` prints: one JSON object (a list only where the command's contract says so: monitor preview) */
  json: Record<string, unknown> | Record<string, unknown>[];
  /** what a person reads */
  text: string;
}

export interface Command {
  /** words, e.g. "account create" */
  name: string;
  summary: string;
  usage: string;
  options: OptionSpec;
  /** the option a first bare word stands for (`social delete ID` is `social delete --id ID`) */
  positional?: string;
  run(ctx: CliContext, values: OptionValues): Promise<CommandResult>;
}

export function requireString(values: OptionValues, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v.trim() === '') throw new CliUsageError(`--${name} is required`);
  return v.trim();
}

export function optionalString(values: OptionValues, name: string): string | undefined {
  const v = values[name];
  return typeof v === 'string' ? v : undefined;
}

export function optionalInt(values: OptionValues, name: string, min: number, max: number): number | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !/^\d+$/.test(v) || Number(v) < min || Number(v) > max) {
    throw new CliUsageError(`--${name} must be a whole number from ${min} to ${max}`);
  }
  return Number(v);
}

/** A required option holding a UUID, e.g. `requireUuid(values, 'account', 'an account')`. */
export function requireUuid(values: OptionValues, name: string, what: string): string {
  const v = requireString(values, name);
  if (!isUuid(v)) throw new CliUsageError(`--${name} must be ${what} id (a UUID)`);
  return v.toLowerCase();
}
