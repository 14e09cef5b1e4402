/**
 * tollgate's own informer: list + watch of one resource into an `ObjectStore`.
 *
 * Why not the library's `ListWatch`: it stops for good on any error it does not
 * know (tollgate would silently run on a frozen cache), lists without pagination,
 * never asks for bookmarks and keeps objects whole. This one:
 *
 * - lists in pages (`limit`/`continue`) and swaps the store atomically (store.ts),
 *   reporting a synthetic DELETED for objects that vanished;
 * - watches with `allowWatchBookmarks=true` and a randomised `timeoutSeconds`
 *   (5-10 min, like client-go) so connections recycle without all closing together;
 * - resumes from the last resourceVersion after a clean close (server timeout, API
 *   server shutting down), relists on 410 Gone whether it comes as an HTTP status,
 *   an in-stream ERROR event or an expired `continue` token;
 * - after ANY other error (network refused, 5xx, 403, inactivity timeout, a bad
 *   discovery answer) waits a capped, jittered exponential backoff and starts again;
 *   it never gives up, and while the API server is down each informer makes at most
 *   one attempt per backoff interval;
 * - trims every object (trim.ts) and applies a filter (managed namespaces, referenced
 *   names) before it enters the store; changing the filter relists.
 *
 * Failure modes it does not hide: an informer that keeps failing stays `synced`
 * with its last content (the stale-guard decides by resourceVersion and age, see
 * `lastEventAt`), and every restart is counted by reason.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { systemClock, type Clock } from '../lib/clock.ts';
import { silentLogger, type Logger } from '../observe/log.ts';
import { backoffDelay, defaultWatchBackoff, type BackoffPolicy } from './backoff.ts';
import { KubeApiError, statusCodeOf } from './errors.ts';
import type { ResourceSource } from './source.ts';
import { ObjectStore, keyOf, type StoreChange } from './store.ts';
import { trimObject } from './trim.ts';
import type { ObjectKey } from './types.ts';

/** Why an informer (re)started its list or watch; the closed label set of tollgate_informer_restarts_total. */
export type RestartReason = 'gone' | 'closed' | 'timeout' | 'error' | 'filter' | 'relist';
export const restartReasons: readonly RestartReason[] = [
  'gone',
  'closed',
  'timeout',
  'error',
  'filter',
  'relist',
];

export interface InformerHooks {
  restarted?(reason: RestartReason, error?: Error): void;
  objectCount?(count: number): void;
  /** The informer has seen everything up to this resourceVersion (a list, an event or a bookmark). */
  progressed?(resourceVersion: string): void;
}

export interface InformerOptions {
  readonly source: ResourceSource;
  /** Objects for which this returns false are kept out of the store. Called on trimmed objects. */
  readonly filter?: (object: KubernetesObject) => boolean;
  readonly transform?: (object: KubernetesObject) => KubernetesObject;
  readonly pageSize?: number;
  /** Seconds the API server keeps one watch open; default uniformly 300-600. */
  readonly watchTimeoutSeconds?: () => number;
  readonly backoff?: BackoffPolicy;
  /** A watch that closes cleanly sooner than this with no events counts as a failure for backoff. */
  readonly minHealthyWatchMs?: number;
  readonly random?: () => number;
  readonly clock?: Clock;
  readonly sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  readonly logger?: Logger;
  readonly hooks?: InformerHooks;
}

type WatchOutcome = 'closed' | 'gone' | 'interrupted';

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

function isGone(error: unknown): boolean {
  return statusCodeOf(error) === 410;
}

export class Informer {
  readonly #source: ResourceSource;
  #filter: (object: KubernetesObject) => boolean;
  readonly #transform: (object: KubernetesObject) => KubernetesObject;
  readonly #pageSize: number;
  readonly #watchTimeoutSeconds: () => number;
  readonly #backoff: BackoffPolicy;
  readonly #minHealthyWatchMs: number;
  readonly #random: () => number;
  readonly #clock: Clock;
  readonly #sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  readonly #log: Logger;
  readonly #hooks: InformerHooks;

