/**
 * Test support: the dashboard started in the test's own process, with its ops server; the read-api
 * (child process) and gateway (in process) the browser tests call; Debian's Chromium.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { startInProcess } from '@sts/common';
import { spawnService } from '@sts/testing';
import { gatewayService } from '../../gateway/src/main';
import { dashboardService } from '../src/main';

export interface RunningDashboard {
  port: number;
  opsPort: number;
  stop(): Promise<void>;
}

export async function start(source: NodeJS.ProcessEnv): Promise<RunningDashboard> {
  const s = await startInProcess(dashboardService, source);
  return { port: s.info.port as number, opsPort: s.opsPort, stop: () => s.stop() };
}

const CHROMIUM = '/usr/bin/chromium';

/** launch options for Debian's Chromium (never a downloaded one) */
export function chromiumOptions(): { executablePath: string; headless: true; args: string[] } {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`);
  return {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  };
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch(chromiumOptions());
}

export interface RunningGateway {
  url: string;
  stop(): Promise<void>;
}

/** the read-api as a child process and the gateway in this process in front of it */
export async function startGateway(common: Record<string, string>, internalToken: string): Promise<RunningGateway> {
  const readApi = spawnService('services/read-api/src/main.ts', {
    DATABASE_URL: common.DATABASE_URL ?? '',
    READ_API_PORT: '0',
    READ_API_HOST: '127.0.0.1',
    INTERNAL_TOKEN: internalToken,
    LOG_LEVEL: 'error',
  });
  const readApiPort = (JSON.parse(await readApi.waitForLine(/read-api listening/, 60_000)) as { port: number }).port;
  const gateway = await startInProcess(gatewayService, {
    ...common,
    OPS_PORT: '0',
    GATEWAY_PORT: '0',
    GATEWAY_HOST: '127.0.0.1',
    READ_API_URL: `http://127.0.0.1:${readApiPort}`,
    INTERNAL_TOKEN: internalToken,
    USAGE_FLUSH_MS: '200',
  });
  return {
    url: `http://127.0.0.1:${gateway.info.port as number}`,
    async stop() {
      await gateway.stop().catch(() => undefined);
      readApi.child.kill('SIGTERM');
      await readApi.exited;
    },
  };
}
