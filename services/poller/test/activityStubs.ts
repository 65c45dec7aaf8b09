/**
 * The ActivityIntake's collaborators as stubs, for the tests that drive the intake without a
 * database: an election this replica always holds, a reconciler that pushes every account it is
 * given, metrics that record nothing, and a repository watching `watched` that remembers nothing
 * unless a test gives its own methods.
 */
import type { WatchedAccount } from '@sts/x-activity';
import type { ActivityIntakeOptions } from '../src/intake/activity/intake';
import type { ActivityMetrics } from '../src/intake/activity/metrics';
import type { ActivityRepository } from '../src/intake/activity/repository';

const silentMetrics: ActivityMetrics = {
  connected: () => undefined,
  state: () => undefined,
  refused: () => undefined,
  event: () => undefined,
  gap: () => undefined,
};

type Stubbed = Pick<ActivityIntakeOptions, 'mode' | 'election' | 'reconciler' | 'repository' | 'metrics'>;

/** X_INTAKE_ACTIVITY=profiles with the stubs; `repository` replaces the stub's methods it names */
export function activityStubs(
  watched: readonly WatchedAccount[],
  repository: Partial<ActivityRepository> = {},
): Stubbed {
  return {
    mode: 'profiles',
    election: { check: () => Promise.resolve(true), holds: () => true, close: () => Promise.resolve() },
    reconciler: {
      reconcile: (accounts) =>
        Promise.resolve({
          active: [],
          pushed: [...accounts],
          polled: [],
          refusedNow: [],
          complete: true,
          created: 0,
          removed: 0,
        }),
    },
    repository: {
      watched: () => Promise.resolve([...watched]),
      savePushed: () => Promise.resolve(),
      lastProfile: () => Promise.resolve(null),
      owe: () => Promise.resolve(),
      recordedTo: () => Promise.resolve(null),
      saveRecordedTo: () => Promise.resolve(),
      ...repository,
    },
    metrics: silentMetrics,
  };
}
