/**
 * The soak's independent judge (admin identity, no tollgate code), on two informers:
 * - the isolation e2e's IsolationWatcher (test/e2e/isolation/watcher.ts): no gate removed
 *   twice from one pod, released-but-unfinished pods per tenant never above the budget,
 *   no foreign gate touched; each new violation is stamped with the time it was seen;
 * - its own ledger: every removal of tollgate's gate by pod uid (to find its intent and
 *   outcome in Git at the end), and every api pod's `app` resources against the
 *   ResizePolicy's bounds (a resize outside them is a violation).
 */
import { CoreV1Api, makeInformer, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { IsolationWatcher } from '../e2e/isolation/watcher.ts';
import { toStoredAmount } from '../../src/lib/quantity.ts';
import { namespaces, resizeBounds, tenants } from './policy.ts';

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
    if (this.#gated.get(uid) === true && !gated)
      this.releases.set(uid, { uid, pod: `${namespace}/${pod.metadata?.name}`, at: Date.now() });
    this.#gated.set(uid, gated);
    if (namespace === namespaces.api) this.#checkBounds(pod);
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
