/**
 * An independent judge for the fault-isolation e2e tests: its own informer on pods, as
 * the admin identity, with no tollgate code. After every event it checks
 * - the budget invariant: per tenant, pods that can be scheduled or run (no scheduling
 *   gate left, not finished, not deleting, not bound to a node whose Ready condition has
 *   not been True for the tenant's grace) never exceed the tenant's pod budget. Nodes are
 *   read live when a count is over the budget, so the judge's view of them is never older
 *   than the one tollgate decided on;
 * - that pods gated only by another controller are never touched: their gates stay as
 *   created (unless the test, acting as that controller, said it admits them) and they
 *   are not deleted;
 * and it records, per pod, when tollgate's gate left it (each pod released once).
 */
import { CoreV1Api, makeInformer, type KubeConfig, type V1Pod } from '@kubernetes/client-node';

export interface WatchedTenant {
  readonly namespaces: readonly string[];
  /** Gate prefix of tollgate's gates for this tenant (a pod carrying one is tollgate-gated). */
  readonly ourPrefix: string;
  readonly pods?: number;
  /**
   * Whether pods tollgate never gated count toward the budget once they can be scheduled
   * (the tenant's `budget.neverGatedPods`: Charge, the default, or Ignore). When false only
   * pods seen carrying tollgate's gate are counted.
   */
  readonly chargesNeverGated?: boolean;
  /** The tenant's `budget.unreadyNodeGrace` in ms (default 5m, as tollgate's). */
  readonly unreadyNodeGraceMs?: number;
}

interface Seen {
  pod: V1Pod;
  createdGates: string[];
  ourGateSeen: boolean;
  releases: number;
  foreignOnly: boolean;
}

const gatesOf = (pod: V1Pod): string[] => (pod.spec?.schedulingGates ?? []).map((g) => g.name);
const keyOf = (pod: V1Pod): string => `${pod.metadata?.namespace}/${pod.metadata?.name}`;
const finished = (pod: V1Pod): boolean =>
  pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';

export class IsolationWatcher {
  readonly violations: string[] = [];
  readonly peak = new Map<string, number>();
  readonly #seen = new Map<string, Seen>();
  readonly #admittedByOther = new Set<string>();
  readonly #tenants: () => Record<string, WatchedTenant>;
  readonly #informer: ReturnType<typeof makeInformer<V1Pod>>;
  readonly #core: CoreV1Api;
  /** Live node reads confirming a count over the budget, awaited by stop(). */
  readonly #confirming = new Set<Promise<void>>();
  #stopped = false;

