/**
 * The stale-guard (ideas from Kubernetes KEP-5647): tollgate never decides on an object
 * from a cache that has not yet seen tollgate's own last write to it, and takes one
 * bounded live read before a destructive act when the cache's freshness is unknown.
 *
 * - `recordWrite(key, rv)` remembers the resourceVersion the API answered a write with.
 *   `check(key, cachedRv)` compares it with the cache's as etcd revisions (BigInt). Behind
 *   means stale: that key alone waits, with capped exponential backoff per key. A
 *   resourceVersion that is not a decimal number is treated as unknown, never as fresh
 *   (the API documents resourceVersions as opaque; tollgate relies on etcd's decimal
 *   revisions and refuses to guess when they are not). Entries are forgotten once the
 *   cache has caught up or the object is deleted, and capped in number (oldest evicted).
 * - `requireLive(key, kind, cacheLagMs)` says whether a destructive decision may go on
 *   from the cache, must first take a live read, or must wait: after a restart
 *   (`restored`), nothing is fresh until the view has synced (`markSynced`). The lag is
 *   the view's measured one (cache-lag.ts: the age of tollgate's oldest write the view
 *   has not shown yet, else the last measured lag); without it, the last lag fed to
 *   `observeCacheLag` while recent, else unknown, which takes a live read.
 * - `LiveReader` spends live reads from a token bucket behind a circuit breaker, so a
 *   struggling API server is not hammered by reads: an open breaker makes the key wait
 *   and says why.
 */
import type { DecisionKindName, StalenessPolicy } from '../policy/model.ts';
import { systemClock, type Clock } from '../lib/clock.ts';
import { TokenBucket } from '../lib/token-bucket.ts';
import type { ObjectKey, V1Pod } from './types.ts';
import {
  breakerState,
  guardReports,
  staleGuardDegraded,
  liveReadsTotal,
  precreateStaleGuardSeries,
  staleSkipsTotal,
  type LiveReadResult,
} from './stale-guard-metrics.ts';

/** The parts of the StalenessPolicy the guard uses. */
export type StaleGuardPolicy = Pick<
  StalenessPolicy,
  'maxCacheLagMs' | 'destructive' | 'requeue' | 'liveReads'
>;

export type Freshness =
  | { readonly fresh: true }
  | {
      readonly fresh: false;
      /** behind: the cache has not seen tollgate's write; unknown: a resourceVersion is not numeric; restored: the view has not synced since start. */
      readonly reason: 'behind' | 'unknown' | 'restored';
      readonly detail: string;
      /** When to decide on this key again. */
      readonly retryAfterMs: number;
      /** True: the key is inside its backoff; nothing new is counted or recorded. */
      readonly waiting: boolean;
      /** True: N consecutive skips are behind it; one live read decides (`liveDecided`). */
      readonly decideLive: boolean;
    };

export type LiveDecision =
  | { readonly action: 'proceed' }
  | { readonly action: 'liveRead'; readonly reason: string }
  | { readonly action: 'hold'; readonly reason: string; readonly retryAfterMs: number };

interface Entry {
  resourceVersion: string;
  /** Consecutive stale checks: the exponent of this key's backoff. */
  misses: number;
  /** When the key was first skipped as stale (the longest-wait gauge). */
  since?: number;
  /** Before this clock time a check answers "waiting" without counting a skip. */
  retryAt?: number;
}

/** Parses an etcd revision; undefined when the string is not a plain decimal number. */
export function parseRevision(resourceVersion: string | undefined): bigint | undefined {
  if (resourceVersion === undefined || !/^\d{1,40}$/.test(resourceVersion)) return undefined;
  return BigInt(resourceVersion);
}

export interface StaleGuardOptions {
  readonly policy: StaleGuardPolicy;
  /** Which loop's skips this guard counts (tollgate_stale_skips_total{loop}). */
  readonly loop: string;
  /** True after a process start: nothing is fresh until `markSynced()`. Default true. */
  readonly restored?: boolean;
  /** Remembered writes at most; the oldest is forgotten first. Default 50 000. */
  readonly maxEntries?: number;
  readonly clock?: Clock;
  /** How long a lag fed to `observeCacheLag` stands for the view's lag. Default 60 s. */
  readonly cacheLagValidForMs?: number;
  /**
   * After this many consecutive counted skips of a key, its next due check asks for one
   * live read to decide (`decideLive`) instead of waiting on the cache. Default 5.
   */
  readonly liveReadAfterSkips?: number;
  /** Told when a key has waited longer than `degradedAfterMs`, and when none does any more. */
  readonly health?: FreshnessHealth;
  /** A key behind for longer than this makes freshness degraded. Default 5 minutes. */
  readonly degradedAfterMs?: number;
}

