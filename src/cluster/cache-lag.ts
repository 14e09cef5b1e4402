/**
 * How far the cluster view lags behind the API server, measured on tollgate's own
 * writes: a write answered with resourceVersion R at time t is a probe; the informer
 * has caught up with it once it reports a resourceVersion >= R (an event, a bookmark or
 * a relist: a watch delivers in resourceVersion order, so by then the view holds the
 * write). The lag of that write is the time in between.
 *
 * resourceVersions are compared as etcd revisions (BigInt), as the stale-guard does; a
 * non-numeric one cannot be compared and is not measured (never guessed).
 *
 * `lagMs()` is what a destructive decision asks: the age of the oldest write the view
 * has not shown yet, or, when every write has been seen, the last measured lag while it
 * is recent (`validForMs`). A view that stopped delivering therefore shows a growing
 * lag at once, without waiting for the late event. With no recent write the lag is
 * unknown (undefined), and the stale-guard then takes a live read.
 *
 * Failure modes named: a write whose event the informer never delivers (the object left
 * the watched set by a filter or selector) is resolved by the next bookmark or relist,
 * so it overstates the lag by up to a bookmark interval (about a minute) - the safe
 * direction; beyond `maxPending` probes, new ones are dropped (the oldest, which define
 * the reported age, are kept).
 */
import { systemClock, type Clock } from '../lib/clock.ts';
import type { WriteExecutor, WriteOperation } from '../dispatch/types.ts';
import { parseRevision } from './stale-guard.ts';

export interface CacheLagMeterOptions {
  readonly clock?: Clock;
  /** How long a measured lag stands for the view's lag when no write is outstanding. Default 60 s. */
  readonly validForMs?: number;
  /** Outstanding probes kept at most. Default 10 000. */
  readonly maxPending?: number;
  /** Called with every completed measurement, in ms. */
  readonly onMeasured?: (lagMs: number) => void;
}

interface Probe {
  readonly revision: bigint;
  readonly at: number;
}

export class CacheLagMeter {
  readonly #clock: Clock;
  readonly #validForMs: number;
  readonly #maxPending: number;
  readonly #listeners: ((lagMs: number) => void)[] = [];
  /** Outstanding probes, sorted by revision (writes answer in nearly increasing order). */
  readonly #pending: Probe[] = [];
  #seen: bigint | undefined;
  #last: { lagMs: number; at: number } | undefined;

  constructor(options: CacheLagMeterOptions = {}) {
    this.#clock = options.clock ?? systemClock;
    this.#validForMs = options.validForMs ?? 60_000;
    this.#maxPending = options.maxPending ?? 10_000;
    if (options.onMeasured) this.#listeners.push(options.onMeasured);
  }

  /** Adds a listener for completed measurements; returns the function that removes it. */
  onMeasured(listener: (lagMs: number) => void): () => void {
    this.#listeners.push(listener);
    return () => {
      const i = this.#listeners.indexOf(listener);
      if (i >= 0) this.#listeners.splice(i, 1);
    };
  }

  get pending(): number {
    return this.#pending.length;
  }

  /** tollgate's write was answered with `resourceVersion` just now. */
  expect(resourceVersion: string): void {
    const revision = parseRevision(resourceVersion);
    if (revision === undefined) return;
    // The watch event may have arrived before the HTTP answer was processed.
    if (this.#seen !== undefined && this.#seen >= revision) return this.#measured(0);
    if (this.#pending.length >= this.#maxPending) return;
    const probe = { revision, at: this.#clock.now() };
    let i = this.#pending.length;
    while (i > 0 && (this.#pending[i - 1] as Probe).revision > revision) i -= 1;
    this.#pending.splice(i, 0, probe);
  }

  /** The informer reported `resourceVersion` (event, bookmark or list). */
  progressed(resourceVersion: string): void {
    const revision = parseRevision(resourceVersion);
    if (revision === undefined) return;
    if (this.#seen === undefined || revision > this.#seen) this.#seen = revision;
    const now = this.#clock.now();
    let done = 0;
    while (done < this.#pending.length && (this.#pending[done] as Probe).revision <= revision)
      done += 1;
    if (done === 0) return;
    for (const probe of this.#pending.splice(0, done)) this.#measured(now - probe.at);
  }

  #measured(lagMs: number): void {
    const ms = Math.max(0, lagMs);
    this.#last = { lagMs: ms, at: this.#clock.now() };
    for (const listener of this.#listeners) listener(ms);
  }

  /** The view's lag as far as it is known now; undefined when no recent write tells. */
  lagMs(): number | undefined {
    const now = this.#clock.now();
    const oldest = this.#pending[0];
    const recent =
      this.#last !== undefined && now - this.#last.at <= this.#validForMs
        ? this.#last.lagMs
        : undefined;
    if (oldest !== undefined) return Math.max(now - oldest.at, recent ?? 0);
    return recent;
  }
}

/** Writes whose answer is the pod's new resourceVersion, which the pod informer will deliver. */
const podWrites: ReadonlySet<WriteOperation['type']> = new Set([
  'removeGate',
  'annotate',
  'resize',
]);

/**
 * Wraps a write executor so every pod write it makes becomes a probe of the pod
 * informer's lag. Deletes are not probes (an immediate delete may answer with the
 * object's last version, which the view already holds) and Events are not in the view.
 */
export function measureCacheLag(executor: WriteExecutor, meter: CacheLagMeter): WriteExecutor {
  return async (request, signal) => {
    const answer = await executor(request, signal);
    if (podWrites.has(request.op.type)) meter.expect(answer.resourceVersion);
    return answer;
  };
}
