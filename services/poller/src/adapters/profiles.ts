/**
 * A target's profile and health in PostgreSQL: one look at a target, in one
 * transaction under a per-target transaction lock (replicas notified at once look in turn, so a
 * change is told once):
 * - reads the last profile seen (`target_profiles`) and the account now: the local store's (by
 *   the last profile's id when known, so a rename is followed; else by the watched name), or what
 *   X's batched lookup answered (`record`, src/intake/profile/xLookup.ts);
 * - a rename moves the target's monitors, snapshot and cursor to the new username (same account);
 * - writes the snapshot, the monitors' `target_status` on a change of status, and the events:
 *   `monitor.profile_changed` to the active monitors that asked for profile events, and
 *   `monitor.target_unavailable` to every active monitor when the target becomes unavailable or
 *   renamed (each a `monitor_events` row plus an outbox row, numbered per monitor in the statement
 *   that writes them, the relay publishes them), and one
 *   `account.target.status` account event per account (the dashboard mails it);
 * - a target back to available is due at once (its polls were backed off).
 * With a flap gate (adapters/flap.ts), a target turning unavailable is the gate's to judge first:
 * held, the look changes nothing but its time (no status, no event, no mail).
 */
import type { Db } from '@sts/db';
import {
  accountEventKey,
  monitorRef,
  type AccountTargetStatusEvent,
  type MonitorProfileChangedEvent,
  type MonitorTargetUnavailableEvent,
  type TargetStatus,
} from '@sts/messaging';
import {
  isUnavailable,
  observe,
  type AccountState,
  type Observation,
  type Profile,
  type Sighting,
} from '../domain/profiles';
import type { LookupTarget } from '../domain/schedule';
import type { TargetFlapGate } from './flap';
import { lastLooks, lookupTargets } from './profileTargets';
import { writeMonitorEvents, type MonitorEventRow } from './monitorEvents';

type Tx = Parameters<Parameters<Db['$transaction']>[0]>[0];

/** an event of a look, for one monitor */
type LookEvent = MonitorEventRow<MonitorProfileChangedEvent | MonitorTargetUnavailableEvent>;

interface UserRow {
  id: string;
  username: string;
  name: string;
  description: string | null;
  profile_image_url: string | null;
  verified: boolean;
  status: AccountState;
}

interface SnapshotRow {
  user_id: string | null;
  username: string | null;
  name: string | null;
  description: string | null;
  profile_image_url: string | null;
  verified: boolean | null;
  status: TargetStatus;
}

interface WatcherRow {
  id: string;
  account_id: string;
  target_username: string;
  keywords: string[];
  events: string[] | null;
}

/** what a look found and did, for the log and the tests */
interface ProfileLook extends Observation {
  targetKey: string;
  previousStatus: TargetStatus;
  /** events written (profile changes and status changes, one per monitor) */
  events: number;
}

export interface ProfileRepository {
  /** looks at one target of the local store now */
  look(targetKey: string, detectedAt: Date): Promise<ProfileLook>;
  /** records what another source (X) answered for one target: the same comparison and events as a look */
  record(targetKey: string, sighting: Sighting, detectedAt: Date): Promise<ProfileLook>;
  /** every target of active monitors, with its plans, last account id and last look (the X lookup's) */
  lookupTargets(): Promise<LookupTarget[]>;
  /** the targets of `targetKeys` looked at before, with the account id last seen (null: never found) */
  lastLooks(targetKeys: readonly string[]): Promise<Map<string, string | null>>;
}

/** the account now, read inside the look's transaction (the last profile's id when known) */
type SightingReader = (tx: Tx, targetKey: string, userId: string | null) => Promise<Sighting>;

function toProfile(u: Omit<UserRow, 'status'>): Profile {
  return {
    userId: u.id,
    username: u.username,
    name: u.name,
    description: u.description,
    profileImageUrl: u.profile_image_url,
    verified: u.verified,
  };
}

function snapshotProfile(s: SnapshotRow | undefined): Profile | null {
  if (!s?.user_id || s.username === null || s.name === null || s.verified === null) return null;
  return toProfile({ ...s, id: s.user_id, username: s.username, name: s.name, verified: s.verified });
}

const USER_COLUMNS = 'id::text AS id, username, name, description, profile_image_url, verified, status';

async function readUser(tx: Tx, targetKey: string, userId: string | null): Promise<UserRow | null> {
  const cols = USER_COLUMNS;
  const [byId] = userId
    ? await tx.$queryRawUnsafe<UserRow[]>(`SELECT ${cols} FROM social_users WHERE id = $1::bigint`, userId)
    : [];
  if (byId) return byId;
  const [byName] = await tx.$queryRawUnsafe<UserRow[]>(
    `SELECT ${cols} FROM social_users WHERE username_key = $1`,
    targetKey,
  );
  return byName ?? null;
}