export const defaultLiveReadAfterSkips = 5;
/** The stale wait after which freshness is degraded (the TollgateStaleWaitLong alert's too). */
export const defaultStaleDegradedAfterMs = 300_000;

/** The problem with a `liveReadAfterSkips`, or undefined when it is a whole number >= 1. */
export function liveReadAfterSkipsProblem(value: number): string | undefined {
  return Number.isInteger(value) && value >= 1
    ? undefined
    : `liveReadAfterSkips must be a whole number of at least 1, got ${value}`;
}

export class StaleGuard {
  readonly loop: string;
  #policy: StaleGuardPolicy;
  #entries = new Map<ObjectKey, Entry>();
  #restored: boolean;
  #maxEntries: number;
  /** Keys whose freshness is unknown (a non-numeric resourceVersion): a destructive act needs a live read. */
  #unknown = new Set<ObjectKey>();
  #clock: Clock;
  #lagValidForMs: number;
  #observedLag: { ms: number; at: number } | undefined;
  readonly #liveReadAfterSkips: number;
  readonly #health: FreshnessHealth | undefined;
  readonly #degradedAfterMs: number;
  /** True while this guard has told `health` a key waits too long. */
  #waitDegraded = false;

  constructor(options: StaleGuardOptions) {
    this.#health = options.health;
    this.#degradedAfterMs = options.degradedAfterMs ?? defaultStaleDegradedAfterMs;
    this.#liveReadAfterSkips = options.liveReadAfterSkips ?? defaultLiveReadAfterSkips;
    const problem = liveReadAfterSkipsProblem(this.#liveReadAfterSkips);
    if (problem) throw new Error(`stale-guard: ${problem}`);
    this.loop = options.loop;
    this.#policy = options.policy;
    this.#restored = options.restored ?? true;
    this.#maxEntries = options.maxEntries ?? 50_000;
    this.#clock = options.clock ?? systemClock;
    this.#lagValidForMs = options.cacheLagValidForMs ?? 60_000;
    precreateStaleGuardSeries(this.loop);
    guardReports.set(this.loop, this);
  }

  /** The longest a key still behind has waited since its first stale skip (0: none). */
  longestWaitMs(): number {
    const now = this.#clock.now();
    let longest = 0;
    for (const entry of this.#entries.values()) {
      if (entry.since !== undefined) longest = Math.max(longest, now - entry.since);
    }
    return longest;
  }

  /**
   * Tells the health whether a key has waited past `degradedAfterMs`. Judged when a skip
   * is counted (a waiting key's backoff is capped by the requeue maximum, so a long wait
   * is seen within it) and when a waiting key leaves (caught up, decided live, gone):
   * never per check of a key inside its backoff, which would walk every entry per pod.
   */
  #judgeWait(): void {
    if (!this.#health) return;
    const longest = this.longestWaitMs();
    const over = longest > this.#degradedAfterMs;
    if (!over && !this.#waitDegraded) return;
    this.#waitDegraded = over;
    this.#health.report(
      `wait:${this.loop}`,
      over
        ? `${this.loop}: a pod has waited ${Math.round(longest / 1000)} s for the cache to show tollgate's own write (limit ${Math.round(this.#degradedAfterMs / 1000)} s)`
        : undefined,
    );
  }

  /** Removes a key's entry; a key that was waiting may end a degraded wait. */
  #drop(key: ObjectKey): void {
    const waited = this.#entries.get(key)?.since !== undefined;
    this.#entries.delete(key);
    this.#unknown.delete(key);
    if (waited) this.#judgeWait();
  }

  /**
   * A leader term's catch-up barrier: the revision (read from the API server after the
   * term began) the view must reach before destructive acts trust the cache again;
   * `target: undefined` while that revision is not known yet. Undefined = no barrier.
   */
  #catchUp: { target: bigint | undefined } | undefined;
  /** The highest pod resourceVersion the view has shown (observeViewRevision). */
  #viewRevision: bigint | undefined;

  /**
   * A new leader term begins: this replica's written-version map knows nothing of the
   * previous leader's last writes, which its cache may not hold yet. Until the view has
   * shown `revision` (a fresh read's resourceVersion, taken after the term began;
   * undefined while unknown), destructive acts take a live read.
   */
  beginCatchUp(revision: string | undefined): void {
    this.#catchUp = { target: parseRevision(revision) };
    this.#clearCatchUpIfReached();
  }

