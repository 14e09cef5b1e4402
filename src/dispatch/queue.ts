/**
 * The one bounded priority queue every API write goes through (ideas from Kubernetes
 * KEP-5229 and controller-runtime's priorityqueue).
 *
 * Guarantees (each one is a property in test/unit/dispatch/):
 * - Bounded: queued + in-flight items never exceed `capacity`; a full queue refuses with
 *   `{accepted:false, reason:'full'}`, counts the overflow and wakes `whenNotFull()`
 *   waiters when room appears. Nothing is dropped silently.
 * - One item per key: a newer request for a key replaces the queued one, which resolves
 *   `cancelled` "superseded by a newer decision". A different operation replaces too (the
 *   newest decision is the one that holds), and the message and a metric say so; the two
 *   operations are never merged. The replacement keeps the higher of the two priorities
 *   and the earlier queue time (so a key that is re-decided often cannot lose its age).
 * - Never two writes to one key at once: a request for a key in flight waits queued.
 * - Order: highest effective priority first, where effective = priority + (waited ms /
 *   agingMs), so a low-priority write overtakes any stream of fresh high-priority ones
 *   after (difference + 1) * agingMs. Inside one effective priority, tenants take turns
 *   (the least recently served first), and a tenant's own writes go oldest first.
 * - Throughput: at most `concurrency` writes in flight, sends paced by a token bucket.
 * - Deadlines: a write whose deadline has passed is never sent; it resolves `expired`.
 * - Cancellation: the request's AbortSignal or `cancel(key)` resolves a queued write
 *   `cancelled` and aborts an in-flight one through the executor's signal.
 * - Fencing: `fence()` is asked right before every send; false resolves the write
 *   `cancelled` "leadership lost" (a deposed leader must not write).
 * - Errors (`classifyWriteError`): 429 / 5xx / timeouts / network errors are retried with
 *   jittered exponential backoff (Retry-After honoured) up to maxAttempts and maxElapsedMs;
 *   409 and a failed JSON-patch test resolve `conflict` (the loop decides again from fresh
 *   state; a blind retry would overwrite someone else's change); other 4xx are final.
 * - Exactly one result per accepted request.
 *
 * Selection is a linear scan over the queued items per send; the queue is bounded (a few
 * thousand at most), which keeps this far below one API round trip.
 */
import type { ObjectKey } from '../cluster/types.ts';
import { systemClock, type Clock } from '../lib/clock.ts';
import { systemTimers, type Timers } from '../lib/timers.ts';
import { TokenBucket } from '../lib/token-bucket.ts';
import {
  apiRequestsTotal,
  coalescedTotal,
  inFlightWrites,
  overflowTotal,
  precreateDispatchSeries,
  queueDepth,
  resultsTotal,
  retriesTotal,
  waitSeconds,
  type RetryReason,
} from './metrics.ts';
import type {
  Dispatcher,
  EnqueueResult,
  WriteExecutor,
  WriteOperation,
  WriteRequest,
  WriteResult,
} from './types.ts';

export interface RetryPolicy {
  /** First backoff before jitter. */
  readonly baseMs: number;
  /** Longest backoff. */
  readonly maxMs: number;
  /** Sends of one write in total, the first included. */
  readonly maxAttempts: number;
  /** No retry is scheduled later than this after the first send. */
  readonly maxElapsedMs: number;
}

export const defaultRetryPolicy: RetryPolicy = {
  baseMs: 200,
  maxMs: 10_000,
  maxAttempts: 6,
  maxElapsedMs: 60_000,
};

export interface DispatcherOptions {
  readonly executor: WriteExecutor;
  /** Queued plus in-flight writes at most. Default 1000. */
  readonly capacity?: number;
  /** Writes in flight at once. Default 4. */
  readonly concurrency?: number;
  /** Sends per second (token bucket). Default 20. */
  readonly qps?: number;
  /** Sends allowed in a burst. Default 2 * qps. */
  readonly burst?: number;
  /** Waiting this long raises a write's effective priority by one. Default 5 s. */
  readonly agingMs?: number;
  readonly retry?: Partial<RetryPolicy>;
  /** One send is aborted (and retried as a timeout) after this long. Default 30 s. */
  readonly attemptTimeoutMs?: number;
  /** Leader-election fencing: false right before a send cancels the write. */
  readonly fence?: () => boolean;
  readonly clock?: Clock;
  readonly timers?: Timers;
  /** [0, 1); jitter source. */
  readonly random?: () => number;
  /** Called when a queued write is replaced by a different operation (for the log). */
  readonly onOpReplaced?: (
    key: ObjectKey,
    from: WriteOperation['type'],
    to: WriteOperation['type'],
  ) => void;
}

