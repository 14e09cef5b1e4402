/**
 * The schedules of `tollgate run`'s cron sweeps (expiry sweep, policy resync, audit
 * flush): read and stepped by the `cron` package, in UTC, with its date library told its
 * locale, so a process that runs them never asks ICU for a date format, the system's time
 * zone or its locale. The package read a schedule without a zone in the system's zone,
 * which it asked ICU for, and its date library asked for the system's locale at every
 * step: that first `Intl.DateTimeFormat` brings ICU's date, calendar and zone data into
 * the process for the rest of its life, 7.3 MiB of resident memory in a `tollgate run` at
 * 0 pods (docs/BENCHMARKS.md). A Schedule condition (decide/schedule.ts) names its own
 * time zone, and a policy that has one pays for that data.
 */
import { createRequire } from 'node:module';
import { CronJob, CronTime } from 'cron';

/** The date library the `cron` package itself loads (its own copy, if it has one). */
const cronLuxon = createRequire(createRequire(import.meta.url).resolve('cron'))('luxon') as {
  Settings: { defaultLocale: string | undefined };
};
// Formats nothing tollgate reads: every sweep time is taken in milliseconds.
cronLuxon.Settings.defaultLocale ??= 'en-US';

/** The sweeps' zone: a fixed offset of 0, which needs no time-zone data. */
const utcOffset = 0;

/** Why a sweep schedule cannot be used (the package's own message), or undefined. */
export function sweepScheduleProblem(expression: string): string | undefined {
  try {
    new CronTime(expression, null, utcOffset);
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/** A started sweep: `onTick` at every time the schedule names, in UTC; one tick at a time. */
export function sweepJob(expression: string, onTick: () => void | Promise<void>): CronJob {
  return CronJob.from({
    cronTime: expression,
    onTick,
    start: true,
    waitForCompletion: true,
    utcOffset,
  });
}