  /** A resourceVersion the view has shown (a pod event, a bookmark, a relist). */
  observeViewRevision(resourceVersion: string | undefined): void {
    const revision = parseRevision(resourceVersion);
    if (revision === undefined) return;
    if (this.#viewRevision === undefined || revision > this.#viewRevision)
      this.#viewRevision = revision;
    this.#clearCatchUpIfReached();
  }

  /** True while a term's catch-up barrier holds (for /readyz detail and tests). */
  get catchingUp(): boolean {
    return this.#catchUp !== undefined;
  }

  #clearCatchUpIfReached(): void {
    const target = this.#catchUp?.target;
    if (target !== undefined && this.#viewRevision !== undefined && this.#viewRevision >= target)
      this.#catchUp = undefined;
  }

  /** A new policy snapshot takes effect for the next check. */
  setPolicy(policy: StaleGuardPolicy): void {
    this.#policy = policy;
  }

  get restored(): boolean {
    return this.#restored;
  }

  /** Entries held (for tests and the memory bound). */
  get size(): number {
    return this.#entries.size;
  }

  /** The view has finished its initial lists since start: versions are known again. */
  markSynced(): void {
    this.#restored = false;
  }

  recordWrite(key: ObjectKey, resourceVersion: string): void {
    this.#drop(key);
    this.#entries.set(key, { resourceVersion, misses: 0 });
    while (this.#entries.size > this.#maxEntries) {
      this.#drop(this.#entries.keys().next().value as ObjectKey);
    }
  }

  /** The object is gone: nothing to wait for. */
  forget(key: ObjectKey): void {
    this.#drop(key);
  }

  #backoff(entry: Entry | undefined): number {
    const misses = entry ? entry.misses : 0;
    const { baseMs, maxMs } = this.#policy.requeue;
    return Math.min(maxMs, baseMs * 2 ** Math.min(misses, 40));
  }

