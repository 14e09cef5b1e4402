/**
 * The live `ClusterView`: one informer for pods, one for nodes, one for the
 * ResourceQuotas of the managed namespaces, and one per (apiVersion, kind, namespace)
 * of the objects policies reference.
 *
 * Managed namespaces: the pod informer watches all namespaces and keeps only pods in
 * the managed set; a new set relists that one informer (atomic replace: pods of
 * added namespaces appear as ADDED, pods of dropped ones as DELETED). Chosen over one
 * namespaced watch per managed namespace because the connection count and the
 * relist-after-restart load on the API server stay at one regardless of how many
 * namespaces policy manages, a policy change needs no watch bookkeeping, and the
 * cluster role in deploy/ already grants cluster-wide pod list/watch. The price:
 * the API server streams events of unmanaged namespaces, which are decoded and
 * dropped before the store (memory stays bounded by the managed set).
 *
 * ResourceQuotas: handled like pods (one cluster-wide watch, kept only for managed
 * namespaces, relisted with them), because resize must not plan a step the quota
 * admission would refuse. Quota changes are not passed to `onChange` listeners: no loop
 * reacts to them (resize reads them on its timer). The view is not synced until quotas
 * are listed, so a quota that cannot be read is never taken for "no quota".
 *
 * Referenced objects: `watchObjects(refs)` diffs the wanted set against the running
 * informers; each informer watches one namespace (namespaced endpoint) or the
 * cluster scope, and keeps only the referenced names. A kind policy references is
 * resolved to its plural by discovery; a kind the API server does not serve (a typo, a
 * CRD not installed) or that tollgate may not list makes its informer retry with
 * backoff. Readiness is per reference: `synced`/`whenSynced` cover pods, nodes and
 * quotas only, so one tenant's unreadable reference never stalls the others, and
 * `objectProblem(ref)` says why a reference cannot be judged yet (a condition on an
 * object that cannot be read is held with that reason, never judged "absent").
 * A cluster-scoped kind named from a namespaced place (a policy cannot say which a kind
 * is) is found by its bare name in the informer that lists it.
 */
import type {
  KubeConfig,
  KubernetesObject,
  V1Node,
  V1Pod,
  V1ResourceQuota,
} from '@kubernetes/client-node';
import { systemClock, type Clock } from '../lib/clock.ts';
import { silentLogger, type Logger } from '../observe/log.ts';
import type { BackoffPolicy } from './backoff.ts';
import { CacheLagMeter } from './cache-lag.ts';
import { cacheLagSeconds } from './stale-guard-metrics.ts';
import { Informer } from './informer.ts';
import { trimPod } from './trim.ts';
import {
  countRestart,
  reportInformerStats,
  type unreadableReasons,
  type ViewResource,
} from './informer-metrics.ts';
import {
  createResourceSource,
  type ResourceSource,
  type ResourceTarget,
  type SourceOptions,
} from './source.ts';
import { statusCodeOf } from './errors.ts';
import type { StoreChange } from './store.ts';
import { objectKey, type ClusterView, type ObjectReference, type ViewChange } from './types.ts';

export interface LiveClusterViewOptions {
  readonly kubeConfig: KubeConfig;
  /** Namespaces whose pods the view keeps; undefined = all namespaces. */
  readonly namespaces?: readonly string[];
  readonly podLabelSelector?: string;
  readonly nodeLabelSelector?: string;
  readonly pageSize?: number;
  readonly watchTimeoutSeconds?: () => number;
  readonly backoff?: BackoffPolicy;
  readonly sourceOptions?: SourceOptions;
  /** Replaces how a target becomes a source (tests wrap the real source). */
  readonly sourceFactory?: (target: ResourceTarget) => ResourceSource;
  readonly clock?: Clock;
  readonly logger?: Logger;
}

function groupKey(ref: ObjectReference): string {
  return `${ref.apiVersion}|${ref.kind}|${ref.namespace ?? ''}`;
}

/** Numeric comparison of resourceVersions (etcd revisions); a non-numeric one sorts first. */
function olderVersion(a: string | undefined, b: string | undefined): string | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  try {
    return BigInt(a) <= BigInt(b) ? a : b;
  } catch {
    return a;
  }
}

