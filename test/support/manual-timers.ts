/**
 * Timers and a clock that tests move by hand (the `Timers` of src/lib/timers.ts).
 * `advance(ms)` moves the clock forward, firing every timer that falls due in time
 * order (the clock reads each timer's due time while it runs), and lets promise
 * callbacks settle after each one, so async work started by a timer completes before
 * the next timer fires.
 */
import { ManualClock } from '../../src/lib/clock.ts';
import type { Timers } from '../../src/lib/timers.ts';

/** Lets pending promise callbacks and I/O callbacks run. */
export async function settle(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i += 1) await new Promise<void>((resolve) => setImmediate(resolve));
}

export class ManualTimers implements Timers {
  readonly clock: ManualClock;
  #pending = new Map<number, { fn: () => void; due: number }>();
  #next = 1;

  constructor(clock = new ManualClock()) {
    this.clock = clock;
  }

  set(fn: () => void, ms: number): unknown {
    const id = this.#next++;
    this.#pending.set(id, { fn, due: this.clock.now() + Math.max(0, ms) });
    return id;
  }

  clear(handle: unknown): void {
    this.#pending.delete(handle as number);
  }

  /** Delays (from now) of the timers still pending, soonest first. */
  get pending(): number[] {
    const now = this.clock.now();
    return [...this.#pending.values()].map((t) => t.due - now).sort((a, b) => a - b);
  }

  async advance(ms: number): Promise<void> {
    const end = this.clock.now() + ms;
    for (;;) {
      let soonest: [number, { fn: () => void; due: number }] | undefined;
      for (const entry of this.#pending) {
        if (entry[1].due <= end && (!soonest || entry[1].due < soonest[1].due)) soonest = entry;
      }
      if (!soonest) break;
      this.#pending.delete(soonest[0]);
      if (soonest[1].due > this.clock.now()) this.clock.set(soonest[1].due);
      soonest[1].fn();
      await settle();
    }
    this.clock.set(end);
    await settle();
  }
}
