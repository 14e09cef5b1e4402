/**
 * The smallest honest adapters for pieces the gate-release e2e needs that had not
 * landed when it was written. Each is real I/O against the real parts (the API server
 * through the real write executor, the real Git server), only simpler than the
 * production module it stands in for. Replace each with the real module once it lands.
 *
 * - `SimpleDispatcher` for src/dispatch/queue.ts: bounded, one write in flight per key,
 *   a fixed number of workers, 409/failed-patch-test -> conflict, 403/404/422 -> failed,
 *   anything else retried with backoff (3 attempts), deadline -> expired. No priorities,
 *   no tenant round-robin, no aging.
 * - `GitPolicySource` for the src/policy/ loader: the compiled `Policy` serialised as
 *   `policy.json` in a real Git repo, fetched with isomorphic-git every `intervalMs`; a
 *   new commit becomes a new snapshot, a broken one keeps the last good snapshot.
 * - `ApiEventSink` for src/cluster/events.ts: core/v1 Events created as the tollgate
 *   identity, at most 4 at once; beyond a backlog of 500 new events are dropped and
 *   counted (a recorder that blocks the loop would be worse).
 */
import { mkdtempSync } from 'node:fs';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import git from 'isomorphic-git';
import http from 'isomorphic-git/http/node';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type {
  Dispatcher,
  EnqueueResult,
  WriteExecutor,
  WriteRequest,
  WriteResult,
} from '../../../src/dispatch/types.ts';
import type { Policy, Tenant } from '../../../src/policy/model.ts';

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

/** A Policy as JSON: the tenants map becomes an array. */
export function policyToJson(policy: Policy): string {
  return JSON.stringify({ ...policy, tenants: [...policy.tenants.values()] }, null, 2);
}

export function policyFromJson(text: string, commit: string): Policy {
  const raw = JSON.parse(text) as Omit<Policy, 'tenants' | 'commit'> & { tenants: Tenant[] };
  return { ...raw, commit, tenants: new Map(raw.tenants.map((t) => [t.name, t])) };
}

export class GitPolicySource {
  readonly #url: string;
  readonly #token: string;
  readonly #gitdir = mkdtempSync(join(tmpdir(), 'tollgate-policy-'));
  #policy: Policy | undefined;
  #initialised = false;
  #timer: NodeJS.Timeout | undefined;
  #onError: (error: Error) => void;

  constructor(url: string, token: string, onError: (error: Error) => void = () => undefined) {
    this.#url = url;
    this.#token = token;
    this.#onError = onError;
  }

  get current(): Policy | undefined {
    return this.#policy;
  }

  async refresh(): Promise<Policy | undefined> {
    if (!this.#initialised) {
      await git.init({ fs, gitdir: this.#gitdir, bare: true, defaultBranch: 'main' });
      await git.addRemote({
        fs,
        gitdir: this.#gitdir,
        remote: 'origin',
        url: this.#url,
        force: true,
      });
      this.#initialised = true;
    }
    const fetched = await git.fetch({
      fs,
      http,
      gitdir: this.#gitdir,
      remote: 'origin',
      ref: 'main',
      singleBranch: true,
      depth: 1,
      onAuth: () => ({ username: 'x', password: this.#token }),
    });
    const oid = fetched.fetchHead;
    if (!oid) throw new Error(`${this.#url}: branch main not found`);
    if (this.#policy?.commit === oid) return this.#policy;
    try {
      const { blob } = await git.readBlob({
        fs,
        gitdir: this.#gitdir,
        oid,
        filepath: 'policy.json',
      });
      this.#policy = policyFromJson(new TextDecoder().decode(blob), oid);
    } catch (error) {
      this.#onError(
        new Error(
          `policy.json at ${oid}: ${(error as Error).message}; keeping the last good policy`,
        ),
      );
    }
    return this.#policy;
  }

  start(intervalMs: number): void {
    const tick = () =>
      void this.refresh()
        .catch((error: Error) => this.#onError(error))
        .finally(() => {
          this.#timer = setTimeout(tick, intervalMs);
          this.#timer.unref();
        });
    tick();
  }

  stop(): void {
    if (this.#timer) clearTimeout(this.#timer);
  }
}

export class ApiEventSink {
  readonly #core: CoreV1Api;
  #running = 0;
  #backlog: (() => Promise<unknown>)[] = [];
  dropped = 0;
  created = 0;

  constructor(kubeConfig: KubeConfig) {
    this.#core = kubeConfig.makeApiClient(CoreV1Api);
  }

  readonly emit = (
    pod: V1Pod,
    event: { type: 'Normal' | 'Warning'; reason: string; message: string },
  ): void => {
    if (this.#backlog.length > 500) {
      this.dropped += 1;
      return;
    }
    const namespace = pod.metadata?.namespace ?? 'default';
    const now = new Date();
    this.#backlog.push(() =>
      this.#core.createNamespacedEvent({
        namespace,
        body: {
          metadata: { generateName: `${pod.metadata?.name}.`, namespace },
          involvedObject: {
            kind: 'Pod',
            apiVersion: 'v1',
            namespace,
            name: pod.metadata?.name,
            uid: pod.metadata?.uid,
          },
          reason: event.reason,
          message: event.message,
          type: event.type,
          source: { component: 'tollgate' },
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      }),
    );
    this.#pump();
  };

  #pump(): void {
    while (this.#running < 4 && this.#backlog.length > 0) {
      const job = this.#backlog.shift() as () => Promise<unknown>;
      this.#running += 1;
      void job()
        .then(() => (this.created += 1))
        .catch(() => (this.dropped += 1))
        .finally(() => {
          this.#running -= 1;
          this.#pump();
        });
    }
  }
}