  /**
   * A key not fresh: inside its backoff it waits (nothing counted); else after
   * `liveReadAfterSkips` counted skips one live read decides; else a counted skip that
   * doubles its backoff. Without an entry (a restart) every check is a counted skip.
   */
  #skip(
    key: ObjectKey,
    entry: Entry | undefined,
    reason: 'behind' | 'unknown' | 'restored',
    detail: string,
  ): Freshness {
    const now = this.#clock.now();
    if (reason === 'unknown') this.#unknown.add(key);
    if (entry?.retryAt !== undefined && now < entry.retryAt) {
      return {
        fresh: false,
        reason,
        detail,
        retryAfterMs: entry.retryAt - now,
        waiting: true,
        decideLive: false,
      };
    }
    if (entry && entry.misses >= this.#liveReadAfterSkips) {
      entry.misses = 0;
      entry.retryAt = now + this.#policy.requeue.baseMs;
      return {
        fresh: false,
        reason,
        detail,
        retryAfterMs: this.#policy.requeue.baseMs,
        waiting: false,
        decideLive: true,
      };
    }
    const retryAfterMs = this.#backoff(entry);
    if (entry) {
      entry.misses += 1;
      entry.retryAt = now + retryAfterMs;
      entry.since ??= now;
    }
    staleSkipsTotal.inc({ loop: this.loop });
    this.#judgeWait();
    return { fresh: false, reason, detail, retryAfterMs, waiting: false, decideLive: false };
  }

  /**
   * One live read decided on `key` (after `decideLive`): the API holds `liveResourceVersion`
   * (undefined: the object is gone or replaced). At or past tollgate's write, the wait is
   * over: the loop decided on the live object, and the entry has done its job; gone, there
   * is nothing to wait for. Still behind (the API answered from an older revision), the
   * key keeps waiting.
   */
  liveDecided(key: ObjectKey, liveResourceVersion: string | undefined): void {
    const entry = this.#entries.get(key);
    if (!entry) return;
    const written = parseRevision(entry.resourceVersion);
    const live = parseRevision(liveResourceVersion);
    if (
      liveResourceVersion !== undefined &&
      (written === undefined || live === undefined || live < written)
    )
      return;
    this.forget(key);
  }

  /**
   * May the loop decide on `key` from the cache, which holds `cachedResourceVersion`?
   * `_now` is accepted for symmetry with the pure decide/ functions; backoff is per miss.
   */
  check(key: ObjectKey, cachedResourceVersion: string | undefined, _now?: number): Freshness {
    const entry = this.#entries.get(key);
    if (this.#restored) {
      return this.#skip(key, entry, 'restored', 'the view has not synced since tollgate started');
    }
    if (!entry) return { fresh: true };
    const written = parseRevision(entry.resourceVersion);
    const cached = parseRevision(cachedResourceVersion);
    if (written === undefined || cached === undefined) {
      const which =
        written === undefined
          ? `written "${entry.resourceVersion}"`
          : `cached "${cachedResourceVersion ?? ''}"`;
      return this.#skip(key, entry, 'unknown', `resourceVersion ${which} is not an etcd revision`);
    }
    if (cached >= written) {
      // Caught up: the entry has done its job, and forgetting it keeps memory bounded.
      this.#drop(key);
      return { fresh: true };
    }
    return this.#skip(key, entry, 'behind', `cache holds ${cached}, tollgate wrote ${written}`);
  }

  /** The loops' interface (GateReleaseStaleGuard, ResizeStaleGuard). */
  isFresh(key: ObjectKey, pod: V1Pod): boolean {
    return this.check(key, pod.metadata?.resourceVersion).fresh;
  }

  /** A measured lag of the cache behind the API server (cache-lag.ts measures it). */
  observeCacheLag(ms: number): void {
    this.#observedLag = { ms: Math.max(0, ms), at: this.#clock.now() };
  }

  /** The last lag fed to `observeCacheLag`, while it is recent; else undefined (unknown). */
  get observedCacheLagMs(): number | undefined {
    const observed = this.#observedLag;
    if (!observed || this.#clock.now() - observed.at > this.#lagValidForMs) return undefined;
    return observed.ms;
  }

  /**
   * Before a decision of `kind` on `key`: may it act on the cache alone? Destructive
   * kinds need a live read when the cache lag is unknown or beyond the policy's
   * threshold, or when the key's freshness is unknown; after a restart they wait for
   * the view to sync. `cacheLagMs` undefined = the last observed lag, if recent.
   */
  requireLive(
    key: ObjectKey,
    kind: DecisionKindName,
    measuredLagMs: number | undefined,
  ): LiveDecision {
    const cacheLagMs = measuredLagMs ?? this.observedCacheLagMs;
    if (!this.#policy.destructive.includes(kind)) return { action: 'proceed' };
    if (this.#restored) {
      return {
        action: 'hold',
        reason: `${kind} held: the view has not synced since tollgate started, so versions are unknown`,
        retryAfterMs: this.#policy.requeue.baseMs,
      };
    }
    if (this.#catchUp) {
      const target = this.#catchUp.target;
      return {
        action: 'liveRead',
        reason:
          target === undefined
            ? `${kind}: new leader term: the revision to catch up with is not known yet`
            : `${kind}: new leader term: the view has not reached revision ${target} yet (at ${this.#viewRevision ?? 'none'})`,
      };
    }
    if (cacheLagMs === undefined) {
      return { action: 'liveRead', reason: `${kind}: cache lag unknown` };
    }
    if (cacheLagMs > this.#policy.maxCacheLagMs) {
      return {
        action: 'liveRead',
        reason: `${kind}: cache lag ${cacheLagMs} ms is beyond ${this.#policy.maxCacheLagMs} ms`,
      };
    }
    if (this.#unknown.has(key)) {
      return {
        action: 'liveRead',
        reason: `${kind}: freshness of ${key} unknown (non-numeric resourceVersion)`,
      };
    }
    return { action: 'proceed' };
  }
}

export type BreakerState = 'closed' | 'half-open' | 'open';

export type LiveReadOutcome<T> =
  | { readonly ok: true; readonly object: T | undefined }
  | { readonly ok: false; readonly reason: string; readonly retryAfterMs: number };

export interface LiveReaderOptions<T> {
  /** One GET of the object; resolves undefined when it does not exist (404). */
  readonly read: (namespace: string, name: string) => Promise<T | undefined>;
  readonly policy: StaleGuardPolicy['liveReads'];
  readonly clock?: Clock;
  /** Told when the breaker opens (freshness cannot be established) and when a read answers again. */
  readonly health?: FreshnessHealth;
}

/**
 * Whether the stale-guard can establish freshness, from its causes: live reads refused by
 * an open breaker (`set`, the LiveReader's), and a pod waiting longer than the limit for
 * the cache to show tollgate's own write (`report('wait:<loop>')`, each StaleGuard's).
 * Degraded while any cause holds (a destructive act on a pod the cache is behind on then
 * waits). One `onChange` per change of the whole state, for the Event;
 * `tollgate_stale_guard_degraded` and the /readyz detail line read it.
 */
export class FreshnessHealth {
  readonly #causes = new Map<string, string>();
  #degraded: string | undefined;
  readonly #onChange: ((degraded: string | undefined) => void) | undefined;

  constructor(options: { onChange?: (degraded: string | undefined) => void } = {}) {
    this.#onChange = options.onChange;
    staleGuardDegraded.set(0);
  }

  /** Why freshness cannot be established (every cause, '; '-joined); undefined while it can. */
  get degraded(): string | undefined {
    return this.#degraded;
  }

  /** The live-read breaker's cause: why reads are refused, or undefined once one answers. */
  set(degraded: string | undefined): void {
    this.report('live-reads', degraded);
  }

  /** One cause held (with its reason) or cleared (undefined). */
  report(source: string, reason: string | undefined): void {
    if (reason === undefined) this.#causes.delete(source);
    else this.#causes.set(source, reason);
    const was = this.#degraded;
    this.#degraded = this.#causes.size === 0 ? undefined : [...this.#causes.values()].join('; ');
    if ((was === undefined) === (this.#degraded === undefined)) return;
    staleGuardDegraded.set(this.#degraded === undefined ? 0 : 1);
    this.#onChange?.(this.#degraded);
  }
}

/**
 * Live reads with a budget and a circuit breaker. Closed: reads pass while the token
 * bucket has tokens. `failureThreshold` consecutive failures open it: for `openMs` every
 * read is refused with the reason and the time left. Then one probe is let through
 * (half-open): success closes the breaker, failure opens it again.
 */
export class LiveReader<T> {
  #read: LiveReaderOptions<T>['read'];
  #policy: StaleGuardPolicy['liveReads'];
  #clock: Clock;
  #bucket: TokenBucket;
  #failures = 0;
  #state: BreakerState = 'closed';
  #openedAt = 0;
  #probing = false;
  readonly #health: FreshnessHealth | undefined;

  constructor(options: LiveReaderOptions<T>) {
    this.#health = options.health;
    this.#read = options.read;
    this.#policy = options.policy;
    this.#clock = options.clock ?? systemClock;
    this.#bucket = new TokenBucket(options.policy.qps, options.policy.burst, this.#clock);
    precreateStaleGuardSeries();
    breakerState.set(0);
  }

  get state(): BreakerState {
    this.#maybeHalfOpen();
    return this.#state;
  }

  #setState(state: BreakerState): void {
    this.#state = state;
    breakerState.set(state === 'closed' ? 0 : state === 'half-open' ? 1 : 2);
  }

  #maybeHalfOpen(): void {
    if (
      this.#state === 'open' &&
      this.#clock.now() - this.#openedAt >= this.#policy.breaker.openMs
    ) {
      this.#setState('half-open');
    }
  }

  #refuse(result: LiveReadResult, reason: string, retryAfterMs: number): LiveReadOutcome<T> {
    liveReadsTotal.inc({ result });
    return { ok: false, reason, retryAfterMs: Math.max(1, retryAfterMs) };
  }

  async read(namespace: string, name: string): Promise<LiveReadOutcome<T>> {
    this.#maybeHalfOpen();
    const now = this.#clock.now();
    if (this.#state === 'open') {
      const left = this.#openedAt + this.#policy.breaker.openMs - now;
      return this.#refuse(
        'breaker_open',
        `live-read breaker open after ${this.#failures} failures; ${left} ms left`,
        left,
      );
    }
    if (this.#state === 'half-open' && this.#probing) {
      return this.#refuse(
        'breaker_open',
        'live-read breaker half-open: one probe in flight',
        this.#policy.breaker.openMs,
      );
    }
    if (!this.#bucket.take()) {
      return this.#refuse(
        'throttled',
        `live-read budget of ${this.#policy.qps}/s spent`,
        this.#bucket.waitMs(),
      );
    }
    const probe = this.#state === 'half-open';
    if (probe) this.#probing = true;
    try {
      const object = await this.#read(namespace, name);
      this.#failures = 0;
      this.#setState('closed');
      this.#health?.set(undefined);
      liveReadsTotal.inc({ result: object === undefined ? 'not_found' : 'ok' });
      return { ok: true, object };
    } catch (error) {
      this.#failures += 1;
      const message = error instanceof Error ? error.message : String(error);
      if (probe || this.#failures >= this.#policy.breaker.failureThreshold) {
        this.#openedAt = this.#clock.now();
        this.#setState('open');
        this.#health?.set(`live reads failing (${this.#failures} in a row): ${message}`);
      }
      liveReadsTotal.inc({ result: 'error' });
      return {
        ok: false,
        reason: `live read of ${namespace}/${name} failed: ${message}`,
        retryAfterMs: this.#policy.breaker.openMs,
      };
    } finally {
      if (probe) this.#probing = false;
    }
  }
}