export type ErrorClass =
  | { readonly kind: 'conflict'; readonly code?: number; readonly message: string }
  | {
      readonly kind: 'retry';
      readonly reason: RetryReason;
      readonly code?: number;
      readonly message: string;
      /** From a Retry-After header or Status.details.retryAfterSeconds. */
      readonly retryAfterMs?: number;
    }
  | { readonly kind: 'final'; readonly code?: number; readonly message: string };

/** The Status message kube-apiserver sends with a JSON Patch that does not apply (a failed `test`); see src/cluster/writer.ts. */
const failedPatchTestMessage = 'the server rejected our request due to an error in our request';

const retryableNetworkCodes = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

interface ErrorFields {
  statusCode?: unknown;
  code?: unknown;
  name?: unknown;
  message?: unknown;
  apiMessage?: unknown;
  causes?: unknown;
  conflict?: unknown;
  retryAfterMs?: unknown;
  retryAfterSeconds?: unknown;
  headers?: unknown;
  body?: unknown;
  cause?: unknown;
}

function retryAfterOf(error: ErrorFields): number | undefined {
  if (typeof error.retryAfterMs === 'number' && error.retryAfterMs >= 0) return error.retryAfterMs;
  if (typeof error.retryAfterSeconds === 'number' && error.retryAfterSeconds >= 0) {
    return error.retryAfterSeconds * 1000;
  }
  let header: unknown;
  const headers = error.headers as
    { get?: (name: string) => unknown } | Record<string, unknown> | undefined;
  if (headers && typeof (headers as { get?: unknown }).get === 'function') {
    header = (headers as { get: (name: string) => unknown }).get('retry-after');
  } else if (headers && typeof headers === 'object') {
    const record = headers as Record<string, unknown>;
    header = record['retry-after'] ?? record['Retry-After'];
  }
  if (typeof header === 'string' && /^\d+$/.test(header.trim()))
    return Number(header.trim()) * 1000;
  const details = (error.body as { details?: { retryAfterSeconds?: unknown } } | undefined)
    ?.details;
  if (typeof details?.retryAfterSeconds === 'number') return details.retryAfterSeconds * 1000;
  return undefined;
}

/**
 * What the dispatcher does with an executor error. Conflicts first: a writer marks a
 * failed precondition with `conflict: true`; a bare 409, or a 422 carrying the API's
 * generic "JSON patch did not apply" message and no causes, means the same.
 */
export function classifyWriteError(error: unknown): ErrorClass {
  const fields = (error && typeof error === 'object' ? error : {}) as ErrorFields;
  const message =
    typeof fields.message === 'string' && fields.message !== '' ? fields.message : String(error);
  const statusCode = typeof fields.statusCode === 'number' ? fields.statusCode : undefined;
  if (fields.conflict === true || statusCode === 409) {
    return { kind: 'conflict', code: statusCode, message };
  }
  if (
    statusCode === 422 &&
    fields.apiMessage === failedPatchTestMessage &&
    (!Array.isArray(fields.causes) || fields.causes.length === 0)
  ) {
    return { kind: 'conflict', code: 422, message: `JSON patch test failed: ${message}` };
  }
  if (statusCode === 429) {
    return {
      kind: 'retry',
      reason: 'throttled',
      code: 429,
      message,
      retryAfterMs: retryAfterOf(fields),
    };
  }
  if (statusCode !== undefined && statusCode >= 500 && statusCode <= 599) {
    return {
      kind: 'retry',
      reason: 'server_error',
      code: statusCode,
      message,
      retryAfterMs: retryAfterOf(fields),
    };
  }
  if (statusCode !== undefined) return { kind: 'final', code: statusCode, message };
  if (fields.name === 'TimeoutError') return { kind: 'retry', reason: 'timeout', message };
  const cause = fields.cause as ErrorFields | undefined;
  const code =
    typeof fields.code === 'string'
      ? fields.code
      : typeof cause?.code === 'string'
        ? cause.code
        : undefined;
  if (code !== undefined) {
    if (
      code === 'ETIMEDOUT' ||
      code === 'UND_ERR_CONNECT_TIMEOUT' ||
      code === 'UND_ERR_HEADERS_TIMEOUT' ||
      code === 'UND_ERR_BODY_TIMEOUT'
    ) {
      return { kind: 'retry', reason: 'timeout', message };
    }
    if (retryableNetworkCodes.has(code) || code.startsWith('UND_ERR_')) {
      return { kind: 'retry', reason: 'network', message };
    }
  }
  // An error with neither an HTTP status nor a known network code is a bug or an
  // unknown failure: retrying it blindly could repeat a write; it is final and visible.
  return { kind: 'final', message };
}

