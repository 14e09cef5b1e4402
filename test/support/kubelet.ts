/**
 * A simulated kubelet for the local control plane: it owns a set of Node objects and
 * writes what a real kubelet writes, so the real scheduler, the real apiserver
 * validation of `pods/resize` and tollgate all meet true API objects.
 *
 * - Nodes: capacity = allocatable (cpu, memory, pods, ephemeral-storage), Ready=True,
 *   `status.images` (changed only through addNode/setImages, so image-warmth tests are
 *   deterministic: starting a pod does not "pull" its image), Lease renewals in
 *   kube-node-lease.
 * - Pods bound to its nodes become Running with container statuses that carry
 *   `resources` and `allocatedResources` (without them the apiserver refuses resizes),
 *   pod-level `resources`/`allocatedResources` when `spec.resources` is set, and
 *   `observedGeneration`. Pods being deleted are removed with grace period 0 once seen.
 * - A pod annotated `kubelet.tollgate.test/fails: ImagePullBackOff` stays Pending with
 *   its containers waiting for that reason; `CrashLoopBackOff` runs with its containers
 *   waiting in back-off after 3 restarts that exited 1 (not ready). Written once.
 * - In-place resize as the kubelet does it: a spec that differs from the actual
 *   resources is checked against the node: above allocatable → PodResizePending
 *   reason Infeasible + Warning event ResizeInfeasible; fits the node but not beside
 *   the allocations of the other pods → PodResizePending reason Deferred, retried
 *   whenever a pod on that node changes and every `deferredRetryMs`; otherwise accepted:
 *   PodResizeInProgress + Normal event ResizeStarted, `allocatedResources` updated, then
 *   after `actuationDelayMs` the actual `resources` and the condition cleared. Decisions
 *   for one node are serialized and remembered in memory, so two resizes never both take
 *   the same free room because the informer cache lagged behind our own writes.
 *
 * Efficiency: one pod informer for the whole cluster, a keyed work queue (a burst of
 * events for one pod collapses to one status write) drained by `concurrency` workers;
 * status writes are merge patches guarded by resourceVersion and retried on conflict.
 */
import { randomBytes } from 'node:crypto';
import {
  CoordinationV1Api,
  CoreV1Api,
  ListWatch,
  PatchStrategy,
  Watch,
  setHeaderOptions,
  type KubeConfig,
  type V1ContainerStatus,
  type V1Node,
  type V1Pod,
  type V1PodCondition,
  type V1ResourceRequirements,
} from '@kubernetes/client-node';
import { toStoredAmount } from '../../src/lib/quantity.ts';

export interface SimulatedNodeSpec {
  cpu: string;
  memory: string;
  /** Images present on the node (status.images). */
  images?: string[];
  /** Pod capacity (default 110). */
  pods?: number;
  labels?: Record<string, string>;
  /**
   * status.declaredFeatures: the apiserver refuses pod updates that need a feature the
   * node does not declare (e.g. pod-level resize). Default: what a 1.37 kubelet with
   * default feature gates declares; pass [] to act as an older kubelet.
   */
  declaredFeatures?: string[];
}

/** Features a v1.37 kubelet declares with default feature gates (component-helpers/nodedeclaredfeatures). */
export const defaultDeclaredFeatures: readonly string[] = [
  'ExtendWebSocketsToKubelet',
  'InPlacePodLevelResourcesVerticalScaling',
  'InPlacePodVerticalScalingInitContainers',
  'RestartAllContainersOnContainerExits',
];

export interface SimulatedKubeletOptions {
  /** Parallel API writes (default 8). */
  concurrency?: number;
  /** Time between accepting a resize and reporting it actuated (default 300ms). */
  actuationDelayMs?: number;
  /** Periodic retry of Deferred resizes (default 2000ms); pod changes also retry at once. */
  deferredRetryMs?: number;
  /** Lease renewal period (default 10000ms). */
  leaseRenewMs?: number;
  /** Receives a line per notable action and every failed write. */
  log?: (line: string) => void;
}

type Amounts = { cpu: number; memory: number };
type Resources = { requests?: Record<string, string>; limits?: Record<string, string> };
interface Accepted {
  generation: number;
  /** Epoch ms after which the resize is reported actuated. */
  due: number;
  containers: Map<string, Resources>;
  pod: Resources | undefined;
}

type Failure = 'ImagePullBackOff' | 'CrashLoopBackOff';
const failureAnnotation = 'kubelet.tollgate.test/fails';

/** How the pod's containers fail to start, when its annotation says so. */
function simulatedFailure(pod: V1Pod): Failure | undefined {
  const value = pod.metadata?.annotations?.[failureAnnotation];
  return value === 'ImagePullBackOff' || value === 'CrashLoopBackOff' ? value : undefined;
}

