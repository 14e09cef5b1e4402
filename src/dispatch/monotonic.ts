/**
 * A clock that never goes back: epoch milliseconds read once, then moved on by
 * `performance.now()`. Deadlines stay comparable with epoch times, while a wall-clock
 * step (NTP, a VM resumed) cannot make an attempt timeout, a backoff or a fence margin
 * longer or shorter than it is.
 */
import type { Clock } from '../lib/clock.ts';

export function monotonicClock(
  now: () => number = () => performance.now(),
  epochAtStart: number = Date.now(),
): Clock {
  const start = now();
  return { now: () => epochAtStart + (now() - start) };
}
