/**
 * How close together gate-release passes may run. A pass is synchronous: while it plans,
 * nothing else in the process runs (the audit writer's push, lease renewals, the watch).
 * After a pass that took P ms the next starts no sooner than P * (1 / share - 1) ms after
 * it ended, so passes take at most `share` of the event loop; the spacing never exceeds
 * `maxPassSpacingMs`, however slow a pass was.
 */

/**
 * Passes take at most half the event loop unless told otherwise; the other half stays
 * for the audit writer, the dispatcher's responses and the watch. Ten changes a second at
 * 10,000 watched pods (a pass of 25-40 ms each) are then served one pass each, after the
 * debounce; at a quarter of the loop the passes fell behind such a stream and a change
 * waited up to three passes' time more (docs/BENCHMARKS.md, "Half the event loop").
 */
export const defaultPassShare = 0.5;

/** `share` when it is a share of the event loop, in (0, 1]; else an error naming `what`. */
export function checkedPassShare(share: number, what: string): number {
  if (!(share > 0 && share <= 1)) throw new Error(`${what} must be in (0, 1], got ${share}`);
  return share;
}

/** Spacing between passes never exceeds this, however slow a pass was. */
export const maxPassSpacingMs = 1_000;

/** The wait after a pass of `lastPassMs` so that passes take at most `share` of the time. */
export function passSpacingMs(lastPassMs: number, share: number): number {
  return Math.min(maxPassSpacingMs, Math.max(0, lastPassMs) * (1 / share - 1));
}

/** The soonest a pass may start after the last one ended at `lastPassEnd` (clock ms). */
export function earliestPassAt(lastPassEnd: number, lastPassMs: number, share: number): number {
  return lastPassEnd + passSpacingMs(lastPassMs, share);
}
