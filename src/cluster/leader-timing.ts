/**
 * The pure timing rules of leader election, kept apart from the API calls so they can be
 * tested without a cluster. The model is client-go's leaderelection package, with two
 * changes that tollgate needs because it fences its writes:
 *
 * - The fence closes a renew deadline after the START of the last successful renewal,
 *   not after its response. Another candidate measures expiry from the moment it SAW that
 *   renewal, which is after the renewal was committed, which is after it was sent. So
 *   `renewStartedAt + renewDeadline < observedAt + leaseDuration` always holds, with
 *   `leaseDuration - renewDeadline` as margin for clock-rate drift and slow requests: a
 *   former leader stops writing strictly before anyone else may start.
 * - A waiting candidate wakes up exactly when the lease it observed expires instead of
 *   on its next blind poll, so a takeover happens within `leaseDuration + retryPeriod` of
 *   the holder's last renewal being observed (client-go can take up to a jittered
 *   2.2 x retryPeriod longer).
 *
 * Expiry is judged on the candidate's own clock (when it observed the record change),
 * never on the holder's `renewTime`, so clock skew between replicas cannot cause two
 * leaders.
 */

export interface LeaderTimings {
  /** How long a candidate waits after last seeing the record change before taking over. */
  readonly leaseDurationMs: number;
  /** How long the leader keeps acting without a successful renewal. */
  readonly renewDeadlineMs: number;
  /** Time between attempts (acquire polls and renewals). */
  readonly retryPeriodMs: number;
}

export const DEFAULT_LEADER_TIMINGS: LeaderTimings = {
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
};

/** The margin client-go requires between the renew deadline and the retry period. */
export const RENEW_DEADLINE_RETRY_FACTOR = 1.2;

/**
 * Every problem with a set of timings, as sentences naming the setting; empty when valid.
 * The lease duration is stored in the Lease as whole seconds, so it must be whole seconds.
 */
export function leaderTimingProblems(timings: LeaderTimings): string[] {
  const problems: string[] = [];
  const { leaseDurationMs, renewDeadlineMs, retryPeriodMs } = timings;
  for (const [name, value] of Object.entries(timings)) {
    if (!Number.isFinite(value) || value <= 0)
      problems.push(`${name} must be a positive duration, got ${value}`);
  }
  if (problems.length > 0) return problems;
  if (leaseDurationMs % 1000 !== 0) {
    problems.push(
      `leaseDuration must be whole seconds (the Lease stores seconds), got ${leaseDurationMs}ms`,
    );
  }
  if (!(leaseDurationMs > renewDeadlineMs)) {
    problems.push(
      `leaseDuration (${leaseDurationMs}ms) must be greater than renewDeadline (${renewDeadlineMs}ms), ` +
        'or a former leader could still write after another replica takes over',
    );
  }
  if (!(renewDeadlineMs > RENEW_DEADLINE_RETRY_FACTOR * retryPeriodMs)) {
    problems.push(
      `renewDeadline (${renewDeadlineMs}ms) must be greater than ${RENEW_DEADLINE_RETRY_FACTOR} x retryPeriod ` +
        `(${retryPeriodMs}ms), or one slow renewal loses leadership`,
    );
  }
  return problems;
}

/** Throws one error listing every problem. */
export function validateLeaderTimings(timings: LeaderTimings): LeaderTimings {
  const problems = leaderTimingProblems(timings);
  if (problems.length > 0)
    throw new Error(`invalid leader election timings: ${problems.join('; ')}`);
  return timings;
}

/** The fields of a Lease that election reads. */
export interface LeaseRecord {
  /** Empty or absent: released. */
  readonly holderIdentity?: string;
  readonly leaseDurationSeconds?: number;
  readonly leaseTransitions?: number;
  readonly resourceVersion: string;
}

/** What one acquire-or-renew attempt should do with the record it read. */
export type LeaseAction =
  | { readonly action: 'create' }
  /** We hold it and our term is still open: update renewTime only. */
  | { readonly action: 'renew' }
  /** Start a new term: holder := us, acquireTime := now, leaseTransitions + 1. */
  | { readonly action: 'takeover'; readonly reason: 'released' | 'expired' | 'own-stale-term' }
  /** Someone else holds an unexpired lease: try again at `retryAt`. */
  | { readonly action: 'wait'; readonly holder: string; readonly expiresAt: number };

export interface AttemptInput {
  readonly record: LeaseRecord | undefined;
  readonly identity: string;
  /** Our own clock. */
  readonly now: number;
  /** When we (on our clock) first saw the current resourceVersion of the record. */
  readonly observedAt: number;
  /** Whether our current term is open (we renewed within the renew deadline). */
  readonly leading: boolean;
  /** Used when the record carries no duration. */
  readonly leaseDurationMs: number;
}

/** When a lease observed at `observedAt` expires for a candidate. */
export function leaseExpiresAt(
  record: LeaseRecord,
  observedAt: number,
  fallbackDurationMs: number,
): number {
  const seconds = record.leaseDurationSeconds;
  const durationMs = seconds != null && seconds > 0 ? seconds * 1000 : fallbackDurationMs;
  return observedAt + durationMs;
}

/**
 * Decides one attempt. A record still naming us while our term is closed (we lost it to
 * a renew deadline, or we restarted under the same identity) starts a NEW term, so the
 * fencing token of every term is unique and a write fenced by an old term never matches
 * a new one.
 */
export function decideLeaseAction(input: AttemptInput): LeaseAction {
  const { record, identity, now, observedAt, leading } = input;
  if (record === undefined) return { action: 'create' };
  const holder = record.holderIdentity ?? '';
  if (holder === identity)
    return leading ? { action: 'renew' } : { action: 'takeover', reason: 'own-stale-term' };
  if (holder === '') return { action: 'takeover', reason: 'released' };
  const expiresAt = leaseExpiresAt(record, observedAt, input.leaseDurationMs);
  if (now >= expiresAt) return { action: 'takeover', reason: 'expired' };
  return { action: 'wait', holder, expiresAt };
}

/**
 * Delay until the next acquire attempt: a retry period, or less when the observed lease
 * expires sooner, so a takeover is not delayed by a whole extra poll.
 */
export function nextAcquireDelay(
  lastAction: LeaseAction | undefined,
  now: number,
  retryPeriodMs: number,
): number {
  if (lastAction?.action === 'wait')
    return Math.max(0, Math.min(retryPeriodMs, lastAction.expiresAt - now));
  return retryPeriodMs;
}

/**
 * Whether a leader may still write. Closed once the renew deadline has passed since the
 * start of the last successful renewal, whatever the renew loop is doing at that moment
 * (it may be stuck in a hung request): the check is against the clock, not a flag the
 * loop must remember to clear.
 */
export function fenceOpen(input: {
  readonly leading: boolean;
  readonly lastRenewStartedAt: number;
  readonly now: number;
  readonly renewDeadlineMs: number;
}): boolean {
  return input.leading && input.now - input.lastRenewStartedAt < input.renewDeadlineMs;
}

/** The token a write decided under one term carries: the holder and the term number. */
export interface FencingToken {
  readonly holder: string;
  readonly leaseTransitions: number;
}

export function formatFencingToken(token: FencingToken): string {
  return `${token.holder}/${token.leaseTransitions}`;
}