interface Item {
  request: WriteRequest;
  /** Max of the priorities of every request coalesced into this item. */
  priority: number;
  /** When the first request coalesced into this item was queued (aging, wait metric). */
  queuedAt: number;
  /** Not sent before this time (retry backoff). */
  notBefore: number;
  attempts: number;
  firstSentAt?: number;
  seq: number;
  resolve: (result: WriteResult) => void;
  settled: boolean;
  abort?: AbortController;
  /** Why the in-flight send was aborted by the dispatcher (cancel, timeout, caller signal). */
  abortReason?: { kind: 'cancel' | 'timeout'; message: string };
  detachSignal?: () => void;
  /**
   * A newer decision for the key was accepted while this write was in flight. If this
   * write then needs a retry it is cancelled instead, even when the newer request has
   * since been withdrawn: an older decision is never sent after a newer one.
   */
  superseded?: boolean;
}

function verbOf(op: WriteOperation): string {
  if (op.type === 'delete') return 'delete';
  if (op.type === 'event' && op.event.action === 'create') return 'create';
  return 'patch';
}

function positive(name: string, value: number, integer: boolean): number {
  if (!(value > 0) || (integer && !Number.isInteger(value))) {
    throw new Error(
      `dispatcher option ${name} must be a positive ${integer ? 'integer' : 'number'}, got ${value}`,
    );
  }
  return value;
}

function abortMessage(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason.message;
  if (typeof reason === 'string') return reason;
  return 'aborted by the caller';
}

export class PriorityDispatcher implements Dispatcher {
  readonly capacity: number;
  readonly concurrency: number;
  #executor: WriteExecutor;
  #agingMs: number;
  #retry: RetryPolicy;
  #attemptTimeoutMs: number;
  #fence: () => boolean;
  #clock: Clock;
  #timers: Timers;
  #random: () => number;
  #bucket: TokenBucket;
  #onOpReplaced: DispatcherOptions['onOpReplaced'];

  #queued = new Map<ObjectKey, Item>();
  #inFlight = new Map<ObjectKey, Item>();
  #tenantServed = new Map<string, number>();
  #seq = 0;
  #served = 0;
  #wake: { handle: unknown; at: number } | undefined;
  #closed = false;
  #roomWaiters = new Set<() => void>();
  #idleWaiters: (() => void)[] = [];