/** The pod conditions this kubelet (and the scheduler) write; a merge patch of the list keeps the others. */
const kubeletConditions = new Set([
  'PodReadyToStartContainers',
  'Initialized',
  'Ready',
  'ContainersReady',
  'PodScheduled',
]);
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const applyPatch = setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply);
const resizeConditionTypes = new Set(['PodResizePending', 'PodResizeInProgress']);
const nowIso = (): string => new Date().toISOString().replace(/\.\d+Z$/, 'Z');
const keyOf = (namespace: string, name: string): string => `${namespace}/${name}`;
const errorCode = (error: unknown): number | undefined => (error as { code?: number }).code;

/** Only cpu and memory are resizable; the kubelet reports exactly those. */
function pickResources(resources: V1ResourceRequirements | undefined): Resources {
  const pick = (list: Record<string, string> | undefined): Record<string, string> | undefined => {
    if (!list) return undefined;
    const out: Record<string, string> = {};
    for (const name of ['cpu', 'memory'])
      if (list[name] !== undefined) out[name] = String(list[name]);
    return Object.keys(out).length > 0 ? out : undefined;
  };
  const requests = pick(resources?.requests as Record<string, string> | undefined);
  const limits = pick(resources?.limits as Record<string, string> | undefined);
  return { ...(requests ? { requests } : {}), ...(limits ? { limits } : {}) };
}

function sameList(
  a: Record<string, string> | undefined,
  b: Record<string, string> | undefined,
): boolean {
  for (const name of ['cpu', 'memory']) {
    const left = a?.[name];
    const right = b?.[name];
    if (left === undefined && right === undefined) continue;
    if (left === undefined || right === undefined) return false;
    if (toStoredAmount(name, left) !== toStoredAmount(name, right)) return false;
  }
  return true;
}

const sameResources = (a: Resources | undefined, b: Resources | undefined): boolean =>
  sameList(a?.requests, b?.requests) && sameList(a?.limits, b?.limits);

function amountsOf(list: Record<string, string> | undefined): Amounts {
  return {
    cpu: list?.cpu !== undefined ? toStoredAmount('cpu', list.cpu) : 0,
    memory: list?.memory !== undefined ? toStoredAmount('memory', list.memory) : 0,
  };
}

const add = (a: Amounts, b: Amounts): Amounts => ({
  cpu: a.cpu + b.cpu,
  memory: a.memory + b.memory,
});

/** What the pod asks for: pod-level requests where set, else the sum of its containers, plus overhead. */
function desiredRequests(pod: V1Pod): Amounts {
  const podLevel = pickResources(pod.spec?.resources).requests;
  let total: Amounts = { cpu: 0, memory: 0 };
  for (const container of pod.spec?.containers ?? [])
    total = add(total, amountsOf(pickResources(container.resources).requests));
  for (const container of pod.spec?.initContainers ?? []) {
    if (container.restartPolicy === 'Always')
      total = add(total, amountsOf(pickResources(container.resources).requests));
  }
  const atPodLevel = amountsOf(podLevel);
  if (podLevel?.cpu !== undefined) total.cpu = atPodLevel.cpu;
  if (podLevel?.memory !== undefined) total.memory = atPodLevel.memory;
  return add(total, amountsOf(pod.spec?.overhead as Record<string, string> | undefined));
}

/** What the node has granted the pod: allocatedResources in status, else its spec requests. */
function allocatedRequests(pod: V1Pod): Amounts {
  const statuses = new Map((pod.status?.containerStatuses ?? []).map((s) => [s.name, s]));
  if (statuses.size === 0) return desiredRequests(pod);
  const podLevel = pod.status?.allocatedResources as Record<string, string> | undefined;
  let total: Amounts = { cpu: 0, memory: 0 };
  for (const container of pod.spec?.containers ?? []) {
    const allocated = statuses.get(container.name)?.allocatedResources as
      Record<string, string> | undefined;
    total = add(total, amountsOf(allocated ?? pickResources(container.resources).requests));
  }
  if (podLevel?.cpu !== undefined) total.cpu = toStoredAmount('cpu', podLevel.cpu);
  if (podLevel?.memory !== undefined) total.memory = toStoredAmount('memory', podLevel.memory);
  return add(total, amountsOf(pod.spec?.overhead as Record<string, string> | undefined));
}

const isTerminal = (pod: V1Pod): boolean =>
  pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';

/** A keyed queue: a key is never handled by two workers, and re-added keys run once more. */
class KeyedQueue {
  readonly #pending = new Set<string>();
  readonly #active = new Set<string>();
  readonly #again = new Set<string>();
  readonly #handle: (key: string) => Promise<void>;
  readonly #limit: number;
  #idleWaiters: Array<() => void> = [];

  constructor(limit: number, handle: (key: string) => Promise<void>) {
    this.#limit = limit;
    this.#handle = handle;
  }

  add(key: string): void {
    if (this.#active.has(key)) this.#again.add(key);
    else this.#pending.add(key);
    this.#pump();
  }

  get idle(): boolean {
    return this.#pending.size === 0 && this.#active.size === 0;
  }

  whenIdle(): Promise<void> {
    if (this.idle) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  #pump(): void {
    while (this.#active.size < this.#limit && this.#pending.size > 0) {
      const key = this.#pending.values().next().value as string;
      this.#pending.delete(key);
      this.#active.add(key);
      void this.#handle(key).finally(() => {
        this.#active.delete(key);
        if (this.#again.delete(key)) this.#pending.add(key);
        this.#pump();
        if (this.idle) {
          const waiters = this.#idleWaiters;
          this.#idleWaiters = [];
          for (const resolve of waiters) resolve();
        }
      });
    }
  }
}

