/**
 * A timer abstraction beside the Clock, so code that waits (backoff, token buckets,
 * deadlines) can be driven by tests without real time passing.
 */
export interface Timers {
  /** Calls `fn` once after `ms` milliseconds; returns a handle for `clear`. */
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export const systemTimers: Timers = {
  set(fn, ms) {
    const handle = setTimeout(fn, Math.max(0, ms));
    // A pending retry or token refill must not keep a finished process alive.
    handle.unref?.();
    return handle;
  },
  clear(handle) {
    clearTimeout(handle as ReturnType<typeof setTimeout>);
  },
};
