/**
 * Every knob of the write dispatcher, with its default and its validation in one place,
 * so run configuration, tests and the dispatcher agree. `dispatchSettings(partial)`
 * fills defaults and throws one error listing every invalid field by name and reason
 * (a typo'd or negative value never silently becomes a default).
 */

export interface RetrySettings {
  /** First backoff before jitter. */
  readonly baseMs: number;
  /** Longest backoff. */
  readonly maxMs: number;
  /** Sends of one write in total, the first included. Throttled answers do not count (see queue.ts). */
  readonly maxAttempts: number;
  /** No retry is scheduled later than this after the first send (throttling excepted: its limit is the write's deadline). */
  readonly maxElapsedMs: number;
  /**
   * Sends of one write answered 403, the first included (at most `maxAttempts`): enough
   * to outlast an API server just restarted whose RBAC caches have not synced (the soak
   * saw 403s for up to 0.1 s; 5 attempts at the default backoff span 1.5-3 s), short
   * enough that a permission really missing fails within seconds.
   */
  readonly maxForbiddenAttempts: number;
}

/**
 * When the dispatcher stops queueing and sends synchronously (one write at a time, no
 * backlog), and when it returns. Any one threshold crossed enters the fallback; all of
 * the recovery conditions return to the queue.
 */
export interface FallbackSettings {
  /** Automatic fallback on; the thresholds below are ignored when false. */
  readonly enabled: boolean;
  /** The oldest write that has waited unsent this long. */
  readonly maxQueueAgeMs: number;
  /** Of the last `windowAttempts` answers, this share failed (5xx, 429, timeout, reset)... */
  readonly maxFailureRatio: number;
  /** ...judged once at least this many answers are in the window. */
  readonly windowAttempts: number;
  /** This many attempts in a row without an answer. */
  readonly maxConsecutiveTimeouts: number;
  /** Back to the queue no sooner than this after entering the fallback... */
  readonly minDegradedMs: number;
  /** ...and only after this many successful writes in a row (or none failed while idle). */
  readonly recoverySuccesses: number;
}

export interface DispatchSettings {
  /** `queue`: the bounded priority queue; `sync`: one write at a time, always (the rollout switch). */
  readonly mode: 'queue' | 'sync';
  /** Queued plus in-flight writes at most. */
  readonly capacity: number;
  /** Places of `capacity` only safety writes may take, so a release backlog cannot refuse a rollback. */
  readonly safetyReserve: number;
  /** Writes in flight at once (queue mode). */
  readonly concurrency: number;
  /** Sends per second (token bucket). */
  readonly qps: number;
  /** Sends allowed in a burst. */
  readonly burst: number;
  /** Waiting this long raises a write's effective priority by one (inside its band). */
  readonly agingMs: number;
  readonly retry: RetrySettings;
  /** How long a write may wait in the queue before it is dropped as `expired` (the loops' deadline). */
  readonly writeDeadlineMs: number;
  /** One send is aborted (and read back, then retried) after this long. */
  readonly attemptTimeoutMs: number;
  /**
   * Time between the fence closing and another replica being able to lead (lease
   * duration minus renew deadline). An attempt must end inside it, so
   * `attemptTimeoutMs` must be shorter. 0 = no leader election (no check).
   */
  readonly fenceMarginMs: number;
  readonly fallback: FallbackSettings;
}

export const defaultRetrySettings: RetrySettings = {
  baseMs: 200,
  maxMs: 10_000,
  maxAttempts: 6,
  maxElapsedMs: 60_000,
  maxForbiddenAttempts: 5,
};

/**
 * Off unless configured: the fallback cancels queued writes on entry, which an embedding
 * that does not decide again (a test harness, a one-shot tool) would not want.
 * `tollgate run` turns it on through its run configuration.
 */
export const defaultFallbackSettings: FallbackSettings = {
  enabled: false,
  maxQueueAgeMs: 300_000,
  maxFailureRatio: 0.5,
  windowAttempts: 20,
  maxConsecutiveTimeouts: 5,
  minDegradedMs: 30_000,
  recoverySuccesses: 10,
};

export const defaultDispatchSettings: DispatchSettings = {
  mode: 'queue',
  capacity: 1000,
  safetyReserve: 64,
  concurrency: 4,
  qps: 20,
  burst: 40,
  agingMs: 5_000,
  retry: defaultRetrySettings,
  writeDeadlineMs: 60_000,
  attemptTimeoutMs: 4_000,
  fenceMarginMs: 0,
  fallback: defaultFallbackSettings,
};

export type DispatchSettingsInput = Partial<
  Omit<DispatchSettings, 'retry' | 'fallback' | 'safetyReserve' | 'burst'>
> & {
  readonly retry?: Partial<RetrySettings>;
  readonly fallback?: Partial<FallbackSettings>;
  /** Default: min(64, capacity / 10). */
  readonly safetyReserve?: number;
  /** Default: 2 * qps. */
  readonly burst?: number;
};