/** Serializes resize decisions per node. */
class NodeLocks {
  readonly #tails = new Map<string, Promise<void>>();

  async run<T>(node: string, work: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(node) ?? Promise.resolve();
    let release!: () => void;
    const next = new Promise<void>((resolve) => (release = resolve));
    this.#tails.set(node, next);
    await previous;
    try {
      return await work();
    } finally {
      release();
      if (this.#tails.get(node) === next) this.#tails.delete(node);
    }
  }
}

export class SimulatedKubelet {
  readonly #core: CoreV1Api;
  readonly #coordination: CoordinationV1Api;
  readonly #kc: KubeConfig;
  readonly #nodes = new Map<string, SimulatedNodeSpec & { failed: boolean; index: number }>();
  readonly #actuationDelayMs: number;
  readonly #deferredRetryMs: number;
  readonly #leaseRenewMs: number;
  readonly #log: (line: string) => void;
  readonly #queue: KeyedQueue;
  readonly #locks = new NodeLocks();
  /** Allocations decided here and not yet visible in the informer cache, by pod uid. */
  readonly #allocated = new Map<string, Amounts>();
  /** Accepted resizes waiting for actuation, by pod uid. */
  readonly #accepted = new Map<string, Accepted>();
  /** (uid, generation, reason) for which an event was already emitted. */
  readonly #emitted = new Set<string>();
  readonly #podsByNode = new Map<string, Set<string>>();
  /** Pods whose next resize actuations fail (failResize hook), by namespace/name. */
  readonly #actuationFailures = new Map<string, { message: string; remaining: number }>();
  /** Pods whose last seen status holds PodResizePending reason Deferred. */
  readonly #deferred = new Set<string>();
  readonly #timers = new Set<NodeJS.Timeout>();
  #informer: ListWatch<V1Pod> | undefined;
  #started = false;
  #stopped = false;
  #nextPodIp = 2;

  constructor(kc: KubeConfig, options: SimulatedKubeletOptions = {}) {
    this.#kc = kc;
    this.#core = kc.makeApiClient(CoreV1Api);
    this.#coordination = kc.makeApiClient(CoordinationV1Api);
    this.#actuationDelayMs = options.actuationDelayMs ?? 300;
    this.#deferredRetryMs = options.deferredRetryMs ?? 2000;
    this.#leaseRenewMs = options.leaseRenewMs ?? 10_000;
    this.#log = options.log ?? (() => undefined);
    this.#queue = new KeyedQueue(options.concurrency ?? 8, (key) => this.#reconcile(key));
  }

