/**
 * The smallest honest adapter for a piece the gate-release e2e needs that had not
 * landed (is not committed) when it was written; controller.ts uses it only when
 * src/dispatch/queue.ts cannot be imported. It is real I/O against the real API server
 * (through the real write executor), only simpler than the module it stands in for.
 *
 * - `SimpleDispatcher` for src/dispatch/queue.ts: bounded, one write in flight per key,
 *   a fixed number of workers, 409/failed-patch-test -> conflict, 403/404/422 -> failed,
 *   anything else retried with backoff (3 attempts), deadline -> expired. No priorities,
 *   no tenant round-robin, no aging.
 */
import type {
  Dispatcher,
  EnqueueResult,
  WriteExecutor,
  WriteRequest,
  WriteResult,
} from '../../../src/dispatch/types.ts';

export class SimpleDispatcher implements Dispatcher {
  readonly #execute: WriteExecutor;
  readonly #capacity: number;
  readonly #workers: number;
  #queue: { request: WriteRequest; resolve: (r: WriteResult) => void }[] = [];
  #busyKeys = new Set<string>();
  #running = 0;
  #closed = false;
  #roomWaiters: (() => void)[] = [];
  #controllers = new Map<string, AbortController>();

  constructor(execute: WriteExecutor, options: { capacity?: number; workers?: number } = {}) {
    this.#execute = execute;
    this.#capacity = options.capacity ?? 1000;
    this.#workers = options.workers ?? 16;
  }

  get depth(): number {
    return this.#queue.length;
  }

  enqueue(request: WriteRequest): EnqueueResult {
    if (this.#closed) return { accepted: false, reason: 'closed' };
    const queued = this.#queue.findIndex((q) => q.request.key === request.key);
    if (queued >= 0) {
      const [old] = this.#queue.splice(queued, 1);
      old?.resolve({ result: 'cancelled', message: 'superseded by a newer decision' });
    } else if (this.#queue.length >= this.#capacity) {
      return { accepted: false, reason: 'full' };
    }
    const done = new Promise<WriteResult>((resolve) => this.#queue.push({ request, resolve }));
    this.#pump();
    return { accepted: true, coalesced: queued >= 0, done };
  }

  whenNotFull(): Promise<void> {
    if (this.#queue.length < this.#capacity) return Promise.resolve();
    return new Promise((resolve) => this.#roomWaiters.push(resolve));
  }

  cancel(key: string, reason: string): void {
    this.#queue = this.#queue.filter((q) => {
      if (q.request.key !== key) return true;
      q.resolve({ result: 'cancelled', message: reason });
      return false;
    });
    this.#controllers.get(key)?.abort(new Error(reason));
  }

  async close(options: { cancelQueued: boolean } = { cancelQueued: true }): Promise<void> {
    this.#closed = true;
    if (options.cancelQueued) {
      for (const q of this.#queue) q.resolve({ result: 'cancelled', message: 'dispatcher closed' });
      this.#queue = [];
    }
    while (this.#running > 0 || this.#queue.length > 0) await new Promise((r) => setTimeout(r, 20));
  }

  #pump(): void {
    while (this.#running < this.#workers) {
      const index = this.#queue.findIndex((q) => !this.#busyKeys.has(q.request.key));
      if (index < 0) return;
      const [item] = this.#queue.splice(index, 1);
      if (!item) return;
      for (const waiter of this.#roomWaiters.splice(0)) waiter();
      this.#running += 1;
      this.#busyKeys.add(item.request.key);
      void this.#run(item.request).then((result) => {
        this.#running -= 1;
        this.#busyKeys.delete(item.request.key);
        item.resolve(result);
        this.#pump();
      });
    }
  }

  async #run(request: WriteRequest): Promise<WriteResult> {
    for (let attempt = 1; ; attempt++) {
      if (Date.now() > request.deadline)
        return { result: 'expired', message: 'deadline passed in the queue' };
      const controller = new AbortController();
      this.#controllers.set(request.key, controller);
      try {
        const { resourceVersion } = await this.#execute(request, controller.signal);
        return { result: 'succeeded', resourceVersion };
      } catch (error) {
        const e = error as { conflict?: boolean; statusCode?: number; message?: string };
        if (e.conflict) return { result: 'conflict', message: e.message ?? 'conflict' };
        if (e.statusCode === 403 || e.statusCode === 404 || e.statusCode === 422) {
          return { result: 'failed', code: e.statusCode, message: e.message ?? 'failed' };
        }
        if (controller.signal.aborted)
          return { result: 'cancelled', message: String(controller.signal.reason) };
        if (attempt >= 3)
          return {
            result: 'failed',
            ...(e.statusCode ? { code: e.statusCode } : {}),
            message: e.message ?? String(error),
          };
        await new Promise((r) => setTimeout(r, 100 * 2 ** attempt));
      } finally {
        this.#controllers.delete(request.key);
      }
    }
  }
}
