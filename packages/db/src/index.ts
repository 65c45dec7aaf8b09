export { createDbClient, sqlPool, type Db, type DbClientOptions, type SqlPool } from './client';
export { applyDatabaseSettingsAt, STATEMENT_TIMEOUT } from './settings';
export { ensureDatabase, loadMigrations, migrate, MigrationError, MIGRATIONS_DIR } from './migrate';
export * from './generated/prisma/client';
export { isDatabaseUnavailable } from './errors';
export { COMMIT_HORIZON } from './horizon';
export {
  HIT_SQL_COLUMNS,
  hitOfSqlRow,
  hitSelect,
  monitorRefFields,
  monitorSettingsSelect,
  QUERY_CURSOR_KEY,
  queryCursorKeyOf,
  WATCHING_MONITOR_COLUMNS,
  withLastCheck,
  type HitRow,
  type HitSqlRow,
  type MonitorRefSqlRow,
  type MonitorSettings,
  type QueryWatcher,
  type WatchingAccount,
  type WatchingMonitor,
} from './rows';
export {
  dateOrNull,
  MONITOR_CONTEXT_SQL,
  monitorContextOf,
  type MonitorContext,
  type MonitorContextRow,
} from './monitorContext';
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