  /** Registers a node; creates it at once when started, else in start(). */
  async addNode(name: string, spec: SimulatedNodeSpec): Promise<void> {
    this.#nodes.set(name, { ...spec, failed: false, index: this.#nodes.size + 1 });
    if (this.#started) await this.#createNode(name);
  }

  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    await Promise.all([...this.#nodes.keys()].map((name) => this.#createNode(name)));
    const listFn = () => this.#core.listPodForAllNamespaces({ fieldSelector: 'spec.nodeName!=' });
    const informer = new ListWatch<V1Pod>(
      '/api/v1/pods',
      new Watch(this.#kc),
      listFn,
      false,
      undefined,
      'spec.nodeName!=',
    );
    const onChange = (pod: V1Pod): void => this.#observe(pod, false);
    informer.on('add', onChange);
    informer.on('update', onChange);
    informer.on('delete', (pod) => this.#observe(pod, true));
    informer.on('error', (error) => {
      if (this.#stopped) return;
      this.#log(`pod watch failed (${(error as Error)?.message ?? error}); relisting in 1s`);
      this.#every(1000, () => void informer.start().catch(() => undefined), true);
    });
    this.#informer = informer;
    await informer.start();
    this.#every(this.#leaseRenewMs, () => void this.#renewLeases());
    this.#every(this.#deferredRetryMs, () => this.#retryDeferred());
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    await this.#informer?.stop();
    await this.#queue.whenIdle();
  }

  /** Resolves when no pod work is queued or running (tests use it to let the kubelet settle). */
  idle(): Promise<void> {
    return this.#queue.whenIdle();
  }

  async setImages(node: string, images: string[]): Promise<void> {
    const spec = this.#requireNode(node);
    spec.images = [...images];
    await this.#core.patchNodeStatus(
      { name: node, body: { status: { images: imageList(images) } } },
      mergePatch,
    );
  }

  /**
   * Reports a container killed for exceeding its memory limit and restarted, as the
   * kubelet does: lastState.terminated reason OOMKilled (exit 137), restartCount + 1.
   */
  async oomKill(namespace: string, name: string, container: string): Promise<void> {
    for (let attempt = 0; ; attempt += 1) {
      const pod = await this.#core.readNamespacedPodStatus({ name, namespace });
      const statuses = pod.status?.containerStatuses ?? [];
      const target = statuses.find((s) => s.name === container);
      if (!target)
        throw new Error(
          `oomKill: pod ${namespace}/${name} has no running container "${container}" (has ${statuses.map((s) => s.name).join(', ') || 'none'})`,
        );
      const killedAt = nowIso();
      const startedAt = target.state?.running?.startedAt;
      const updated: V1ContainerStatus[] = statuses.map((s) =>
        s.name !== container
          ? s
          : {
              ...s,
              restartCount: s.restartCount + 1,
              lastState: {
                terminated: {
                  exitCode: 137,
                  reason: 'OOMKilled',
                  startedAt: (startedAt ?? killedAt) as unknown as Date,
                  finishedAt: killedAt as unknown as Date,
                  containerID: s.containerID,
                },
              },
              state: { running: { startedAt: killedAt as unknown as Date } },
              containerID: `containerd://${randomBytes(16).toString('hex')}`,
            },
      );
      try {
        await this.#core.patchNamespacedPodStatus(
          {
            name,
            namespace,
            body: {
              metadata: { resourceVersion: pod.metadata?.resourceVersion },
              status: { containerStatuses: updated },
            },
          },
          mergePatch,
        );
        this.#log(`${namespace}/${name}: container ${container} OOMKilled and restarted`);
        return;
      } catch (error) {
        if (errorCode(error) !== 409 || attempt >= 5) throw error;
      }
    }
  }

  /**
   * Makes the next `times` resize actuations of a pod fail the way a runtime error does:
   * PodResizeInProgress stays True with reason Error and `message`; actual resources stay
   * as they were; each failure is retried after the actuation delay.
   */
  failResize(
    namespace: string,
    name: string,
    options: { message?: string; times?: number } = {},
  ): void {
    this.#actuationFailures.set(keyOf(namespace, name), {
      message: options.message ?? 'simulated runtime error: failed to update container resources',
      remaining: options.times ?? 1,
    });
  }

  /**
   * A node whose kubelet died: Ready=False, the not-ready NoSchedule taint the node
   * lifecycle controller would add (that controller is off in the test control plane),
   * its pods marked not ready, and no more lease renewals or pod work on it.
   */
  async failNode(node: string): Promise<void> {
    const spec = this.#requireNode(node);
    spec.failed = true;
    const current = await this.#core.readNode({ name: node });
    const taints = (current.spec?.taints ?? []).filter(
      (t) => t.key !== 'node.kubernetes.io/not-ready',
    );
    taints.push({ key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' });
    await this.#core.patchNode({ name: node, body: { spec: { taints } } }, mergePatch);
    await this.#core.patchNodeStatus(
      { name: node, body: { status: { conditions: nodeConditions(false) } } },
      mergePatch,
    );
    for (const key of this.#podsByNode.get(node) ?? []) {
      const pod = this.#cached(key);
      if (!pod?.metadata?.name || !pod.metadata.namespace) continue;
      const conditions = (pod.status?.conditions ?? []).map((c) =>
        c.type === 'Ready' || c.type === 'ContainersReady'
          ? {
              ...c,
              status: 'False',
              reason: 'NodeNotReady',
              lastTransitionTime: nowIso() as unknown as Date,
            }
          : c,
      );
      await this.#core
        .patchNamespacedPodStatus(
          {
            name: pod.metadata.name,
            namespace: pod.metadata.namespace,
            body: { status: { conditions } },
          },
          mergePatch,
        )
        .catch((error: unknown) =>
          this.#log(`failNode: marking ${key} not ready failed: ${(error as Error).message}`),
        );
    }
    this.#log(`node ${node} failed`);
  }

  /**
   * A node whose kubelet died without a word: no more lease renewals or pod work on it,
   * and nothing written. Only the node lifecycle controller (when the test's control
   * plane runs it) can then mark the node Ready=Unknown and taint it, as in a cluster.
   */
  silenceNode(node: string): void {
    this.#requireNode(node).failed = true;
    this.#log(`node ${node} silenced`);
  }

  #requireNode(node: string): SimulatedNodeSpec & { failed: boolean; index: number } {
    const spec = this.#nodes.get(node);
    if (!spec)
      throw new Error(
        `simulated kubelet: no node "${node}" (has ${[...this.#nodes.keys()].join(', ') || 'none'})`,
      );
    return spec;
  }

  #every(ms: number, work: () => void, once = false): void {
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      if (this.#stopped) return;
      work();
      if (!once) this.#every(ms, work);
    }, ms);
    timer.unref();
    this.#timers.add(timer);
  }