/** What a loop knows before a write it decided from the cache. */
export interface LiveCheckRequest<T> {
  /** The loop's stale-guard; absent or without `requireLive` = `unguarded` below. */
  readonly guard?: {
    requireLive?(
      key: ObjectKey,
      kind: DecisionKindName,
      cacheLagMs: number | undefined,
    ): LiveDecision;
  };
  readonly key: ObjectKey;
  readonly kind: DecisionKindName;
  /** The view's measured lag; undefined = the guard's last observed lag, if recent. */
  readonly cacheLagMs: number | undefined;
  /** The answer when there is no guard to ask. Default: proceed from the cache. */
  readonly unguarded?: LiveDecision;
  /** The object as decided on. */
  readonly decided: { readonly uid?: string; readonly resourceVersion?: string };
  /** One live GET (undefined = not found); absent = no live read can be taken. */
  readonly readLive?: () => Promise<T | undefined>;
}

/**
 * The judgment before a write decided from the cache: `proceed` (the guard lets it go
 * from the cache, `basis: 'cache'`; a live read found the object as decided on,
 * `basis: 'live'`; nobody asked for or could take a live read, `basis: 'unchecked'`),
 * `hold` (the guard says wait), `gone` (the live read found no object, or another one
 * under the name), `moved` (the same object at another resourceVersion: decide again).
 */
