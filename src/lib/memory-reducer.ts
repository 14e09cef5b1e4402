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
 * So `tollgate run` reads its RSS every `everyMs` (10 s); when it grew by `growthBytes`
 * since the last look that collected (or since the start), it runs one memory-reducing
 * collection and takes the RSS after it as the new base: at the first look that finds the
 * process quiet (its event loop busy less than `quietBelow` of the time since the last
 * look), or, while it stays busy, once `busyEveryMs` (a minute) passed since the last
 * collection, so a collection of 100 ms or so at 10,000 pods never lands in a wave more
 * than once a minute. A process that has not collected yet has no minute to wait: its
 * start (every pod listed, a term's audit trail fetched, the first passes) is the
 * largest burst of its life, and a leader busy writing the conditions of thousands of
 * fresh pods would otherwise hold it for a minute. A steady process never collects; a
 * burst costs one collection, not one per look. A relist or a wave of releases followed
 * by a quiet cluster is given back within ten seconds (docs/BENCHMARKS.md, Memory). The
 * first quiet look after a busy one needs only `quietGrowthBytes` (4 MiB) of growth: a
 * wave's last collection fell inside it, and the garbage made after it (up to 16 MiB, at
 * 10,000 pods a process at rest read 141 or 160 MiB by where that collection fell) is
 * given back once as the process goes quiet; later quiet looks need 16 MiB again, so an
 * idle process is not collected over and over for the few MiB it regrows.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Timers } from './timers.ts';

/** Whether RSS grew enough above the base to collect now. */
export function shouldReduce(rss: number, base: number, growthBytes: number): boolean {
  return rss - base >= growthBytes;
}

/** Whether a look that found RSS grown collects: the process is quiet, or it waited long enough. */
export function collectsNow(look: {
  readonly quiet: boolean;
  readonly sinceCollectedMs: number;
  readonly busyEveryMs: number;
}): boolean {
  return look.quiet || look.sinceCollectedMs >= look.busyEveryMs;
}

export interface MemoryReducerOptions {
  readonly timers: Timers;
  /** The process's resident set, in bytes. */
  readonly rss: () => number;
  /** One memory-reducing collection (synchronous). */
  readonly collect: () => void;
  /** How often it looks (10 s). */
  readonly everyMs?: number;
  /** While the process stays busy, the least time between two collections (60 s). */
  readonly busyEveryMs?: number;
  readonly growthBytes?: number;
  /**
   * The growth that is enough at the first quiet look after a busy one (4 MiB): a process
   * whose last collection fell inside its wave goes quiet with up to `growthBytes` of the
   * wave's garbage still resident, and would keep it while it stays quiet.
   */
  readonly quietGrowthBytes?: number;
  /**
   * The share of the time since the last look the event loop ran (0 to 1; Node's event
   * loop utilization). Without it every look may collect.
   */
  readonly busyShare?: () => number;
  /** Quiet: busy less than this share since the last look (0.05). */
  readonly quietBelow?: number;
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
  readonly #busyEveryMs: number;
  readonly #growthBytes: number;
  readonly #quietGrowthBytes: number;
  readonly #now: () => number;
  /** Whether the last look found the event loop busy (only with `busyShare`). */
  #lastLookBusy = false;
  #base: number;
  /** When it last collected; undefined before its first collection (no minute to wait). */
  #collectedAt: number | undefined;
  #timer: unknown;
  #stopped = false;
  #unavailable = false;

  constructor(options: MemoryReducerOptions) {
    this.#options = options;
    this.#everyMs = options.everyMs ?? 10_000;
    this.#busyEveryMs = options.busyEveryMs ?? 60_000;
    this.#growthBytes = options.growthBytes ?? 16 * 1024 * 1024;
    this.#quietGrowthBytes = options.quietGrowthBytes ?? 4 * 1024 * 1024;
    this.#now = options.now ?? (() => performance.now());
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

  /**
   * One look: collects when RSS grew by `growthBytes` since the base and the process is
   * quiet or has waited `busyEveryMs`; true if it did.
   */
  check(): boolean {
    const before = this.#rss();
    if (before === undefined) return false;
    // Read at every look, so each answer covers the time since the one before.
    const busy = this.#options.busyShare?.();
    const quiet = busy === undefined || busy < (this.#options.quietBelow ?? 0.05);
    const wentQuiet = quiet && this.#lastLookBusy;
    this.#lastLookBusy = !quiet;
    // A process that shrank by itself lowers the base: growth is counted from there.
    if (before < this.#base) this.#base = before;
    const growth = wentQuiet ? this.#quietGrowthBytes : this.#growthBytes;
    if (!shouldReduce(before, this.#base, growth)) return false;
    const began = this.#now();
    const look = {
      quiet,
      sinceCollectedMs:
        this.#collectedAt === undefined ? Number.POSITIVE_INFINITY : began - this.#collectedAt,
      busyEveryMs: this.#busyEveryMs,
    };
    if (!collectsNow(look)) return false;
    this.#options.collect();
    const after = this.#rss() ?? before;
    this.#base = after;
    this.#collectedAt = this.#now();
    this.#options.onCollected?.({ before, after, ms: this.#collectedAt - began });
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

/**
 * The share of the time since its last call this process's event loop ran (Node's event
 * loop utilization), for `busyShare`.
 */
export function eventLoopBusyShare(): () => number {
  let last = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const share = performance.eventLoopUtilization(now, last).utilization;
    last = now;
    return share;
  };
}
