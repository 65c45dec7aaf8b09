export { dashboardService } from './main';
export { createApp, type AppOptions } from './app';
export { parseDashboardEnv, dashboardEnvSchema, type DashboardEnv } from './env';