type Rule = 'positive' | 'positiveInteger' | 'nonNegative' | 'nonNegativeInteger' | 'ratio';

function check(errors: string[], field: string, value: unknown, rule: Rule): void {
  const ok =
    typeof value === 'number' &&
    Number.isFinite(value) &&
    (rule === 'positive'
      ? value > 0
      : rule === 'positiveInteger'
        ? Number.isInteger(value) && value > 0
        : rule === 'nonNegative'
          ? value >= 0
          : rule === 'nonNegativeInteger'
            ? Number.isInteger(value) && value >= 0
            : value > 0 && value <= 1);
  if (ok) return;
  const wanted = {
    positive: 'a number above 0',
    positiveInteger: 'an integer above 0',
    nonNegative: 'a number of 0 or more',
    nonNegativeInteger: 'an integer of 0 or more',
    ratio: 'a number above 0 and at most 1',
  }[rule];
  errors.push(`${field}: must be ${wanted}, got ${JSON.stringify(value)}`);
}

/** Defaults filled in and every field checked; throws naming each invalid field and why. */
export function dispatchSettings(input: DispatchSettingsInput = {}): DispatchSettings {
  const capacity = input.capacity ?? defaultDispatchSettings.capacity;
  const qps = input.qps ?? defaultDispatchSettings.qps;
  const settings: DispatchSettings = {
    ...defaultDispatchSettings,
    ...input,
    safetyReserve:
      input.safetyReserve ??
      Math.min(defaultDispatchSettings.safetyReserve, Math.floor(capacity / 10)),
    burst: input.burst ?? Math.max(1, Math.ceil(qps * 2)),
    retry: { ...defaultRetrySettings, ...input.retry },
    fallback: { ...defaultFallbackSettings, ...input.fallback },
  };
  const errors: string[] = [];
  if (settings.mode !== 'queue' && settings.mode !== 'sync')
    errors.push(`mode: must be "queue" or "sync", got ${JSON.stringify(settings.mode)}`);
  check(errors, 'capacity', settings.capacity, 'positiveInteger');
  check(errors, 'safetyReserve', settings.safetyReserve, 'nonNegativeInteger');
  if (settings.safetyReserve >= settings.capacity)
    errors.push(
      `safetyReserve: must be below capacity (${settings.capacity}), got ${settings.safetyReserve}`,
    );
  check(errors, 'concurrency', settings.concurrency, 'positiveInteger');
  check(errors, 'qps', settings.qps, 'positive');
  check(errors, 'burst', settings.burst, 'positive');
  check(errors, 'agingMs', settings.agingMs, 'positive');
  check(errors, 'retry.baseMs', settings.retry.baseMs, 'positive');
  check(errors, 'retry.maxMs', settings.retry.maxMs, 'positive');
  check(errors, 'retry.maxAttempts', settings.retry.maxAttempts, 'positiveInteger');
  check(errors, 'retry.maxElapsedMs', settings.retry.maxElapsedMs, 'positive');
  check(
    errors,
    'retry.maxForbiddenAttempts',
    settings.retry.maxForbiddenAttempts,
    'positiveInteger',
  );
  if (settings.retry.maxMs < settings.retry.baseMs)
    errors.push(
      `retry.maxMs: must be at least retry.baseMs (${settings.retry.baseMs}), got ${settings.retry.maxMs}`,
    );
  check(errors, 'writeDeadlineMs', settings.writeDeadlineMs, 'positive');
  check(errors, 'attemptTimeoutMs', settings.attemptTimeoutMs, 'positive');
  check(errors, 'fenceMarginMs', settings.fenceMarginMs, 'nonNegative');
  if (settings.fenceMarginMs > 0 && settings.attemptTimeoutMs >= settings.fenceMarginMs)
    errors.push(
      `attemptTimeoutMs: must be shorter than the fence margin (lease duration - renew deadline = ${settings.fenceMarginMs} ms), got ${settings.attemptTimeoutMs}: a write sent just before the fence closes could land while the next leader writes`,
    );
  const fallback = settings.fallback;
  check(errors, 'fallback.maxQueueAgeMs', fallback.maxQueueAgeMs, 'positive');
  check(errors, 'fallback.maxFailureRatio', fallback.maxFailureRatio, 'ratio');
  check(errors, 'fallback.windowAttempts', fallback.windowAttempts, 'positiveInteger');
  check(
    errors,
    'fallback.maxConsecutiveTimeouts',
    fallback.maxConsecutiveTimeouts,
    'positiveInteger',
  );
  check(errors, 'fallback.minDegradedMs', fallback.minDegradedMs, 'nonNegative');
  check(errors, 'fallback.recoverySuccesses', fallback.recoverySuccesses, 'positiveInteger');
  if (typeof fallback.enabled !== 'boolean')
    errors.push(`fallback.enabled: must be true or false, got ${JSON.stringify(fallback.enabled)}`);
  if (errors.length > 0) throw new Error(`invalid dispatcher settings:\n  ${errors.join('\n  ')}`);
  return settings;
}
