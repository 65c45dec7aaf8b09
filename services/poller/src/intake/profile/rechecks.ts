/**
 * Suspects looked at again (domain/flap.ts): every `everyMs` the due suspects are claimed
 * (adapters/flap.ts `due`) and handed to the process's looks (the local store's profile watch or
 * X's account lookup), which judge them again. The claim is in PostgreSQL, so a restart loses none.
 */
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import type { TargetFlapGate } from '../../adapters/flap';

/** suspects claimed per round */
const RECHECK_LIMIT = 500;

export interface SuspectRechecks {
  stop(): Promise<void>;
}

export function startSuspectRechecks(o: {
  gate: Pick<TargetFlapGate, 'due'>;
  look: (targetKey: string) => void;
  everyMs: number;
  logger: Logger;
}): SuspectRechecks {
  let running: Promise<void> | null = null;
  const timer = setInterval(() => {
    running ??= o.gate
      .due(RECHECK_LIMIT)
      .then((keys) => keys.forEach(o.look))
      .catch((err: unknown) => {
        o.logger.warn('suspect recheck failed', { err: errorMessage(err) });
      })
      .finally(() => {
        running = null;
      });
  }, o.everyMs);
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
