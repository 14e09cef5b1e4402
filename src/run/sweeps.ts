/**
 * Part 7 of `tollgate run`: cron sweeps. They only trigger work the loops, the policy
 * source and the audit do anyway: an expiry pass, a policy fetch, an audit flush. Their
 * schedules are read in UTC (sweep-schedule.ts).
 */
import { sweepJob } from './sweep-schedule.ts';
import type { RunConfig } from '../cli/run-config.ts';
import type { Logger } from '../observe/log.ts';

export interface SweepTargets {
  /** A gate-release pass, if a loop runs; its failure is logged with the message given. */
  passGateRelease(whatFailed: string): void;
  refreshPolicy(): Promise<void>;
  flushAudit(): Promise<void>;
}

export interface Sweeps {
  stop(): Promise<void>;
}

export function startSweeps(
  schedules: RunConfig['schedules'],
  targets: SweepTargets,
  log: Logger,
): Sweeps {
  const jobs = [
    sweepJob(schedules.expirySweep, () => targets.passGateRelease('expiry sweep pass failed')),
    sweepJob(schedules.policyResync, () =>
      targets
        .refreshPolicy()
        .catch((error: unknown) => log.warn({ err: error }, 'policy resync failed')),
    ),
    sweepJob(schedules.auditFlush, () =>
      targets
        .flushAudit()
        .catch((error: unknown) => log.warn({ err: error }, 'audit flush failed')),
    ),
  ];
  return {
    // The timers stop at once; a tick already running is not waited for: its work
    // belongs to the policy source and the audit writer, stopped later in the shutdown
    // order (the audit's final flush is bounded). Waiting here held the shutdown before
    // the loops stop, and they went on deciding and releasing pods meanwhile.
    stop: () => {
      for (const job of jobs) void job.stop();
      return Promise.resolve();
    },
  };
}
