/**
 * The soak's independent judge (admin identity, no tollgate code), on two informers:
 * - the isolation e2e's IsolationWatcher (test/e2e/isolation/watcher.ts): no gate removed
 *   twice from one pod, released-but-unfinished pods per tenant never above the budget,
 *   no foreign gate touched; each new violation is stamped with the time it was seen;
 * - its own ledger: every removal of tollgate's gate by pod uid (to find its intent and
 *   outcome in Git at the end), and every api pod's `app` resources against the
 *   ResizePolicy's bounds (a resize outside them is a violation);
 * - every gang's members by group label, with when each was released (a gang must be
 *   released whole or not at all: judge.ts gangsWhole).
 */
import { CoreV1Api, makeInformer, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { IsolationWatcher } from '../e2e/isolation/watcher.ts';
import { toStoredAmount } from '../../src/lib/quantity.ts';
import { namespaces, resizeBounds, tenants } from './policy.ts';
import type { GangMember } from './judge.ts';

/** The label that groups a gang's members (the gpu-gang policy's GangComplete groupLabel). */
export const gangLabel = 'ml.tollgate.io/gang';

export interface Violation {
  readonly at: number;
  readonly what: string;
}

export interface Release {
  readonly uid: string;
  readonly pod: string;
  readonly at: number;
}

const ourPrefixes = Object.values(tenants).map((t) => t.ourPrefix);
const hasOurGate = (pod: V1Pod): boolean =>
  (pod.spec?.schedulingGates ?? []).some((g) => ourPrefixes.some((p) => g.name.startsWith(p)));
const soakNamespaces: readonly string[] = Object.values(namespaces);

export class SoakWatcher {
  readonly violations: Violation[] = [];
  readonly releases = new Map<string, Release>();
  /** Distinct resource values seen on api pods (a resize happened when a pod has more than one). */
  readonly resized = new Map<string, Set<string>>();
  /** Gang members by gang (namespace/group), by uid. */
  readonly #gangs = new Map<string, Map<string, GangMember>>();
  readonly #isolation: IsolationWatcher;
  readonly #informer: ReturnType<typeof makeInformer<V1Pod>>;
  readonly #gated = new Map<string, boolean>();
  #stopped = false;
  #copied = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(kc: KubeConfig) {
    this.#isolation = new IsolationWatcher(kc, () => tenants);
    const core = kc.makeApiClient(CoreV1Api);
    this.#informer = makeInformer<V1Pod>(kc, '/api/v1/pods', () => core.listPodForAllNamespaces());
    this.#informer.on('add', (pod) => this.#observe(pod));
    this.#informer.on('update', (pod) => this.#observe(pod));
    this.#informer.on('error', () => {
      if (!this.#stopped) setTimeout(() => void this.#informer.start(), 500);
    });
  }

  async start(): Promise<void> {
    await this.#isolation.start();
    await this.#informer.start();
    this.#timer = setInterval(() => this.#stampIsolationViolations(), 200);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#stampIsolationViolations();
    await this.#isolation.stop();
    await this.#informer.stop();
  }

  peak(tenant: string): number {
    return this.#isolation.peak.get(tenant) ?? 0;
  }

  /** Every gang seen, with its members (a pod deleted while gated stays unreleased). */
  get gangs(): Map<string, GangMember[]> {
    return new Map([...this.#gangs].map(([gang, members]) => [gang, [...members.values()]]));
  }

  get resizes(): number {
    return [...this.resized.values()].reduce((sum, values) => sum + values.size - 1, 0);
  }

  #stampIsolationViolations(): void {
    const all = this.#isolation.violations;
    for (; this.#copied < all.length; this.#copied++)
      this.violations.push({ at: Date.now(), what: all[this.#copied]! });
  }

  #observe(pod: V1Pod): void {
    const namespace = pod.metadata?.namespace ?? '';
    if (!soakNamespaces.includes(namespace)) return;
    const uid = pod.metadata?.uid ?? '';
    const gated = hasOurGate(pod);
    const name = `${namespace}/${pod.metadata?.name}`;
    const released = this.#gated.get(uid) === true && !gated;
    if (released) this.releases.set(uid, { uid, pod: name, at: Date.now() });
    this.#gated.set(uid, gated);
    this.#noteGangMember(pod, uid, name, !gated);
    if (namespace === namespaces.api) this.#checkBounds(pod);
  }

  /** Every gang pod is created gated: seen without tollgate's gate, it was released. */
  #noteGangMember(pod: V1Pod, uid: string, name: string, ungated: boolean): void {
    const group = pod.metadata?.labels?.[gangLabel];
    if (group === undefined) return;
    const gang = `${pod.metadata?.namespace}/${group}`;
    const members = this.#gangs.get(gang) ?? new Map<string, GangMember>();
    this.#gangs.set(gang, members);
    const known = members.get(uid);
    if (ungated && known?.releasedAt === undefined)
      members.set(uid, { uid, pod: name, releasedAt: Date.now() });
    else if (!known) members.set(uid, { uid, pod: name });
  }

  #checkBounds(pod: V1Pod): void {
    const app = pod.spec?.containers.find((c) => c.name === 'app');
    const requests = app?.resources?.requests ?? {};
    const cpu = toStoredAmount('cpu', String(requests.cpu ?? '0'));
    const memory = toStoredAmount('memory', String(requests.memory ?? '0'));
    const key = `${pod.metadata?.namespace}/${pod.metadata?.name}`;
    const values = this.resized.get(key) ?? new Set<string>();
    values.add(`${cpu}/${memory}`);
    this.resized.set(key, values);
    const { cpu: c, memory: m } = resizeBounds;
    if (cpu < c.min || cpu > c.max || memory < m.min || memory > m.max)
      this.violations.push({
        at: Date.now(),
        what: `${key}: resized outside its bounds (cpu ${cpu}m, memory ${memory} bytes)`,
      });
  }
}
