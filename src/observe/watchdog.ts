/**
 * Wedged-loop detection for /healthz and /readyz. A loop marks each pass's start and end;
 * a pass that has run longer than its limit is wedged (waiting on something that will not
 * come: a cache that never syncs, a queue that never drains, a stopped informer). A
 * wedged loop makes /healthz fail, so the kubelet restarts the replica (and the lease goes
 * to the standby), and /readyz names the loop and for how long, so the operator sees why.
 *
 * Pure bookkeeping on an injected clock: no timers of its own.
 */
import type { Clock } from '../lib/clock.ts';

export interface WatchdogOptions {
  readonly clock: Clock;
  /** A pass running longer than this is wedged (default 5 minutes). */
  readonly maxPassMs?: number;
}

export class PassWatchdog {
  readonly #clock: Clock;
  readonly #maxPassMs: number;
  /** loop -> clock time its current pass began (absent: idle). */
  readonly #running = new Map<string, number>();

  constructor(options: WatchdogOptions) {
    this.#clock = options.clock;
    this.#maxPassMs = options.maxPassMs ?? 300_000;
  }

  /** Marks a pass of `loop` as started; returns the function that marks it ended (idempotent). */
  begin(loop: string): () => void {
    const startedAt = this.#clock.now();
    this.#running.set(loop, startedAt);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      if (this.#running.get(loop) === startedAt) this.#running.delete(loop);
    };
  }

  /** Runs `pass` as one pass of `loop`, ended however it settles. */
  async watch<T>(loop: string, pass: () => Promise<T>): Promise<T> {
    const end = this.begin(loop);
    try {
      return await pass();
    } finally {
      end();
    }
  }

  /** Undefined when no pass is over its limit; else which loops are wedged and for how long. */
  wedged(): string | undefined {
    const now = this.#clock.now();
    const over = [...this.#running]
      .filter(([, startedAt]) => now - startedAt > this.#maxPassMs)
      .map(
        ([loop, startedAt]) =>
          `${loop} pass running for ${Math.round((now - startedAt) / 1000)}s (limit ${Math.round(this.#maxPassMs / 1000)}s)`,
      );
    return over.length === 0 ? undefined : `wedged: ${over.join('; ')}`;
  }
}