  constructor(options: DispatcherOptions) {
    this.#executor = options.executor;
    this.capacity = positive('capacity', options.capacity ?? 1000, true);
    this.concurrency = positive('concurrency', options.concurrency ?? 4, true);
    const qps = positive('qps', options.qps ?? 20, false);
    const burst = positive('burst', options.burst ?? Math.max(1, Math.ceil(qps * 2)), false);
    this.#agingMs = positive('agingMs', options.agingMs ?? 5_000, false);
    this.#retry = { ...defaultRetryPolicy, ...options.retry };
    positive('retry.baseMs', this.#retry.baseMs, false);
    positive('retry.maxMs', this.#retry.maxMs, false);
    positive('retry.maxAttempts', this.#retry.maxAttempts, true);
    positive('retry.maxElapsedMs', this.#retry.maxElapsedMs, false);
    this.#attemptTimeoutMs = positive(
      'attemptTimeoutMs',
      options.attemptTimeoutMs ?? 30_000,
      false,
    );
    this.#fence = options.fence ?? (() => true);
    this.#clock = options.clock ?? systemClock;
    this.#timers = options.timers ?? systemTimers;
    this.#random = options.random ?? Math.random;
    this.#bucket = new TokenBucket(qps, burst, this.#clock);
    this.#onOpReplaced = options.onOpReplaced;
    precreateDispatchSeries();
  }

  /** Writes waiting (including those waiting to be retried); in-flight ones not counted. */
  get depth(): number {
    return this.#queued.size;
  }

  get inFlight(): number {
    return this.#inFlight.size;
  }

  #held(): number {
    return this.#queued.size + this.#inFlight.size;
  }

  enqueue(request: WriteRequest): EnqueueResult {
    if (this.#closed) return { accepted: false, reason: 'closed' };
    const now = this.#clock.now();
    const previous = this.#queued.get(request.key);
    if (!previous && this.#held() >= this.capacity) {
      overflowTotal.inc();
      return { accepted: false, reason: 'full' };
    }
    let resolve!: (result: WriteResult) => void;
    const done = new Promise<WriteResult>((r) => (resolve = r));
    const item: Item = {
      request,
      priority: request.priority,
      queuedAt: now,
      notBefore: now,
      attempts: 0,
      seq: this.#seq++,
      resolve,
      settled: false,
    };
    if (request.signal?.aborted) {
      // Accepted and answered at once, so the caller still gets exactly one result.
      this.#settle(item, { result: 'cancelled', message: abortMessage(request.signal) });
      return { accepted: true, coalesced: false, done };
    }
    if (previous) {
      item.priority = Math.max(previous.priority, request.priority);
      item.queuedAt = Math.min(previous.queuedAt, now);
      const from = previous.request.op.type;
      const to = request.op.type;
      this.#queued.delete(request.key);
      previous.detachSignal?.();
      coalescedTotal.inc({ kind: from === to ? 'same_op' : 'op_changed' });
      if (from !== to) this.#onOpReplaced?.(request.key, from, to);
      this.#settle(previous, {
        result: 'cancelled',
        message:
          from === to
            ? `superseded by a newer decision (${request.decisionId})`
            : `superseded by a newer decision (${request.decisionId}): ${from} replaced by ${to}`,
      });
    }
    const flying = this.#inFlight.get(request.key);
    if (flying) flying.superseded = true;
    if (request.signal) {
      const signal = request.signal;
      const onAbort = (): void => this.#abortItem(item, abortMessage(signal));
      signal.addEventListener('abort', onAbort, { once: true });
      item.detachSignal = () => signal.removeEventListener('abort', onAbort);
    }
    this.#queued.set(request.key, item);
    this.#gauges();
    this.#pump();
    return { accepted: true, coalesced: previous !== undefined, done };
  }

  whenNotFull(signal?: AbortSignal): Promise<void> {
    if (this.#closed || this.#held() < this.capacity) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        this.#roomWaiters.delete(wake);
        reject(signal?.reason as Error);
      };
      const wake = (): void => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      this.#roomWaiters.add(wake);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  cancel(key: ObjectKey, reason: string): void {
    const queued = this.#queued.get(key);
    if (queued) this.#abortItem(queued, reason);
    const flying = this.#inFlight.get(key);
    if (flying) this.#abortItem(flying, reason);
  }

  async close(options?: { cancelQueued: boolean }): Promise<void> {
    this.#closed = true;
    if (options?.cancelQueued) {
      for (const item of [...this.#queued.values()]) this.#abortItem(item, 'dispatcher closed');
    }
    this.#notifyRoom();
    this.#pump();
    if (this.#held() > 0) await new Promise<void>((resolve) => this.#idleWaiters.push(resolve));
    this.#clearWake();
  }

  /** Cancels a queued item, or aborts its send when it is in flight. */
  #abortItem(item: Item, message: string): void {
    const key = item.request.key;
    if (this.#queued.get(key) === item) {
      this.#queued.delete(key);
      this.#settle(item, { result: 'cancelled', message });
      this.#afterRemoval();
    } else if (this.#inFlight.get(key) === item && item.abort && !item.abortReason) {
      item.abortReason = { kind: 'cancel', message };
      item.abort.abort(new Error(message));
    }
  }

  #settle(item: Item, result: WriteResult): void {
    if (item.settled) return;
    item.settled = true;
    item.detachSignal?.();
    resultsTotal.inc({ op: item.request.op.type, result: result.result });
    item.resolve(result);
  }

  #gauges(): void {
    queueDepth.set(this.#queued.size);
    inFlightWrites.set(this.#inFlight.size);
  }

  #notifyRoom(): void {
    if (!this.#closed && this.#held() >= this.capacity) return;
    const waiters = [...this.#roomWaiters];
    this.#roomWaiters.clear();
    for (const wake of waiters) wake();
  }

  #afterRemoval(): void {
    this.#gauges();
    this.#notifyRoom();
    if (this.#held() === 0 && this.#idleWaiters.length > 0) {
      const waiters = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const done of waiters) done();
    }
    this.#pump();
  }

  #effective(item: Item, now: number): number {
    return item.priority + Math.floor(Math.max(0, now - item.queuedAt) / this.#agingMs);
  }

  /** The next item to send among those ready now, or undefined. */
  #pick(now: number): Item | undefined {
    let best: Item | undefined;
    let bestPriority = Number.NEGATIVE_INFINITY;
    let bestServed = 0;
    for (const item of this.#queued.values()) {
      if (item.notBefore > now || this.#inFlight.has(item.request.key)) continue;
      const priority = this.#effective(item, now);
      const served = this.#tenantServed.get(item.request.tenant) ?? -1;
      const better =
        best === undefined ||
        priority > bestPriority ||
        (priority === bestPriority &&
          (served < bestServed ||
            (served === bestServed &&
              (item.queuedAt < best.queuedAt ||
                (item.queuedAt === best.queuedAt && item.seq < best.seq)))));
      if (better) {
        best = item;
        bestPriority = priority;
        bestServed = served;
      }
    }
    return best;
  }

  #expire(now: number): void {
    for (const item of [...this.#queued.values()]) {
      if (item.request.deadline < now) {
        this.#queued.delete(item.request.key);
        this.#settle(item, {
          result: 'expired',
          message:
            item.attempts === 0
              ? 'deadline passed before the write was sent'
              : `deadline passed while waiting to retry (after ${item.attempts} attempts)`,
        });
      }
    }
  }

