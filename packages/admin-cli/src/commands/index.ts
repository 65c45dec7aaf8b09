import type { Command } from '../command';
import { accountCommands } from './accounts';
import { demoCommands } from './demo';
import { dlqCommands } from './dlq';
import { listenCommands } from './listen';
import { maintenanceCommands } from './maintenance';
import { monitorCommands } from './monitors';
import { secretsCommands } from './secrets';
import { socialCommands } from './social';

// Each file owns its commands: accounts.ts (account, key, plan, seed), social.ts (social user/tweet),
// monitors.ts (monitor, webhook, deliveries, redeliver), demo.ts (the demo tweet generator),
// dlq.ts (dlq list|replay, queues migrate), listen.ts (listen), secrets.ts (secrets rotate),
// maintenance.ts (maintenance run).
export const allCommands: Command[] = [
  ...accountCommands,
  ...socialCommands,
  ...monitorCommands,
  ...demoCommands,
  ...dlqCommands,
  ...listenCommands,
  ...secretsCommands,
  ...maintenanceCommands,
];