  async #createNode(name: string): Promise<void> {
    const spec = this.#requireNode(name);
    const node: V1Node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name,
        labels: {
          'kubernetes.io/hostname': name,
          'kubernetes.io/os': 'linux',
          'kubernetes.io/arch': 'amd64',
          'tollgate.io/simulated-node': 'true',
          ...spec.labels,
        },
      },
      spec: {},
    };
    try {
      await this.#core.createNode({ body: node });
    } catch (error) {
      if (errorCode(error) !== 409) throw error;
      await this.#core.patchNode(
        {
          name,
          body: {
            metadata: { labels: node.metadata?.labels },
            spec: { taints: null, unschedulable: null },
          },
        },
        mergePatch,
      );
    }
    const resources = {
      cpu: spec.cpu,
      memory: spec.memory,
      pods: String(spec.pods ?? 110),
      'ephemeral-storage': '100Gi',
    };
    await this.#core.patchNodeStatus(
      {
        name,
        body: {
          status: {
            capacity: resources,
            allocatable: resources,
            conditions: nodeConditions(true),
            addresses: [
              { type: 'InternalIP', address: '127.0.0.1' },
              { type: 'Hostname', address: name },
            ],
            images: imageList(spec.images ?? []),
            declaredFeatures: [...(spec.declaredFeatures ?? defaultDeclaredFeatures)],
            nodeInfo: {
              machineID: name,
              systemUUID: name,
              bootID: name,
              kernelVersion: '6.1.0',
              osImage: 'tollgate simulated kubelet',
              containerRuntimeVersion: 'containerd://2.0.0',
              kubeletVersion: 'v1.37.2',
              kubeProxyVersion: '',
              operatingSystem: 'linux',
              architecture: 'amd64',
            },
          },
        },
      },
      mergePatch,
    );
    // The TaintNodesByCondition admission plugin taints every new node not-ready; the
    // node lifecycle controller (off in the test control plane) would lift it once Ready.
    const created = await this.#core.readNode({ name });
    const taints = (created.spec?.taints ?? []).filter(
      (t) => t.key !== 'node.kubernetes.io/not-ready',
    );
    if (taints.length !== (created.spec?.taints ?? []).length) {
      await this.#core.patchNode({ name, body: { spec: { taints } } }, mergePatch);
    }
    await this.#renewLease(name);
  }

  async #renewLeases(): Promise<void> {
    await Promise.all(
      [...this.#nodes]
        .filter(([, spec]) => !spec.failed)
        .map(([name]) =>
          this.#renewLease(name).catch((error: unknown) =>
            this.#log(`lease ${name}: ${(error as Error).message}`),
          ),
        ),
    );
  }

  async #renewLease(name: string): Promise<void> {
    // Server-side apply creates or renews in one call. Lease times are MicroTime: the
    // apiserver wants exactly six fractional digits, so the string is built here.
    const body = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name, namespace: 'kube-node-lease' },
      spec: {
        holderIdentity: name,
        leaseDurationSeconds: 40,
        renewTime: new Date().toISOString().replace(/Z$/, '000Z'),
      },
    };
    await this.#coordination.patchNamespacedLease(
      { name, namespace: 'kube-node-lease', body, fieldManager: 'simulated-kubelet', force: true },
      applyPatch,
    );
  }

  #cached(key: string): V1Pod | undefined {
    const [namespace, name] = key.split('/') as [string, string];
    return this.#informer?.get(name, namespace);
  }

  #observe(pod: V1Pod, deleted: boolean): void {
    const node = pod.spec?.nodeName;
    const namespace = pod.metadata?.namespace;
    const name = pod.metadata?.name;
    if (!node || !namespace || !name || !this.#nodes.has(node)) return;
    const key = keyOf(namespace, name);
    let onNode = this.#podsByNode.get(node);
    if (!onNode) this.#podsByNode.set(node, (onNode = new Set()));
    const pending = pod.status?.conditions?.find((c) => c.type === 'PodResizePending');
    if (!deleted && pending?.reason === 'Deferred') this.#deferred.add(key);
    else this.#deferred.delete(key);
    if (deleted) {
      onNode.delete(key);
      const uid = pod.metadata?.uid ?? '';
      this.#allocated.delete(uid);
      this.#accepted.delete(uid);
    } else {
      onNode.add(key);
      this.#queue.add(key);
    }
    // Room may have appeared (a pod left or shrank): Deferred resizes on this node retry.
    this.#retryDeferred(node, key);
  }

  #retryDeferred(onlyNode?: string, except?: string): void {
    for (const key of this.#deferred) {
      if (key === except) continue;
      if (onlyNode === undefined || this.#cached(key)?.spec?.nodeName === onlyNode)
        this.#queue.add(key);
    }
  }

  async #reconcile(key: string): Promise<void> {
    if (this.#stopped) return;
    const pod = this.#cached(key);
    const node = pod?.spec?.nodeName;
    if (!pod || !node) return;
    const spec = this.#nodes.get(node);
    if (!spec || spec.failed) return;
    try {
      if (pod.metadata?.deletionTimestamp) await this.#remove(pod);
      else if (isTerminal(pod)) return;
      else if (simulatedFailure(pod)) await this.#fail(pod, simulatedFailure(pod) as Failure);
      else if (!pod.status?.containerStatuses?.length || pod.status.phase !== 'Running')
        await this.#run(pod, spec.index);
      else await this.#locks.run(node, () => this.#resize(pod, spec));
    } catch (error) {
      if (errorCode(error) === 409 || errorCode(error) === 404) {
        // Our cached copy was stale; the watch brings the new one and requeues the pod.
        return;
      }
      this.#log(`${key}: ${(error as Error).message}; retrying in 1s`);
      this.#every(1000, () => this.#queue.add(key), true);
    }
  }

  async #remove(pod: V1Pod): Promise<void> {
    const { name, namespace, uid } = pod.metadata ?? {};
    await this.#core.deleteNamespacedPod({
      name: name!,
      namespace: namespace!,
      gracePeriodSeconds: 0,
      body: { gracePeriodSeconds: 0, preconditions: { uid } },
    });
  }

  async #writeStatus(pod: V1Pod, status: Record<string, unknown>): Promise<void> {
    await this.#core.patchNamespacedPodStatus(
      {
        name: pod.metadata!.name!,
        namespace: pod.metadata!.namespace!,
        body: { metadata: { resourceVersion: pod.metadata!.resourceVersion }, status },
      },
      mergePatch,
    );
  }

  /** A bound pod that cannot start (see `simulatedFailure`): written once, as the kubelet reports it. */
  async #fail(pod: V1Pod, reason: Failure): Promise<void> {
    const shown = pod.status?.containerStatuses ?? [];
    if (shown.length > 0 && shown.every((c) => c.state?.waiting?.reason === reason)) return;
    const now = nowIso();
    const crash = reason === 'CrashLoopBackOff';
    const condition = (type: string, status: string): V1PodCondition => ({
      type,
      status,
      lastTransitionTime: now as unknown as Date,
    });
    await this.#writeStatus(pod, {
      phase: crash ? 'Running' : 'Pending',
      startTime: now,
      conditions: [
        condition('PodScheduled', 'True'),
        condition('Initialized', 'True'),
        condition('Ready', 'False'),
        condition('ContainersReady', 'False'),
        ...(pod.status?.conditions ?? []).filter((c) => !kubeletConditions.has(c.type)),
      ],
      containerStatuses: (pod.spec?.containers ?? []).map((c) => ({
        name: c.name,
        image: c.image ?? '',
        imageID: '',
        ready: false,
        started: false,
        restartCount: crash ? 3 : 0,
        state: { waiting: { reason, message: `simulated: ${reason}` } },
        ...(crash
          ? { lastState: { terminated: { exitCode: 1, reason: 'Error', finishedAt: now } } }
          : {}),
      })),
    });
  }

  /** A freshly bound pod: every container started, running and ready. */
  async #run(pod: V1Pod, nodeIndex: number): Promise<void> {
    const now = nowIso();
    const ip = `10.${64 + (nodeIndex % 64)}.${Math.floor(this.#nextPodIp / 250) % 250}.${(this.#nextPodIp % 250) + 2}`;
    this.#nextPodIp += 1;
    const condition = (type: string): V1PodCondition => ({
      type,
      status: 'True',
      lastTransitionTime: now as unknown as Date,
      observedGeneration: pod.metadata?.generation,
    });
    const scheduled =
      pod.status?.conditions?.find((c) => c.type === 'PodScheduled') ?? condition('PodScheduled');
    const containerStatus = (
      container: { name: string; image?: string; resources?: V1ResourceRequirements },
      running: boolean,
    ): V1ContainerStatus => {
      const resources = pickResources(container.resources);
      return {
        name: container.name,
        image: container.image ?? '',
        imageID: `${container.image ?? ''}@sha256:${randomBytes(32).toString('hex')}`,
        containerID: `containerd://${randomBytes(16).toString('hex')}`,
        ready: running,
        started: running,
        restartCount: 0,
        state: running
          ? { running: { startedAt: now as unknown as Date } }
          : {
              terminated: {
                exitCode: 0,
                reason: 'Completed',
                startedAt: now as unknown as Date,
                finishedAt: now as unknown as Date,
              },
            },
        ...(running ? { resources, allocatedResources: resources.requests ?? {} } : {}),
      };
    };
    const podLevel = pickResources(pod.spec?.resources);
    const status: Record<string, unknown> = {
      phase: 'Running',
      observedGeneration: pod.metadata?.generation,
      hostIP: '127.0.0.1',
      hostIPs: [{ ip: '127.0.0.1' }],
      podIP: ip,
      podIPs: [{ ip }],
      startTime: now,
      conditions: [
        condition('PodReadyToStartContainers'),
        condition('Initialized'),
        condition('Ready'),
        condition('ContainersReady'),
        scheduled,
        // Like the real kubelet, conditions others own (tollgate.io/Released) are kept.
        ...(pod.status?.conditions ?? []).filter((c) => !kubeletConditions.has(c.type)),
      ],
      containerStatuses: (pod.spec?.containers ?? []).map((c) => containerStatus(c, true)),
      ...(pod.spec?.initContainers?.length
        ? {
            initContainerStatuses: pod.spec.initContainers.map((c) =>
              containerStatus(c, c.restartPolicy === 'Always'),
            ),
          }
        : {}),
      ...(pod.spec?.resources
        ? { resources: podLevel, allocatedResources: podLevel.requests ?? {} }
        : {}),
    };
    await this.#writeStatus(pod, status);
  }

  #actualResources(pod: V1Pod): { containers: Map<string, Resources>; pod: Resources | undefined } {
    const containers = new Map<string, Resources>();
    for (const s of pod.status?.containerStatuses ?? [])
      containers.set(s.name, pickResources(s.resources));
    return {
      containers,
      pod: pod.status?.resources ? pickResources(pod.status.resources) : undefined,
    };
  }

  #desiredResources(pod: V1Pod): {
    containers: Map<string, Resources>;
    pod: Resources | undefined;
  } {
    const containers = new Map<string, Resources>();
    for (const c of pod.spec?.containers ?? []) containers.set(c.name, pickResources(c.resources));
    return { containers, pod: pod.spec?.resources ? pickResources(pod.spec.resources) : undefined };
  }

  async #resize(pod: V1Pod, node: SimulatedNodeSpec): Promise<void> {
    const uid = pod.metadata?.uid ?? '';
    const generation = pod.metadata?.generation ?? 0;
    const desired = this.#desiredResources(pod);
    const actual = this.#actualResources(pod);
    const conditions = (pod.status?.conditions ?? []).filter(
      (c) => !resizeConditionTypes.has(c.type),
    );
    const pending = pod.status?.conditions?.find((c) => c.type === 'PodResizePending');
    const inProgress = pod.status?.conditions?.find((c) => c.type === 'PodResizeInProgress');
    const accepted = this.#accepted.get(uid);

    // Stage 2: an accepted resize is actuated after a short delay, like a runtime update.
    if (inProgress && accepted) {
      const wait = accepted.due - Date.now();
      if (wait > 0) {
        this.#every(
          wait,
          () => this.#queue.add(keyOf(pod.metadata!.namespace!, pod.metadata!.name!)),
          true,
        );
        return;
      }
      const key = keyOf(pod.metadata!.namespace!, pod.metadata!.name!);
      const failure = this.#actuationFailures.get(key);
      if (failure && failure.remaining > 0) {
        // The runtime refused the update: PodResizeInProgress with reason Error, actual
        // resources unchanged, retried after another delay as the kubelet retries.
        failure.remaining -= 1;
        if (failure.remaining === 0) this.#actuationFailures.delete(key);
        await this.#writeStatus(pod, {
          observedGeneration: generation,
          conditions: [
            ...conditions,
            ...(pending ? [pending] : []),
            {
              type: 'PodResizeInProgress',
              status: 'True',
              reason: 'Error',
              message: failure.message,
              lastTransitionTime: inProgress.lastTransitionTime,
              observedGeneration: inProgress.observedGeneration,
            },
          ],
        });
        accepted.due = Date.now() + this.#actuationDelayMs;
        this.#every(this.#actuationDelayMs, () => this.#queue.add(key), true);
        this.#log(`${key}: resize actuation failed (${failure.message})`);
        return;
      }
      const statuses = (pod.status?.containerStatuses ?? []).map((s) => ({
        ...s,
        resources: accepted.containers.get(s.name) ?? s.resources,
      }));
      await this.#writeStatus(pod, {
        observedGeneration: generation,
        conditions: [...conditions, ...(pending ? [pending] : [])],
        containerStatuses: statuses,
        ...(accepted.pod ? { resources: accepted.pod } : {}),
      });
      this.#accepted.delete(uid);
      this.#log(
        `${pod.metadata?.namespace}/${pod.metadata?.name}: resize of generation ${accepted.generation} actuated`,
      );
      return;
    }

    const unchanged =
      [...desired.containers].every(([name, resources]) =>
        sameResources(resources, actual.containers.get(name)),
      ) &&
      (desired.pod === undefined || sameResources(desired.pod, actual.pod));
    if (unchanged) {
      // Nothing to do, except dropping a stale Pending (the resize was reverted) and
      // reporting that this generation was seen.
      if (pending || inProgress || (pod.status?.observedGeneration ?? 0) < generation) {
        await this.#writeStatus(pod, { observedGeneration: generation, conditions });
      }
      return;
    }
    if (pending && pending.observedGeneration === generation && pending.reason === 'Infeasible')
      return;

    const capacity = amountsOf({ cpu: node.cpu, memory: node.memory });
    const wanted = desiredRequests(pod);
    const podName = `${pod.metadata?.namespace}/${pod.metadata?.name}`;
    const over = (['cpu', 'memory'] as const).filter((r) => wanted[r] > capacity[r]);
    if (over.length > 0) {
      const message = `Node didn't have enough capacity: ${over.map((r) => `${r}, requested: ${wanted[r]}, capacity: ${capacity[r]}`).join('; ')}`;
      await this.#writeStatus(pod, {
        observedGeneration: generation,
        conditions: [
          ...conditions,
          ...(inProgress ? [inProgress] : []),
          pendingCondition('Infeasible', message, generation),
        ],
      });
      await this.#event(
        pod,
        `${uid}/${generation}/ResizeInfeasible`,
        'Warning',
        'ResizeInfeasible',
        `Pod resize Infeasible: ${message}`,
      );
      this.#log(`${podName}: resize infeasible (${message})`);
      return;
    }

    let used: Amounts = { cpu: 0, memory: 0 };
    for (const key of this.#podsByNode.get(pod.spec!.nodeName!) ?? []) {
      const other = this.#cached(key);
      if (!other || other.metadata?.uid === uid || isTerminal(other)) continue;
      used = add(used, this.#allocated.get(other.metadata?.uid ?? '') ?? allocatedRequests(other));
    }
    const short = (['cpu', 'memory'] as const).filter((r) => used[r] + wanted[r] > capacity[r]);
    if (short.length > 0) {
      const message = `Node didn't have enough resource: ${short.map((r) => `${r}, requested: ${wanted[r]}, used: ${used[r]}, capacity: ${capacity[r]}`).join('; ')}`;
      if (!(pending?.reason === 'Deferred' && pending.observedGeneration === generation)) {
        await this.#writeStatus(pod, {
          observedGeneration: generation,
          conditions: [
            ...conditions,
            ...(inProgress ? [inProgress] : []),
            pendingCondition('Deferred', message, generation),
          ],
        });
        this.#log(`${podName}: resize deferred (${message})`);
      }
      return;
    }

    // Accepted: allocate first (visible to the next decision on this node at once), then
    // report PodResizeInProgress; actuation follows when the watch brings this write back.
    this.#allocated.set(uid, wanted);
    this.#accepted.set(uid, {
      generation,
      due: Date.now() + this.#actuationDelayMs,
      containers: desired.containers,
      pod: desired.pod,
    });
    const statuses = (pod.status?.containerStatuses ?? []).map((s) => ({
      ...s,
      allocatedResources: desired.containers.get(s.name)?.requests ?? s.allocatedResources ?? {},
    }));
    try {
      await this.#writeStatus(pod, {
        observedGeneration: generation,
        conditions: [
          ...conditions,
          {
            type: 'PodResizeInProgress',
            status: 'True',
            lastTransitionTime: nowIso(),
            observedGeneration: generation,
          },
        ],
        containerStatuses: statuses,
        ...(desired.pod ? { allocatedResources: desired.pod.requests ?? {} } : {}),
      });
    } catch (error) {
      this.#allocated.delete(uid);
      this.#accepted.delete(uid);
      throw error;
    }
    await this.#event(
      pod,
      `${uid}/${generation}/ResizeStarted`,
      'Normal',
      'ResizeStarted',
      `Pod resize started: generation ${generation}`,
    );
    this.#log(`${podName}: resize of generation ${generation} accepted`);
  }

  async #event(
    pod: V1Pod,
    onceKey: string,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
  ): Promise<void> {
    if (this.#emitted.has(onceKey)) return;
    this.#emitted.add(onceKey);
    const now = new Date();
    const namespace = pod.metadata!.namespace!;
    await this.#core
      .createNamespacedEvent({
        namespace,
        body: {
          metadata: { name: `${pod.metadata!.name}.${randomBytes(8).toString('hex')}`, namespace },
          involvedObject: {
            apiVersion: 'v1',
            kind: 'Pod',
            name: pod.metadata!.name,
            namespace,
            uid: pod.metadata!.uid,
          },
          type,
          reason,
          message,
          source: { component: 'kubelet', host: pod.spec?.nodeName },
          reportingComponent: 'kubelet',
          reportingInstance: pod.spec?.nodeName ?? '',
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      })
      .catch((error: unknown) =>
        this.#log(
          `event ${reason} for ${namespace}/${pod.metadata!.name} failed: ${(error as Error).message}`,
        ),
      );
  }
}

