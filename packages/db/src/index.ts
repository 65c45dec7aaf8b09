export { createDbClient, sqlPool, type Db, type DbClientOptions, type SqlPool } from './client';
export { applyDatabaseSettingsAt, STATEMENT_TIMEOUT } from './settings';
export { ensureDatabase, loadMigrations, migrate, MigrationError, MIGRATIONS_DIR } from './migrate';
export * from './generated/prisma/client';
export { isDatabaseUnavailable } from './errors';
export { COMMIT_HORIZON } from './horizon';
export {
  hitSelect,
  monitorSettingsSelect,
  QUERY_CURSOR_KEY,
  queryCursorKeyOf,
  withLastCheck,
  type HitRow,
  type HitSqlRow,
  type MonitorSettings,
  type QueryWatcher,
  type WatchingAccount,
  type WatchingMonitor,
} from './rows';
export { migrationsCheck, pendingMigrations } from './pending';
export {
  DEFAULT_RETENTION,
  runMaintenance,
  weekStart,
  type MaintenanceReport,
  type RetentionPolicy,
} from './maintenance';
export {
  COVERAGE_GAP_DAYS,
  GAPS_MAX,
  readMonitorCoverage,
  type CoverageGap,
  type CoverageGapReason,
  type LatencyStats,
  type MonitorCoverage,
} from './coverage';
export { DirectSession, subscribe, type Subscriber, type Subscription } from './directSession';
