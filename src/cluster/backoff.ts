/**
 * Capped, jittered exponential backoff for restarting list/watch after errors.
 *
 * Why jitter with a floor ("equal jitter"): when the API server goes away, every
 * informer of every tollgate replica fails at the same instant. Full jitter (0..cap)
 * would let some retry almost immediately, over and over; no jitter would make them
 * all return in lock-step. Half fixed plus half random spreads the retries while
 * keeping each informer's rate bounded by `baseMs * 2^attempt / 2`.
 */
export interface BackoffPolicy {
  /** First delay before jitter. */
  readonly baseMs: number;
  /** Ceiling before jitter; the delay never exceeds it. */
  readonly maxMs: number;
}

export const defaultWatchBackoff: BackoffPolicy = { baseMs: 500, maxMs: 30_000 };

/**
 * Delay before retry number `attempt` (0-based). `random` returns [0, 1).
 * Result lies in [cap/2, cap] where cap = min(maxMs, baseMs * 2^attempt).
 */
export function backoffDelay(attempt: number, policy: BackoffPolicy, random: () => number): number {
  if (!Number.isInteger(attempt) || attempt < 0) {
    throw new Error(`backoff attempt must be a non-negative integer, got ${attempt}`);
  }
  // 2^attempt overflows to Infinity for large attempts; Math.min keeps the cap.
  const cap = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(attempt, 64));
  const half = cap / 2;
  return Math.round(half + half * random());
}
