/**
 * The `Schedule` condition: a pod is released only inside one of its policy's windows.
 * A window is a cron expression read in a time zone: `* 1-4 * * *` in Europe/Berlin is
 * "every minute from 01:00 to 04:59 Berlin time", i.e. between 01:00 and 05:00. The
 * expression is parsed and stepped by the `cron` package (CronTime), never by hand, so
 * daylight-saving changes are the package's: on the night clocks jump forward, a window
 * over the missing hour is shorter; on the night they fall back, the repeated hour is in
 * the window twice.
 *
 * Inside a window = the current minute (second, for a six-field expression) is one the
 * expression matches. Pure: `now` is passed in.
 */
import { CronTime } from 'cron';
import type { ConditionInput } from './decision.ts';

export interface ScheduleWindow {
  /** Five fields (minute hour day month weekday), or six with seconds first. */
  readonly cron: string;
  /** IANA time zone, e.g. Europe/Berlin. */
  readonly timeZone: string;
}

/** Parses a window; throws the package's own error for a bad expression or zone. */
function cronTimeOf(window: ScheduleWindow): CronTime {
  return new CronTime(window.cron, window.timeZone);
}

/** Why a window cannot be used (for compile-time checks), or undefined. */
export function scheduleWindowProblem(window: ScheduleWindow): string | undefined {
  try {
    cronTimeOf(window);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

/** The expression's resolution: a six-field one names seconds. */
function stepMs(window: ScheduleWindow): number {
  return window.cron.trim().split(/\s+/).length === 6 ? 1000 : 60_000;
}

/** The next moment after `from` (epoch ms) the expression matches. */
function nextMatch(window: ScheduleWindow, from: number): number {
  return cronTimeOf(window).getNextDateFrom(new Date(from), window.timeZone).toMillis();
}

/** Whether `now` falls in a minute (or second) the window's expression matches. */
export function insideWindow(window: ScheduleWindow, now: number): boolean {
  const step = stepMs(window);
  const slot = now - (((now % step) + step) % step);
  return nextMatch(window, slot - 1) === slot;
}

/** When the first of the windows next opens after `now` (epoch ms). */
export function nextWindowOpening(windows: readonly ScheduleWindow[], now: number): number {
  return Math.min(...windows.map((w) => nextMatch(w, now)));
}

/** The Schedule condition judged at `now`: met inside any window; else when the next opens. */
export function evaluateSchedule(windows: readonly ScheduleWindow[], now: number): ConditionInput {
  const open = windows.find((w) => insideWindow(w, now));
  if (open)
    return {
      condition: 'Schedule',
      met: true,
      value: { window: open.cron, timeZone: open.timeZone },
    };
  const opensAt = new Date(nextWindowOpening(windows, now)).toISOString();
  return { condition: 'Schedule', met: false, value: { opensAt, windows } };
}

/** When a Schedule input that is not met says its next window opens (epoch ms), if any. */
export function scheduleOpensAt(inputs: readonly ConditionInput[]): number | undefined {
  const schedule = inputs.find((i) => i.condition === 'Schedule' && !i.met);
  const opensAt = (schedule?.value as { opensAt?: string } | undefined)?.opensAt;
  return opensAt === undefined ? undefined : Date.parse(opensAt);
}
