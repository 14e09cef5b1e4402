/**
 * When the dispatcher falls back from its queue to synchronous writes, and when it
 * returns: a small state machine fed with attempt answers and the age of the oldest
 * unsent write, judged on an injected clock. It decides only; the queue acts on its
 * answers (see queue.ts `#degrade` / `#recover`).
 *
 * Enter (any one): the oldest write waited unsent longer than `maxQueueAgeMs`; of the
 * last `windowAttempts` answers at least `maxFailureRatio` failed (retryable errors and
 * timeouts; conflicts and final 4xx are the API answering, not failing); or
 * `maxConsecutiveTimeouts` attempts in a row went unanswered.
 * Leave (all): at least `minDegradedMs` in the fallback, and either `recoverySuccesses`
 * successful answers in a row since the last failure, or nothing to send and no failure
 * for `minDegradedMs` (an idle dispatcher has no answers to judge; a quiet spell does).
 */
import type { FallbackSettings } from './settings.ts';

export type AttemptAnswer = 'ok' | 'failed' | 'timeout';

export type FallbackReason = 'queue_age' | 'failure_ratio' | 'consecutive_timeouts';
export const fallbackReasons: readonly FallbackReason[] = [
  'queue_age',
  'failure_ratio',
  'consecutive_timeouts',
];

export type Transition =
  | { readonly to: 'degraded'; readonly reason: FallbackReason; readonly detail: string }
  | { readonly to: 'healthy'; readonly detail: string };

export class FallbackMonitor {
  readonly #settings: FallbackSettings;
  #window: AttemptAnswer[] = [];
  #consecutiveTimeouts = 0;
  #successesInRow = 0;
  /** When the last failed or unanswered attempt ended, while degraded. */
  #lastFailureAt: number | undefined;
  #degradedSince: number | undefined;

  constructor(settings: FallbackSettings) {
    this.#settings = settings;
  }

  get degraded(): boolean {
    return this.#degradedSince !== undefined;
  }

  /** Records one attempt's answer; returns the transition it causes, if any. */
  answer(answer: AttemptAnswer, now: number): Transition | undefined {
    this.#window.push(answer);
    if (this.#window.length > this.#settings.windowAttempts) this.#window.shift();
    this.#consecutiveTimeouts = answer === 'timeout' ? this.#consecutiveTimeouts + 1 : 0;
    this.#successesInRow = answer === 'ok' ? this.#successesInRow + 1 : 0;
    if (answer !== 'ok' && this.degraded) this.#lastFailureAt = now;
    return this.degraded ? this.#recovery(now, false) : this.#entry(now, 0);
  }

  /** Judges the queue's state now (oldest unsent wait; idle = nothing held). */
  tick(now: number, oldestWaitMs: number, idle: boolean): Transition | undefined {
    return this.degraded ? this.#recovery(now, idle) : this.#entry(now, oldestWaitMs);
  }

  /** When the recovery check should run again, if the monitor waits on time alone. */
  recoveryDueAt(): number | undefined {
    if (this.#degradedSince === undefined) return undefined;
    return Math.max(this.#degradedSince, this.#lastFailureAt ?? 0) + this.#settings.minDegradedMs;
  }

  #entry(now: number, oldestWaitMs: number): Transition | undefined {
    const s = this.#settings;
    if (!s.enabled) return undefined;
    let transition: Transition | undefined;
    if (this.#consecutiveTimeouts >= s.maxConsecutiveTimeouts) {
      transition = {
        to: 'degraded',
        reason: 'consecutive_timeouts',
        detail: `${this.#consecutiveTimeouts} attempts in a row without an answer`,
      };
    } else if (
      this.#window.length >= s.windowAttempts &&
      this.#failureRatio() >= s.maxFailureRatio
    ) {
      transition = {
        to: 'degraded',
        reason: 'failure_ratio',
        detail: `${Math.round(this.#failureRatio() * 100)}% of the last ${this.#window.length} attempts failed`,
      };
    } else if (oldestWaitMs > s.maxQueueAgeMs) {
      transition = {
        to: 'degraded',
        reason: 'queue_age',
        detail: `the oldest queued write waited ${Math.round(oldestWaitMs)} ms (limit ${s.maxQueueAgeMs} ms)`,
      };
    }
    if (transition) {
      this.#degradedSince = now;
      this.#lastFailureAt = undefined;
      this.#successesInRow = 0;
      this.#window = [];
    }
    return transition;
  }

  #recovery(now: number, idle: boolean): Transition | undefined {
    const since = this.#degradedSince;
    if (since === undefined || now - since < this.#settings.minDegradedMs) return undefined;
    const successes = this.#successesInRow >= this.#settings.recoverySuccesses;
    const quiet =
      idle &&
      (this.#lastFailureAt === undefined ||
        now - this.#lastFailureAt >= this.#settings.minDegradedMs);
    if (!successes && !quiet) return undefined;
    this.#degradedSince = undefined;
    this.#consecutiveTimeouts = 0;
    this.#window = [];
    return {
      to: 'healthy',
      detail: successes
        ? `${this.#successesInRow} writes in a row succeeded after ${Math.round(now - since)} ms in the fallback`
        : `no write failed in ${Math.round(now - since)} ms in the fallback`,
    };
  }

  #failureRatio(): number {
    if (this.#window.length === 0) return 0;
    return this.#window.filter((a) => a !== 'ok').length / this.#window.length;
  }
}