  readonly #store = new ObjectStore();
  readonly #listeners = new Set<(change: StoreChange) => void>();
  #resourceVersion: string | undefined;
  #lastEventAt: number | undefined;
  #synced = false;
  /**
   * Filter changes: `#filterVersion` counts them, `#listedFilterVersion` is the one the last
   * completed relist applied. Not the same = the store does not reflect the filter yet,
   * also while the relist's list is in flight (a flag cleared when the relist began let a
   * pass plan on the old store until the list came back).
   */
  #filterVersion = 0;
  #listedFilterVersion = 0;
  #syncWaiters: { ready: () => boolean; wake: () => void; fail: (error: Error) => void }[] = [];
  #lastError: Error | undefined;
  #running = false;
  #stopped = false;
  #needRelist = true;
  /** Aborted to interrupt the current list, watch or sleep (stop or filter change). */
  #interrupt = new AbortController();
  #interruptWatch: (() => void) | undefined;
  #loop: Promise<void> | undefined;

  constructor(options: InformerOptions) {
    this.#source = options.source;
    this.#filter = options.filter ?? (() => true);
    this.#transform = options.transform ?? trimObject;
    this.#pageSize = options.pageSize ?? 500;
    this.#random = options.random ?? Math.random;
    this.#watchTimeoutSeconds =
      options.watchTimeoutSeconds ?? (() => Math.floor(300 + 300 * this.#random()));
    this.#backoff = options.backoff ?? defaultWatchBackoff;
    this.#minHealthyWatchMs = options.minHealthyWatchMs ?? 1000;
    this.#clock = options.clock ?? systemClock;
    this.#sleep = options.sleep ?? abortableSleep;
    this.#log = (options.logger ?? silentLogger).child({ informer: options.source.description });
    this.#hooks = options.hooks ?? {};
  }

  get description(): string {
    return this.#source.description;
  }
  get synced(): boolean {
    return this.#synced;
  }
  /**
   * Synced, and the store reflects the current filter: after `setFilter` (a namespace
   * added to the managed set) this is false until the relist completes, so a caller
   * never plans on a store that lacks the objects the new filter admits.
   */
  get current(): boolean {
    return this.#synced && this.#listedFilterVersion === this.#filterVersion;
  }
  /** The newest resourceVersion seen in a list, an event or a bookmark. */
  get lastResourceVersion(): string | undefined {
    return this.#resourceVersion;
  }
  /** Clock time of the last list, event or bookmark (undefined before the first list). */
  get lastEventAt(): number | undefined {
    return this.#lastEventAt;
  }
  get size(): number {
    return this.#store.size;
  }
  /** The error of the last failed list or watch, until a list succeeds again (why it is not synced, or stale). */
  get lastError(): Error | undefined {
    return this.#lastError;
  }
  get stopped(): boolean {
    return this.#stopped;
  }
  get(key: ObjectKey): KubernetesObject | undefined {
    return this.#store.get(key);
  }
  values(): IterableIterator<KubernetesObject> {
    return this.#store.values();
  }

  onChange(listener: (change: StoreChange) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Resolves once the first list has completed. Rejects when `signal` aborts, and when
   * the informer is stopped before it synced: a stopped informer never syncs, so waiting
   * on it would hang its caller for good (a pass, or a shutdown behind that pass).
   */
  whenSynced(signal?: AbortSignal): Promise<void> {
    return this.#whenReady(() => this.#synced, signal);
  }

  /** Resolves once `current` holds (synced, and any filter change applied). Rejects like `whenSynced`. */
  whenCurrent(signal?: AbortSignal): Promise<void> {
    return this.#whenReady(() => this.current, signal);
  }

  #whenReady(ready: () => boolean, signal?: AbortSignal): Promise<void> {
    if (ready()) return Promise.resolve();
    if (this.#stopped) return Promise.reject(this.#stoppedError());
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const onAbort = (): void => reject(signal?.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#syncWaiters.push({
        ready,
        wake: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        fail: (error) => {
          signal?.removeEventListener('abort', onAbort);
          reject(error);
        },
      });
    });
  }

