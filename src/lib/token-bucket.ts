/**
 * A token bucket on an injected clock: `rate` tokens per second, at most `burst` saved.
 * Pure arithmetic (no timers): callers ask `take()` and, when it fails, `waitMs()`
 * tells them when the next token appears.
 */
import type { Clock } from './clock.ts';

export class TokenBucket {
  readonly rate: number;
  readonly burst: number;
  #tokens: number;
  #at: number;
  #clock: Clock;

  constructor(rate: number, burst: number, clock: Clock) {
    if (!(rate > 0)) throw new Error(`token bucket rate must be > 0 per second, got ${rate}`);
    if (!(burst >= 1)) throw new Error(`token bucket burst must be >= 1, got ${burst}`);
    this.rate = rate;
    this.burst = burst;
    this.#tokens = burst;
    this.#clock = clock;
    this.#at = clock.now();
  }

  #refill(): void {
    const now = this.#clock.now();
    // A clock stepping backwards (manual clocks, NTP) must not drain the bucket.
    if (now > this.#at) {
      this.#tokens = Math.min(this.burst, this.#tokens + ((now - this.#at) * this.rate) / 1000);
    }
    this.#at = Math.max(this.#at, now);
  }

  /** Takes one token if there is one. */
  take(): boolean {
    this.#refill();
    if (this.#tokens >= 1) {
      this.#tokens -= 1;
      return true;
    }
    return false;
  }

  /** Milliseconds until one whole token is there (0 when one is). */
  waitMs(): number {
    this.#refill();
    if (this.#tokens >= 1) return 0;
    return Math.ceil(((1 - this.#tokens) * 1000) / this.rate);
  }
}