function pendingCondition(
  reason: 'Infeasible' | 'Deferred',
  message: string,
  generation: number,
): Record<string, unknown> {
  return {
    type: 'PodResizePending',
    status: 'True',
    reason,
    message,
    lastTransitionTime: nowIso(),
    observedGeneration: generation,
  };
}

function imageList(images: string[]): Array<{ names: string[]; sizeBytes: number }> {
  return images.map((image) => ({ names: [image], sizeBytes: 50 * 2 ** 20 }));
}

function nodeConditions(ready: boolean): Array<Record<string, unknown>> {
  const now = nowIso();
  const healthy = (type: string, reason: string): Record<string, unknown> => ({
    type,
    status: 'False',
    reason,
    message: 'simulated kubelet',
    lastHeartbeatTime: now,
    lastTransitionTime: now,
  });
  return [
    healthy('MemoryPressure', 'KubeletHasSufficientMemory'),
    healthy('DiskPressure', 'KubeletHasNoDiskPressure'),
    healthy('PIDPressure', 'KubeletHasSufficientPID'),
    {
      type: 'Ready',
      status: ready ? 'True' : 'False',
      reason: ready ? 'KubeletReady' : 'KubeletNotReady',
      message: ready ? 'kubelet is posting ready status' : 'simulated kubelet failure',
      lastHeartbeatTime: now,
      lastTransitionTime: now,
    },
  ];
}