interface ObjectGroup {
  readonly informer: Informer;
  names: ReadonlySet<string>;
}

export class LiveClusterView implements ClusterView {
  /**
   * The pod informer's lag behind the API server, measured on tollgate's own pod writes
   * (feed it with `measureCacheLag` around the write executor); every measurement is
   * observed in tollgate_cache_lag_seconds.
   */
  readonly cacheLag: CacheLagMeter;
  readonly #options: LiveClusterViewOptions;
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #pods: Informer;
  readonly #nodes: Informer;
  readonly #quotas: Informer;
  readonly #objects = new Map<string, ObjectGroup>();
  readonly #listeners = new Set<(change: ViewChange) => void>();
  #namespaces: ReadonlySet<string> | undefined;
  #started = false;
  #stopped = false;
  #unreport: (() => void) | undefined;

  constructor(options: LiveClusterViewOptions) {
    this.#options = options;
    this.#log = options.logger ?? silentLogger;
    this.#clock = options.clock ?? systemClock;
    this.#namespaces = options.namespaces ? new Set(options.namespaces) : undefined;
    this.cacheLag = new CacheLagMeter({
      clock: this.#clock,
      onMeasured: (ms) => cacheLagSeconds.observe(ms / 1000),
    });
    this.#pods = this.#informer(
      'pods',
      { apiVersion: 'v1', kind: 'Pod', labelSelector: options.podLabelSelector },
      this.#namespaceFilter(),
    );
    this.#nodes = this.#informer('nodes', {
      apiVersion: 'v1',
      kind: 'Node',
      labelSelector: options.nodeLabelSelector,
    });
    this.#quotas = this.#informer(
      'resourcequotas',
      { apiVersion: 'v1', kind: 'ResourceQuota' },
      this.#namespaceFilter(),
      false,
    );
  }

  start(): void {
    if (this.#started) return;
    this.#started = true;
    this.#unreport = reportInformerStats(
      {
        objects: (resource) =>
          this.#informersOf(resource).reduce((sum, informer) => sum + informer.size, 0),
        lastEventAt: (resource) => {
          const times = this.#informersOf(resource).map((informer) => informer.lastEventAt);
          if (times.length === 0 || times.some((t) => t === undefined)) return undefined;
          return Math.min(...(times as number[]));
        },
        unreadableReferences: () => this.references().flatMap((r) => (r.ready ? [] : [r.reason])),
      },
      () => this.#clock.now(),
    );
    this.#pods.start();
    this.#nodes.start();
    this.#quotas.start();
    for (const group of this.#objects.values()) group.informer.start();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unreport?.();
    await Promise.all(this.#allInformers().map((i) => i.stop()));
  }

  /**
   * Pods, nodes and quotas are listed under the current managed namespaces: what every
   * decision needs. False again from `setNamespaces` until the relist for the new set has
   * completed (the catch-up barrier: a pass never charges a tenant's budget without the
   * pods of a namespace it just gained). Referenced objects are judged per reference
   * (`objectProblem`).
   */
  get synced(): boolean {
    return this.#coreInformers().every((informer) => informer.current);
  }

  /**
   * Waits for pods, nodes and quotas only. A referenced kind nobody can read never
   * holds this up; the pods that depend on it are held by their own condition.
   */
  async whenSynced(signal?: AbortSignal): Promise<void> {
    await Promise.all(this.#coreInformers().map((informer) => informer.whenCurrent(signal)));
  }

  /** Undefined when the reference's informer has listed; otherwise why its objects cannot be judged. */
  objectProblem(ref: ObjectReference): string | undefined {
    const group = this.#objects.get(groupKey(ref));
    if (!group)
      return `${referenceName(ref)} is not watched (the policy naming it is not applied yet)`;
    return readinessProblem(group.informer);
  }

  /** Every watched reference group with its readiness, for /readyz, metrics and logs. */
  references(): ReferenceStatus[] {
    return [...this.#objects.values()].map(({ informer }) => {
      const problem = readinessProblem(informer);
      return problem === undefined
        ? { reference: informer.description, ready: true }
        : {
            reference: informer.description,
            ready: false,
            reason: unreadableReason(informer.lastError),
            problem,
          };
    });
  }

  pods(): Iterable<V1Pod> {
    return this.#pods.values() as IterableIterator<V1Pod>;
  }
  pod(namespace: string, name: string): V1Pod | undefined {
    return this.#pods.get(objectKey(namespace, name)) as V1Pod | undefined;
  }
  nodes(): Iterable<V1Node> {
    return this.#nodes.values() as IterableIterator<V1Node>;
  }
  /** The ResourceQuotas of a managed namespace (empty for an unmanaged one). */
  resourceQuotas(namespace: string): V1ResourceQuota[] {
    const out: V1ResourceQuota[] = [];
    for (const quota of this.#quotas.values())
      if (quota.metadata?.namespace === namespace) out.push(quota as V1ResourceQuota);
    return out;
  }
  object(ref: ObjectReference): KubernetesObject | undefined {
    const informer = this.#objects.get(groupKey(ref))?.informer;
    // A cluster-scoped object is stored under its bare name, whatever namespace named it.
    return informer?.get(objectKey(ref.namespace, ref.name)) ?? informer?.get(ref.name);
  }

  /** For 'objects', the oldest version among the object informers: the view has seen everything up to it. */
  lastResourceVersion(resource: ViewResource): string | undefined {
    if (resource === 'pods') return this.#pods.lastResourceVersion;
    if (resource === 'nodes') return this.#nodes.lastResourceVersion;
    if (resource === 'resourcequotas') return this.#quotas.lastResourceVersion;
    let oldest: string | undefined;
    for (const { informer } of this.#objects.values()) {
      if (informer.lastResourceVersion === undefined) return undefined;
      oldest = olderVersion(oldest, informer.lastResourceVersion);
    }
    return oldest;
  }

  onChange(listener: (change: ViewChange) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Lists pods, nodes and quotas afresh (a new leader term): `synced` is false until those
   * lists are in, so a pass waits for them (the catch-up barrier of a term: a tenant is
   * never planned on a watch that has not delivered the previous leader's releases yet).
   */
  relist(): void {
    for (const informer of this.#coreInformers()) informer.relist();
  }

  /** Replaces the managed namespaces (undefined = all); relists the pod informer if the set changed. */
  setNamespaces(namespaces: readonly string[] | undefined): void {
    const next = namespaces ? new Set(namespaces) : undefined;
    const same =
      next === undefined
        ? this.#namespaces === undefined
        : this.#namespaces !== undefined &&
          next.size === this.#namespaces.size &&
          [...next].every((n) => this.#namespaces?.has(n));
    if (same) return;
    this.#namespaces = next;
    this.#pods.setFilter(this.#namespaceFilter());
    this.#quotas.setFilter(this.#namespaceFilter());
  }

  /**
   * Makes the view watch exactly these referenced objects: informers for groups no
   * longer referenced stop (their objects leave the view without DELETED events,
   * since they were not deleted), new groups start, and groups whose name set changed
   * relist with the new names.
   */
  watchObjects(refs: readonly ObjectReference[]): void {
    if (this.#stopped) return;
    const wanted = new Map<string, { target: ResourceTarget; names: Set<string> }>();
    for (const ref of refs) {
      const key = groupKey(ref);
      const entry = wanted.get(key) ?? {
        target: { apiVersion: ref.apiVersion, kind: ref.kind, namespace: ref.namespace },
        names: new Set<string>(),
      };
      entry.names.add(ref.name);
      wanted.set(key, entry);
    }
    for (const [key, group] of this.#objects) {
      if (!wanted.has(key)) {
        this.#objects.delete(key);
        // Stopping wakes anyone still waiting on it; a failing stop is logged, never left unhandled.
        group.informer
          .stop()
          .catch((error: unknown) =>
            this.#log.warn(
              { err: String(error), reference: key },
              'stopping a reference informer failed',
            ),
          );
      }
    }
    for (const [key, { target, names }] of wanted) {
      const existing = this.#objects.get(key);
      if (existing) {
        const same =
          existing.names.size === names.size && [...names].every((n) => existing.names.has(n));
        if (!same) {
          existing.names = names;
          existing.informer.setFilter(nameFilter(names));
        }
        continue;
      }
      const informer = this.#informer('objects', target, nameFilter(names));
      this.#objects.set(key, { informer, names });
      if (this.#started) informer.start();
    }
  }

  #namespaceFilter(): (object: KubernetesObject) => boolean {
    const namespaces = this.#namespaces;
    if (!namespaces) return () => true;
    return (object) => namespaces.has(object.metadata?.namespace ?? '');
  }

  #informer(
    resource: ViewResource,
    target: ResourceTarget,
    filter?: (object: KubernetesObject) => boolean,
    emit = true,
  ): Informer {
    const options = this.#options;
    const source = options.sourceFactory
      ? options.sourceFactory(target)
      : createResourceSource(options.kubeConfig, target, options.sourceOptions);
    const informer = new Informer({
      source,
      filter,
      // The view's pods keep only what tollgate reads of a pod; referenced objects keep their fields.
      ...(resource === 'pods' ? { transform: trimPod } : {}),
      pageSize: options.pageSize,
      watchTimeoutSeconds: options.watchTimeoutSeconds,
      backoff: options.backoff,
      clock: this.#clock,
      logger: this.#log,
      hooks: {
        restarted: (reason, error) => {
          countRestart(resource, reason);
          if (error) this.#log.debug({ resource, reason, err: error.message }, 'informer restart');
        },
        ...(resource === 'pods'
          ? { progressed: (version: string) => this.cacheLag.progressed(version) }
          : {}),
      },
    });
    if (emit) informer.onChange((change) => this.#emit(resource as ViewChange['resource'], change));
    return informer;
  }

  #emit(resource: ViewChange['resource'], change: StoreChange): void {
    const viewChange: ViewChange = {
      type: change.type,
      resource,
      key: change.key,
      object: change.object,
      ...(change.previous ? { previous: change.previous } : {}),
    };
    for (const listener of this.#listeners) {
      try {
        listener(viewChange);
      } catch (error) {
        this.#log.error(
          { err: error instanceof Error ? error.message : String(error), key: change.key },
          'view listener threw',
        );
      }
    }
  }

  #informersOf(resource: ViewResource): Informer[] {
    if (resource === 'pods') return [this.#pods];
    if (resource === 'nodes') return [this.#nodes];
    if (resource === 'resourcequotas') return [this.#quotas];
    return [...this.#objects.values()].map((group) => group.informer);
  }

  #coreInformers(): Informer[] {
    return [this.#pods, this.#nodes, this.#quotas];
  }

  #allInformers(): Informer[] {
    return [
      this.#pods,
      this.#nodes,
      this.#quotas,
      ...[...this.#objects.values()].map((group) => group.informer),
    ];
  }
}

/** Why a referenced kind cannot be read, as an alert can group it. */
export type UnreadableReason = (typeof unreadableReasons)[number];

export type ReferenceStatus =
  | { readonly reference: string; readonly ready: true }
  | {
      readonly reference: string;
      readonly ready: false;
      readonly reason: UnreadableReason;
      readonly problem: string;
    };

function referenceName(ref: ObjectReference): string {
  return `${ref.kind}.${ref.apiVersion}${ref.namespace ? ` in ${ref.namespace}` : ''}`;
}

function unreadableReason(error: Error | undefined): UnreadableReason {
  if (error === undefined) return 'listing';
  const code = statusCodeOf(error);
  if (code === 403 || code === 401) return 'forbidden';
  if (code === 404 || /does not serve/.test(error.message)) return 'unserved';
  return 'failing';
}

function readinessProblem(informer: Informer): string | undefined {
  if (informer.synced) return undefined;
  const error = informer.lastError;
  const what = informer.description;
  switch (unreadableReason(error)) {
    case 'listing':
      return `${what} is not listed yet`;
    case 'unserved':
      return `${what} cannot be read: the API server does not serve this kind (${error?.message})`;
    case 'forbidden':
      return `${what} cannot be read: tollgate may not list it (${error?.message})`;
    case 'failing':
      return `${what} cannot be read: ${error?.message}`;
  }
}

function nameFilter(names: ReadonlySet<string>): (object: KubernetesObject) => boolean {
  return (object) => names.has(object.metadata?.name ?? '');
}

export function createClusterView(options: LiveClusterViewOptions): LiveClusterView {
  return new LiveClusterView(options);
}