export type LiveCheck<T> =
  | { readonly action: 'proceed'; readonly basis: 'cache' | 'unchecked'; readonly live?: undefined }
  | { readonly action: 'proceed'; readonly basis: 'live'; readonly live: T }
  | { readonly action: 'hold'; readonly reason: string; readonly retryAfterMs: number }
  | { readonly action: 'gone'; readonly reason: string }
  | { readonly action: 'moved'; readonly live: T; readonly reason: string };

/**
 * Asks the guard whether a write of `kind` may go on from the cache and, when it asks
 * for a live read and one can be taken, compares the live object with the one decided
 * on (uid, then resourceVersion). Both loops call this before their writes; what each
 * does with `gone` and `moved` is its own (gate-release cancels, resize decides again).
 * A failed live read rejects: the caller says what a failure means for its write.
 *
 * Synchronous unless it reads: a loop enqueues the writes of a pass in plan order within
 * one turn, and a write that needs no read must not wait a tick behind one that does.
 */
export function checkLive<
  T extends { readonly metadata?: { readonly uid?: string; readonly resourceVersion?: string } },
>(request: LiveCheckRequest<T>): LiveCheck<T> | Promise<LiveCheck<T>> {
  const verdict =
    request.guard?.requireLive?.(request.key, request.kind, request.cacheLagMs) ??
    request.unguarded;
  if (verdict === undefined) return { action: 'proceed', basis: 'unchecked' };
  if (verdict.action === 'hold') return verdict;
  if (verdict.action === 'proceed') return { action: 'proceed', basis: 'cache' };
  if (!request.readLive) return { action: 'proceed', basis: 'unchecked' };
  return request.readLive().then((live) => compareLive(request, live));
}

function compareLive<
  T extends { readonly metadata?: { readonly uid?: string; readonly resourceVersion?: string } },
>(request: LiveCheckRequest<T>, live: T | undefined): LiveCheck<T> {
  if (!live || live.metadata?.uid !== request.decided.uid) {
    return {
      action: 'gone',
      reason: `${request.kind}: live read found the object gone or replaced`,
    };
  }
  if (live.metadata?.resourceVersion !== request.decided.resourceVersion) {
    return {
      action: 'moved',
      live,
      reason: `${request.kind}: live read found resourceVersion ${live.metadata?.resourceVersion}, decided on ${request.decided.resourceVersion}`,
    };
  }
  return { action: 'proceed', basis: 'live', live };
}
