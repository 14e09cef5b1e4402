/**
 * Gives back the memory a burst of garbage grew the heap by. An audit fetch inflates
 * every object of the pack it receives (thousands of small buffers and objects), a
 * relist parses every pod again: V8 grows its heap for the burst and, after an ordinary
 * collection, keeps the freed pages resident, pooled for reuse. Only a memory-reducing
 * collection returns them, and V8 starts one of its own only when the process goes idle,
 * which a controller under load never does: the RSS of `tollgate run` rose in steps at
 * each burst and stayed there (docs/soak.md, memory). Measured on six fetches of 300
 * audit commits each: 78 MiB of such pages, 179 -> 103 MiB RSS after one collection of
 * 20-50 ms.
 *
 * So `tollgate run` reads its RSS every `everyMs`; when it grew by `growthBytes` since the
 * last look that collected (or since the start), it runs one memory-reducing collection
 * and takes the RSS after it as the new base. A steady process never collects; a burst
 * costs one collection, not one per check.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Timers } from './timers.ts';

/** Whether RSS grew enough above the base to collect now. */
export function shouldReduce(rss: number, base: number, growthBytes: number): boolean {
  return rss - base >= growthBytes;
}

export interface MemoryReducerOptions {
  readonly timers: Timers;
  /** The process's resident set, in bytes. */
  readonly rss: () => number;
  /** One memory-reducing collection (synchronous). */
  readonly collect: () => void;
  readonly everyMs?: number;
  readonly growthBytes?: number;
  /** Told after each collection: RSS before and after, and how long it took. */
  readonly onCollected?: (report: { before: number; after: number; ms: number }) => void;
  /**
   * Told once when RSS cannot be read (a container without /proc: Node reads it from
   * /proc/self/stat); the reducer then stops for good. It never takes the process down.
   */
  readonly onUnavailable?: (error: Error) => void;
  readonly now?: () => number;
}

export class MemoryReducer {
  readonly #options: MemoryReducerOptions;
  readonly #everyMs: number;
  readonly #growthBytes: number;
  #base: number;
  #timer: unknown;
  #stopped = false;
  #unavailable = false;

  constructor(options: MemoryReducerOptions) {
    this.#options = options;
    this.#everyMs = options.everyMs ?? 60_000;
    this.#growthBytes = options.growthBytes ?? 16 * 1024 * 1024;
    this.#base = this.#rss() ?? 0;
  }

  /** The RSS, or undefined once it could not be read (then the reducer is off for good). */
  #rss(): number | undefined {
    if (this.#unavailable) return undefined;
    try {
      return this.#options.rss();
    } catch (error) {
      this.#unavailable = true;
      this.stop();
      this.#options.onUnavailable?.(error instanceof Error ? error : new Error(String(error)));
      return undefined;
    }
  }

  start(): void {
    if (this.#unavailable) return;
    this.#stopped = false;
    this.#arm();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) this.#options.timers.clear(this.#timer);
    this.#timer = undefined;
  }

  /** One look: collects when RSS grew by `growthBytes` since the base; true if it did. */
  check(): boolean {
    const before = this.#rss();
    if (before === undefined) return false;
    // A process that shrank by itself lowers the base: growth is counted from there.
    if (before < this.#base) this.#base = before;
    if (!shouldReduce(before, this.#base, this.#growthBytes)) return false;
    const now = this.#options.now ?? (() => performance.now());
    const began = now();
    this.#options.collect();
    const after = this.#rss() ?? before;
    this.#base = after;
    this.#options.onCollected?.({ before, after, ms: now() - began });
    return true;
  }

  #arm(): void {
    if (this.#stopped) return;
    this.#timer = this.#options.timers.set(() => {
      this.#timer = undefined;
      this.check();
      this.#arm();
    }, this.#everyMs);
  }
}

/**
 * A memory-reducing collection of this process (V8's last-resort collection: full
 * collections until nothing more is freed, pooled pages released). The collector's
 * function is taken from a fresh context after `--expose-gc` is set, so it is not put
 * on this process's global object.
 */
export function memoryReducingCollection(): () => void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (options: object) => void;
  return () => gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}
