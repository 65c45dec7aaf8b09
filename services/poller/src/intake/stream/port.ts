/**
 * The poller's side of the X stream (@sts/x-stream): the `StreamPort` it hands the stream mode
 * (posts recorded through the poller's one recording path, its query monitors, its account looks)
 * and the tick's `selectDue` in stream mode.
 */
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import { inStream, type StreamPort } from '@sts/x-stream';
import type { HitWriter } from '../../adapters/hitWriter';
import type { ProfileRepository } from '../../adapters/profiles';
import type { ScheduleStore } from '../../adapters/scheduleStore';
import type { TargetState } from '../../domain/schedule';
import { recordPosts } from '../../record/posts';
import { recordQueryTweets } from '../../record/queryRecord';
import { recordLooks } from '../profile/xLookup';

export function createStreamPort(deps: {
  schedule: ScheduleStore;
  writer: HitWriter;
  profiles: ProfileRepository;
  logger: Logger;
}): StreamPort {
  const { schedule, writer, profiles, logger } = deps;
  return {
    recordPosts: (posts, lane) => recordPosts({ schedule, writer }, posts, lane),
    // null position: the stream leaves the monitor's search position alone
    recordQueryPosts: (monitor, posts, polledAt) => recordQueryTweets(writer, monitor, posts, null, polledAt),
    queryWatchers: () => schedule.queryWatchers(),
    lastLooks: (targetKeys) => profiles.lastLooks(targetKeys),
    recordLooks: (targets, found, at) => recordLooks({ repository: profiles, logger }, targets, found, at),
  };
}

/**
 * The tick's `selectDue` in stream mode: while a stream is alive somewhere in the fleet
 * (`covers()`), it polls the Free-only targets and leaves the streamed ones (a Starter or trial
 * watcher) to the holder, pushing their schedule one `intervalSec` on so the tick does not read
 * them again every second; with no stream alive it polls every due target (batched search), so
 * a stream outage never leaves Starter targets unpolled.
 */
export function streamSelectDue(
  schedule: Pick<ScheduleStore, 'reschedule'>,
  intervalSec: number,
  logger: Logger,
  covers: () => boolean,
): (due: TargetState[], now: Date) => TargetState[] {
  return (due, now) => {
    if (!covers()) return due;
    const streamed = due.filter((t) => inStream(t.accounts, now));
    if (streamed.length > 0) {
      const nextDueAt = new Date(now.getTime() + intervalSec * 1000);
      schedule
        .reschedule(streamed.map((t) => ({ targetKey: t.targetKey, nextDueAt, pushed: true, readAt: now })))
        .catch((err: unknown) =>
          logger.warn('could not reschedule streamed targets', {
            err: errorMessage(err),
          }),
        );
    }
    return due.filter((t) => !inStream(t.accounts, now));
  };
}