  #stoppedError(): Error {
    return new Error(`informer ${this.#source.description} was stopped before it synced`);
  }

  start(): void {
    if (this.#running || this.#stopped) return;
    this.#running = true;
    this.#loop = this.#run();
  }

  /** Stops list/watch; the store keeps its last content. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#interruptNow();
    const waiters = this.#syncWaiters;
    this.#syncWaiters = [];
    for (const waiter of waiters) {
      if (waiter.ready()) waiter.wake();
      else waiter.fail(this.#stoppedError());
    }
    await this.#loop;
  }

  /**
   * Replaces the filter and relists, so objects that now pass appear (ADDED) and
   * those that no longer pass disappear (DELETED) in one atomic replace.
   */
  setFilter(filter: (object: KubernetesObject) => boolean): void {
    this.#filter = filter;
    this.#listAfresh('filter');
  }

  /**
   * Lists afresh, as after a filter change: `current` is false until that list has
   * completed. A new leader term asks for it, so its first pass plans on what the API
   * server holds now (the previous leader's releases among it), not on what a lagging
   * watch has delivered so far.
   */
  relist(): void {
    this.#listAfresh('relist');
  }

  #listAfresh(reason: 'filter' | 'relist'): void {
    this.#needRelist = true;
    this.#filterVersion += 1;
    if (this.#running) {
      this.#hooks.restarted?.(reason);
      this.#interruptNow();
    }
  }

  #interruptNow(): void {
    this.#interrupt.abort();
    this.#interruptWatch?.();
  }

  async #run(): Promise<void> {
    let failures = 0;
    let goneStreak = 0;
    while (!this.#stopped) {
      if (this.#interrupt.signal.aborted) this.#interrupt = new AbortController();
      const signal = this.#interrupt.signal;
      try {
        if (this.#needRelist) {
          this.#needRelist = false;
          try {
            await this.#relist(signal);
          } catch (error) {
            this.#needRelist = true;
            throw error;
          }
          failures = 0;
        }
        if (signal.aborted) continue;
        const startedAt = this.#clock.now();
        const before = this.#eventsSeen;
        const outcome = await this.#watchOnce();
        const progressed = this.#eventsSeen > before;
        if (outcome === 'interrupted') continue;
        if (outcome === 'gone') {
          this.#needRelist = true;
          this.#hooks.restarted?.('gone');
          goneStreak = progressed ? 1 : goneStreak + 1;
          // Relist at once the first time; a watch that is Gone again right after a
          // fresh list means the server cannot serve that version: back off.
          if (goneStreak > 1)
            await this.#sleep(backoffDelay(goneStreak - 2, this.#backoff, this.#random), signal);
          continue;
        }
        this.#hooks.restarted?.('closed');
        const healthy = progressed || this.#clock.now() - startedAt >= this.#minHealthyWatchMs;
        if (healthy) {
          failures = 0;
          goneStreak = 0;
        } else {
          // A server that accepts the watch and closes it at once must not be hammered.
          await this.#sleep(backoffDelay(failures++, this.#backoff, this.#random), signal);
        }
      } catch (error) {
        if (this.#stopped || signal.aborted) continue;
        if (isGone(error)) {
          this.#needRelist = true;
          this.#hooks.restarted?.('gone');
          goneStreak += 1;
          if (goneStreak > 1)
            await this.#sleep(backoffDelay(goneStreak - 2, this.#backoff, this.#random), signal);
          continue;
        }
        const err = error instanceof Error ? error : new Error(String(error));
        this.#lastError = err;
        const reason: RestartReason = err.name === 'TimeoutError' ? 'timeout' : 'error';
        this.#hooks.restarted?.(reason, err);
        const delay = backoffDelay(failures++, this.#backoff, this.#random);
        this.#log.warn(
          { err: err.message, code: statusCodeOf(err), delayMs: delay, reason },
          'list/watch failed; retrying',
        );
        await this.#sleep(delay, signal);
      }
    }
    this.#running = false;
  }

  #eventsSeen = 0;

  async #relist(signal: AbortSignal): Promise<void> {
    // A filter set while this list runs is not applied by it: the next relist applies it.
    const filterVersion = this.#filterVersion;
    const filter = this.#filter;
    const items: KubernetesObject[] = [];
    let continueToken: string | undefined;
    let resourceVersion: string;
    do {
      const page = await this.#source.list({ limit: this.#pageSize, continueToken, signal });
      if (signal.aborted) return;
      for (const raw of page.items) {
        const object = this.#transform(raw);
        if (filter(object)) items.push(object);
      }
      continueToken = page.continueToken;
      resourceVersion = page.resourceVersion;
    } while (continueToken);
    const changes = this.#store.replace(items);
    this.#listedFilterVersion = filterVersion;
    this.#lastError = undefined;
    this.#resourceVersion = resourceVersion;
    this.#lastEventAt = this.#clock.now();
    this.#hooks.objectCount?.(this.#store.size);
    this.#log.debug(
      { objects: this.#store.size, resourceVersion, changes: changes.length },
      'listed',
    );
    this.#markSynced();
    for (const change of changes) this.#emit(change);
    this.#hooks.progressed?.(resourceVersion);
  }

  #markSynced(): void {
    this.#synced = true;
    const waiting = this.#syncWaiters;
    this.#syncWaiters = waiting.filter((waiter) => !waiter.ready());
    for (const waiter of waiting) if (waiter.ready()) waiter.wake();
  }

  #watchOnce(): Promise<WatchOutcome> {
    const resourceVersion = this.#resourceVersion;
    if (resourceVersion === undefined) return Promise.resolve('gone');
    return new Promise<WatchOutcome>((resolve, reject) => {
      let settled = false;
      const settle = (outcome: WatchOutcome | Error): void => {
        if (settled) return;
        settled = true;
        this.#interruptWatch = undefined;
        handle.stop();
        if (outcome instanceof Error) reject(outcome);
        else resolve(outcome);
      };
      const handle = this.#source.watch(
        { resourceVersion, timeoutSeconds: this.#watchTimeoutSeconds() },
        (type, object) => {
          if (settled) return;
          if (type === 'ERROR') {
            const status = object as { code?: number; message?: string; reason?: string };
            if (status.code === 410) return settle('gone');
            return settle(
              new KubeApiError(
                status.code ?? 500,
                `watch ${this.#source.description}: ERROR event: ${status.message ?? JSON.stringify(object)}`,
                status.reason,
              ),
            );
          }
          const version = object.metadata?.resourceVersion;
          if (version) this.#resourceVersion = version;
          this.#lastEventAt = this.#clock.now();
          this.#eventsSeen += 1;
          if (type !== 'BOOKMARK') this.#applyEvent(type, object);
          // After the store holds the event, so whoever waits on this version finds it.
          if (version) this.#hooks.progressed?.(version);
        },
        (error) => {
          if (error === null) settle('closed');
          else if (isGone(error)) settle('gone');
          else settle(error);
        },
      );
      this.#interruptWatch = () => settle('interrupted');
      if (this.#interrupt.signal.aborted) settle('interrupted');
    });
  }

  #applyEvent(type: 'ADDED' | 'MODIFIED' | 'DELETED', raw: KubernetesObject): void {
    const object = this.#transform(raw);
    let change: StoreChange | undefined;
    if (this.#filter(object)) {
      change = this.#store.apply(type, object);
    } else if (this.#store.get(keyOf(object))) {
      // It passed the filter before (a selector-like filter on mutable fields): drop it.
      change = this.#store.apply('DELETED', object);
    }
    if (!change) return;
    this.#hooks.objectCount?.(this.#store.size);
    this.#emit(change);
  }

  #emit(change: StoreChange): void {
    for (const listener of this.#listeners) {
      try {
        listener(change);
      } catch (error) {
        this.#log.error(
          { err: error instanceof Error ? error.message : String(error), key: change.key },
          'change listener threw',
        );
      }
    }
  }
}
