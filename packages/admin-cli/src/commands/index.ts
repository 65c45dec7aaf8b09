import type { Command } from '../command';
import { accountCommands } from './accounts';
import { demoCommands } from './demo';
import { dlqCommands } from './dlq';
import { listenCommands } from './listen';
import { maintenanceCommands } from './maintenance';
import { monitorCommands } from './monitors';
import { secretsCommands } from './secrets';
import { socialCommands } from './social';
import { xCommands } from './xCost';

// Each file owns its commands: accounts.ts (account, key, plan, seed), social.ts (social user/tweet),
// monitors.ts (monitor, webhook, deliveries, redeliver), demo.ts (the demo tweet generator),
// dlq.ts (dlq list|replay, queues migrate), listen.ts (listen), secrets.ts (secrets rotate),
// maintenance.ts (maintenance run), xCost.ts (x cost).
export const allCommands: Command[] = [
  ...accountCommands,
  ...socialCommands,
  ...monitorCommands,
  ...demoCommands,
  ...dlqCommands,
  ...listenCommands,
  ...secretsCommands,
  ...maintenanceCommands,
  ...xCommands,
];
