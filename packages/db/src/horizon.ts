import { Prisma } from './generated/prisma/client';

/**
 * The commit horizon of this database, an xid8: the oldest transaction this statement's snapshot
 * cannot see that may have written to this database (its snapshot's xmax when there is none).
 * Every row written by a transaction below it is either visible to the statement or never will be
 * (rolled back), so a reader in (xid, id) order that stays below the horizon never passes a row
 * that can still appear. Like pg_snapshot_xmin(pg_current_snapshot()) but ignoring transactions
 * still open in OTHER databases of the cluster (they cannot write here): an in-progress xid counts
 * unless the activity view shows it running in another database; one that ended meanwhile, or
 * that the view does not show (prepared, no permission), counts.
 */
export const COMMIT_HORIZON = Prisma.sql`(
  SELECT coalesce(min(x.xid), min(pg_snapshot_xmax(s.snap)))
  FROM (SELECT pg_current_snapshot() AS snap) s
  LEFT JOIN LATERAL pg_snapshot_xip(s.snap) AS x(xid) ON NOT EXISTS (
    SELECT 1 FROM pg_stat_get_activity(NULL) a
    WHERE a.backend_xid = x.xid::xid
      AND a.datid <> (SELECT own.datid FROM pg_stat_get_activity(pg_backend_pid()) own)))`;