/** the rename: the account (same id) now has `username`; its monitors, snapshot and cursor follow */
async function follow(tx: Tx, from: string, username: string): Promise<string> {
  const to = username.toLowerCase();
  await tx.$executeRaw`DELETE FROM target_profiles WHERE target_key = ${to}`;
  await tx.$executeRaw`UPDATE target_profiles SET target_key = ${to} WHERE target_key = ${from}`;
  await tx.$executeRaw`
    UPDATE poll_cursors SET target_key = ${to}
    WHERE target_key = ${from} AND NOT EXISTS (SELECT 1 FROM poll_cursors WHERE target_key = ${to})`;
  await tx.$executeRaw`
    UPDATE monitors SET target_username = ${username}, target_key = ${to}, updated_at = now()
    WHERE target_key = ${from}`;
  return to;
}

async function saveSnapshot(tx: Tx, key: string, o: Observation, statusChanged: boolean, at: Date): Promise<void> {
  const p = o.profile;
  await tx.$executeRaw`
    INSERT INTO target_profiles (target_key, user_id, username, name, description, profile_image_url, verified,
                                 status, status_changed_at, checked_at)
    VALUES (${key}, ${p?.userId ?? null}, ${p?.username ?? null}, ${p?.name ?? null}, ${p?.description ?? null},
            ${p?.profileImageUrl ?? null}, ${p?.verified ?? null}, ${o.status}, ${statusChanged ? at : null}, ${at})
    ON CONFLICT (target_key) DO UPDATE SET
      user_id = coalesce(EXCLUDED.user_id, target_profiles.user_id),
      username = coalesce(EXCLUDED.username, target_profiles.username),
      name = coalesce(EXCLUDED.name, target_profiles.name),
      description = CASE WHEN EXCLUDED.user_id IS NULL THEN target_profiles.description ELSE EXCLUDED.description END,
      profile_image_url = CASE WHEN EXCLUDED.user_id IS NULL THEN target_profiles.profile_image_url
                               ELSE EXCLUDED.profile_image_url END,
      verified = coalesce(EXCLUDED.verified, target_profiles.verified),
      status = EXCLUDED.status,
      status_changed_at = coalesce(EXCLUDED.status_changed_at, target_profiles.status_changed_at),
      checked_at = EXCLUDED.checked_at`;
}

/** the `account.target.status` account event of each account watching (its mail: a digest notice) */
async function tellAccounts(
  tx: Tx,
  watchers: WatcherRow[],
  base: Omit<AccountTargetStatusEvent, 'accountId' | 'monitorIds'>,
): Promise<void> {
  const byAccount = new Map<string, string[]>();
  for (const m of watchers) byAccount.set(m.account_id, [...(byAccount.get(m.account_id) ?? []), m.id]);
  for (const [accountId, monitorIds] of byAccount) {
    const payload: AccountTargetStatusEvent = { ...base, accountId, monitorIds };
    await tx.accountEvent.createMany({
      data: [
        {
          dedupKey: accountEventKey('account.target.status', payload),
          routingKey: 'account.target.status',
          accountId,
          payload,
        },
      ],
      skipDuplicates: true,
    });
  }
}

/**
 * A change of status: the monitors show it; unavailable or renamed is told once per monitor
 * (`monitor.target_unavailable`) and account (a notice); back from unavailable (`ok` after
 * suspended, protected or not found) is told to the accounts only: a notice, no webhook event.
 */
async function statusChanged(
  tx: Tx,
  key: string,
  watchers: WatcherRow[],
  o: Observation,
  previous: { status: TargetStatus; username: string },
  at: Date,
): Promise<LookEvent[]> {
  await tx.$executeRaw`UPDATE monitors SET target_status = ${o.status}, target_status_at = ${at} WHERE target_key = ${key}`;
  if (!isUnavailable(o.status) && o.status !== 'renamed') {
    // back: polled again at once
    await tx.$executeRaw`
      UPDATE poll_targets SET next_due_at = least(next_due_at, now()), changed_at = clock_timestamp()
      WHERE target_key = ${key} AND active_monitors > 0`;
    if (isUnavailable(previous.status)) {
      const back = { occurredAt: at.toISOString(), username: previous.username, newUsername: null };
      await tellAccounts(tx, watchers, { ...back, status: o.status, previousStatus: previous.status });
    }
    return [];
  }
  const status = o.status as MonitorTargetUnavailableEvent['status'];
  const detail = detailOf(o, previous.username);
  const detectedAt = at.toISOString();
  const events: LookEvent[] = watchers.map((m) => ({
    monitorId: m.id,
    accountId: m.account_id,
    payload: {
      event: 'monitor.target_unavailable',
      monitor: monitorRef({ id: m.id, targetUsername: m.target_username, keywords: m.keywords }),
      status,
      previousStatus: previous.status,
      username: previous.username,
      newUsername: o.renamedTo,
      detail,
      detectedAt,
    },
  }));
  await tellAccounts(tx, watchers, {
    occurredAt: detectedAt,
    username: previous.username,
    status: o.status,
    previousStatus: previous.status,
    newUsername: o.renamedTo,
  });
  return events;
}