  constructor(kc: KubeConfig, tenants: () => Record<string, WatchedTenant>) {
    const core = kc.makeApiClient(CoreV1Api);
    this.#core = core;
    this.#tenants = tenants;
    this.#informer = makeInformer<V1Pod>(kc, '/api/v1/pods', () => core.listPodForAllNamespaces());
    this.#informer.on('add', (pod) => this.#observe(pod));
    this.#informer.on('update', (pod) => this.#observe(pod));
    this.#informer.on('delete', (pod) => this.#deleted(pod));
    this.#informer.on('error', () => {
      if (!this.#stopped) setTimeout(() => void this.#informer.start(), 500);
    });
  }

  start(): Promise<void> {
    return this.#informer.start();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#informer.stop();
    await Promise.all(this.#confirming);
  }

  /** Times tollgate's gate was seen leaving the pod (at most 1 for a correct controller). */
  releases(namespace: string, name: string): number {
    return this.#seen.get(`${namespace}/${name}`)?.releases ?? 0;
  }

  /** The test, acting as the other controller, is about to remove that controller's gate. */
  admittedByOther(namespace: string, name: string): void {
    this.#admittedByOther.add(`${namespace}/${name}`);
  }

  gates(namespace: string, name: string): string[] | undefined {
    const seen = this.#seen.get(`${namespace}/${name}`);
    return seen ? gatesOf(seen.pod) : undefined;
  }

  #tenantOf(pod: V1Pod): [string, WatchedTenant] | undefined {
    return Object.entries(this.#tenants()).find(([, t]) =>
      t.namespaces.includes(pod.metadata?.namespace ?? ''),
    );
  }

  #deleted(pod: V1Pod): void {
    const seen = this.#seen.get(keyOf(pod));
    if (seen?.foreignOnly)
      this.violations.push(`${keyOf(pod)}: gated only by another controller, yet deleted`);
    this.#seen.delete(keyOf(pod));
  }

  #observe(pod: V1Pod): void {
    const tenant = this.#tenantOf(pod);
    if (!tenant) return;
    const [tenantName, limits] = tenant;
    const key = keyOf(pod);
    const gates = gatesOf(pod);
    const ours = gates.some((g) => g.startsWith(limits.ourPrefix));
    let seen = this.#seen.get(key);
    if (!seen || seen.pod.metadata?.uid !== pod.metadata?.uid) {
      seen = {
        pod,
        createdGates: gates,
        ourGateSeen: ours,
        releases: 0,
        foreignOnly: gates.length > 0 && !ours,
      };
      this.#seen.set(key, seen);
    } else {
      const wasOurs = gatesOf(seen.pod).some((g) => g.startsWith(limits.ourPrefix));
      if (wasOurs && !ours) seen.releases += 1;
      seen.pod = pod;
    }
    if (
      seen.foreignOnly &&
      !this.#admittedByOther.has(key) &&
      gates.join(',') !== seen.createdGates.join(',')
    )
      this.violations.push(
        `${key}: gated only by another controller, its gates changed from [${seen.createdGates}] to [${gates}]`,
      );
    if (seen.releases > 1) this.violations.push(`${key}: released ${seen.releases} times`);
    this.#checkBudget(tenantName, limits);
  }

  #checkBudget(tenantName: string, limits: WatchedTenant): void {
    const counted: V1Pod[] = [];
    for (const s of this.#seen.values()) {
      const p = s.pod;
      if (!limits.namespaces.includes(p.metadata?.namespace ?? '')) continue;
      if (gatesOf(p).length > 0 || finished(p) || p.metadata?.deletionTimestamp) continue;
      if (limits.chargesNeverGated === false && !s.ourGateSeen) continue;
      counted.push(p);
    }
    if (limits.pods === undefined || counted.length <= limits.pods) {
      this.#peak(tenantName, counted.length);
      return;
    }
    const confirming = this.#confirmOverBudget(tenantName, limits, counted).catch(
      (error: unknown) => {
        this.violations.push(`${tenantName}: nodes unreadable: ${(error as Error).message}`);
      },
    );
    this.#confirming.add(confirming);
    void confirming.then(() => this.#confirming.delete(confirming));
  }

  /** Counts again without the pods on nodes not Ready for the grace, read live now. */
  async #confirmOverBudget(tenantName: string, limits: WatchedTenant, counted: V1Pod[]) {
    const graceMs = limits.unreadyNodeGraceMs ?? 300_000;
    const now = Date.now();
    const lost = new Set<string>();
    for (const node of (await this.#core.listNode()).items) {
      const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
      const since = ready?.lastTransitionTime ? new Date(ready.lastTransitionTime).getTime() : now;
      if (ready && ready.status !== 'True' && now - since >= graceMs)
        lost.add(node.metadata?.name ?? '');
    }
    const charged = counted.filter((p) => !lost.has(p.spec?.nodeName ?? '\u0000')).length;
    this.#peak(tenantName, charged);
    if (limits.pods !== undefined && charged > limits.pods)
      this.violations.push(
        `${tenantName}: ${charged} ungated unfinished pods > budget ${limits.pods}`,
      );
  }

  #peak(tenantName: string, count: number): void {
    this.peak.set(tenantName, Math.max(this.peak.get(tenantName) ?? 0, count));
  }
}