  #clearWake(): void {
    if (this.#wake) this.#timers.clear(this.#wake.handle);
    this.#wake = undefined;
  }

  #scheduleWake(at: number, now: number): void {
    if (this.#wake && this.#wake.at <= at) return;
    this.#clearWake();
    const handle = this.#timers.set(
      () => {
        this.#wake = undefined;
        this.#pump();
      },
      Math.max(0, at - now),
    );
    this.#wake = { handle, at };
  }

  #pumping = false;
  #pump(): void {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      for (;;) {
        const now = this.#clock.now();
        const before = this.#held();
        this.#expire(now);
        if (this.#held() !== before) {
          this.#gauges();
          this.#notifyRoom();
        }
        if (this.#held() === 0) {
          this.#clearWake();
          const waiters = this.#idleWaiters;
          this.#idleWaiters = [];
          for (const done of waiters) done();
          return;
        }
        // Next wake-up: the earliest retry time or deadline among queued items.
        let nextAt = Number.POSITIVE_INFINITY;
        for (const item of this.#queued.values()) {
          if (item.notBefore > now) nextAt = Math.min(nextAt, item.notBefore);
          nextAt = Math.min(nextAt, item.request.deadline + 1);
        }
        if (this.#inFlight.size >= this.concurrency) {
          if (nextAt !== Number.POSITIVE_INFINITY) this.#scheduleWake(nextAt, now);
          return;
        }
        const item = this.#pick(now);
        if (!item) {
          if (nextAt !== Number.POSITIVE_INFINITY) this.#scheduleWake(nextAt, now);
          return;
        }
        if (!this.#bucket.take()) {
          this.#scheduleWake(Math.min(nextAt, now + this.#bucket.waitMs()), now);
          return;
        }
        this.#send(item, now);
      }
    } finally {
      this.#pumping = false;
    }
  }

  #send(item: Item, now: number): void {
    const key = item.request.key;
    this.#queued.delete(key);
    if (!this.#fence()) {
      this.#settle(item, { result: 'cancelled', message: 'leadership lost' });
      this.#gauges();
      this.#notifyRoom();
      return;
    }
    this.#served += 1;
    this.#tenantServed.set(item.request.tenant, this.#served);
    if (item.attempts === 0) {
      item.firstSentAt = now;
      waitSeconds.observe(Math.max(0, now - item.queuedAt) / 1000);
    }
    item.attempts += 1;
    item.abortReason = undefined;
    const abort = new AbortController();
    item.abort = abort;
    this.#inFlight.set(key, item);
    this.#gauges();
    const timeout = this.#timers.set(() => {
      if (!item.abortReason) {
        item.abortReason = {
          kind: 'timeout',
          message: `no answer within ${this.#attemptTimeoutMs} ms`,
        };
        const error = new Error(item.abortReason.message);
        error.name = 'TimeoutError';
        abort.abort(error);
      }
    }, this.#attemptTimeoutMs);
    const verb = verbOf(item.request.op);
    let call: Promise<{ resourceVersion: string }>;
    try {
      call = this.#executor(item.request, abort.signal);
    } catch (error) {
      call = Promise.reject(error);
    }
    call.then(
      (answer) => {
        this.#timers.clear(timeout);
        apiRequestsTotal.inc({ verb, code: '2xx' });
        this.#finish(item, { result: 'succeeded', resourceVersion: answer.resourceVersion });
      },
      (error: unknown) => {
        this.#timers.clear(timeout);
        this.#failed(item, error, verb);
      },
    );
  }

  #finish(item: Item, result: WriteResult): void {
    this.#inFlight.delete(item.request.key);
    item.abort = undefined;
    this.#settle(item, result);
    this.#afterRemoval();
  }

  #failed(item: Item, error: unknown, verb: string): void {
    const statusCode = (error as { statusCode?: unknown } | null)?.statusCode;
    const aborted = item.abortReason;
    if (aborted?.kind === 'cancel') {
      apiRequestsTotal.inc({
        verb,
        code: typeof statusCode === 'number' ? String(statusCode) : 'aborted',
      });
      this.#finish(item, { result: 'cancelled', message: aborted.message });
      return;
    }
    const kind: ErrorClass =
      aborted?.kind === 'timeout'
        ? { kind: 'retry', reason: 'timeout', message: aborted.message }
        : classifyWriteError(error);
    apiRequestsTotal.inc({
      verb,
      code:
        typeof statusCode === 'number'
          ? String(statusCode)
          : kind.kind === 'retry'
            ? kind.reason
            : 'error',
    });
    if (kind.kind === 'conflict') {
      this.#finish(item, { result: 'conflict', message: kind.message });
      return;
    }
    if (kind.kind === 'final') {
      this.#finish(item, { result: 'failed', code: kind.code, message: kind.message });
      return;
    }
    const now = this.#clock.now();
    const key = item.request.key;
    const cap = Math.min(
      this.#retry.maxMs,
      this.#retry.baseMs * 2 ** Math.min(item.attempts - 1, 40),
    );
    // Equal jitter: half fixed, half random, so throttled writers spread out instead of
    // returning together, while each key's rate stays bounded.
    const jittered = cap / 2 + (cap / 2) * this.#random();
    const delay = Math.round(Math.max(jittered, kind.retryAfterMs ?? 0));
    const elapsed = now + delay - (item.firstSentAt ?? now);
    if (
      item.attempts >= this.#retry.maxAttempts ||
      elapsed > this.#retry.maxElapsedMs ||
      this.#closed
    ) {
      const why = this.#closed ? 'dispatcher closed' : `gave up after ${item.attempts} attempts`;
      this.#finish(item, { result: 'failed', code: kind.code, message: `${why}: ${kind.message}` });
      return;
    }
    this.#inFlight.delete(key);
    item.abort = undefined;
    if (this.#queued.has(key) || item.superseded) {
      // A newer decision for the key arrived while this one was in flight: it wins.
      this.#settle(item, {
        result: 'cancelled',
        message: 'superseded by a newer decision while retrying',
      });
      this.#afterRemoval();
      return;
    }
    retriesTotal.inc({ op: item.request.op.type, reason: kind.reason });
    item.notBefore = now + delay;
    this.#queued.set(key, item);
    this.#afterRemoval();
  }
}

export function createDispatcher(options: DispatcherOptions): PriorityDispatcher {
  return new PriorityDispatcher(options);
}