function detailOf(o: Observation, username: string): string {
  switch (o.status) {
    case 'suspended':
      return `@${username} is suspended`;
    case 'protected':
      return `@${username} is protected: its posts are visible to approved followers only`;
    case 'not_found':
      return `@${username} does not exist (deleted or deactivated)`;
    case 'renamed':
      return `@${username} was renamed to @${o.renamedTo ?? '?'}; the monitor follows the account`;
    case 'ok':
      return `@${username} is available`;
  }
}

function profileEvents(watchers: WatcherRow[], o: Observation, last: Profile, at: Date): LookEvent[] {
  const after = o.profile;
  if (!after || o.changed.length === 0) return [];
  const fields = (p: Profile) => ({
    username: p.username,
    name: p.name,
    description: p.description,
    profileImageUrl: p.profileImageUrl,
    verified: p.verified,
  });
  const asked = watchers.filter((m) => (m.events ?? ['posts']).includes('profile'));
  return asked.map((m) => ({
    monitorId: m.id,
    accountId: m.account_id,
    payload: {
      event: 'monitor.profile_changed',
      monitor: monitorRef({ id: m.id, targetUsername: m.target_username, keywords: m.keywords }),
      userId: after.userId,
      changed: o.changed,
      before: fields(last),
      after: fields(after),
      detectedAt: at.toISOString(),
    },
  }));
}

const localSighting: SightingReader = async (tx, targetKey, userId) => {
  const user = await readUser(tx, targetKey, userId);
  return user ? { profile: toProfile(user), state: user.status } : null;
};

type Gate = Pick<TargetFlapGate, 'judge'> | undefined;

async function lookIn(tx: Tx, targetKey: string, at: Date, read: SightingReader, gate: Gate): Promise<ProfileLook> {
  await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext('sts:profile:' || ${targetKey}))`;
  const [snap] = await tx.$queryRaw<SnapshotRow[]>`
    SELECT user_id, username, name, description, profile_image_url, verified, status
    FROM target_profiles WHERE target_key = ${targetKey}`;
  const last = snapshotProfile(snap);
  const o = observe(targetKey, last, await read(tx, targetKey, last?.userId ?? null));
  const previousStatus = snap?.status ?? 'ok';
  if (gate && (await gate.judge(tx, targetKey, previousStatus, o.status, at)) === 'hold') {
    await tx.$executeRaw`UPDATE target_profiles SET checked_at = ${at} WHERE target_key = ${targetKey}`;
    return { ...o, status: previousStatus, changed: [], renamedTo: null, targetKey, previousStatus, events: 0 };
  }
  const [named] = await tx.$queryRaw<{ target_username: string }[]>`
    SELECT target_username FROM monitors WHERE target_key = ${targetKey} LIMIT 1`;
  const previousName = last?.username ?? named?.target_username ?? targetKey;
  // only a known account (by id) is followed; a name now held by another account is just that account
  const key = o.renamedTo && last ? await follow(tx, targetKey, o.renamedTo) : targetKey;
  const changedStatus = o.status !== previousStatus;
  await saveSnapshot(tx, key, o, changedStatus, at);
  const watchers = await tx.$queryRaw<WatcherRow[]>`
    SELECT id::text AS id, account_id::text AS account_id, target_username, keywords, events
    FROM monitors WHERE target_key = ${key} AND is_active`;
  const events = last ? profileEvents(watchers, o, last, at) : [];
  if (changedStatus)
    events.push(...(await statusChanged(tx, key, watchers, o, { status: previousStatus, username: previousName }, at)));
  await writeMonitorEvents(tx, events);
  return { ...o, targetKey: key, previousStatus, events: events.length };
}

/** `gate`: the flap rule's hook (none: every change is marked at once) */
export function createProfileRepository(db: Db, gate?: Pick<TargetFlapGate, 'judge'>): ProfileRepository {
  return {
    look: (targetKey, detectedAt) => db.$transaction((tx) => lookIn(tx, targetKey, detectedAt, localSighting, gate)),
    record: (targetKey, sighting, detectedAt) =>
      db.$transaction((tx) => lookIn(tx, targetKey, detectedAt, () => Promise.resolve(sighting), gate)),
    lookupTargets: () => lookupTargets(db),
    lastLooks: (targetKeys) => lastLooks(db, targetKeys),
  };
}
