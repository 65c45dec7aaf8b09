/** The name of the poller's direct session (@sts/db DirectSession) in pg_stat_activity (README, "Database connections"). */
export const SESSION_APPLICATION_NAME = 'sts-poller-session';
