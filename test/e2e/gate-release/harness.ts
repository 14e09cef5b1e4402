/**
 * Test-side parts of the gate-release e2e, independent of the controller under test:
 * - `startController`: runs test/e2e/gate-release/controller.ts as a child process (so
 *   it can be SIGKILLed mid-release);
 * - `BudgetWatcher`: its own list+watch of pods (admin identity, its own informer, no
 *   tollgate code), checking on every event that no tenant's budget (pods, cpu) and no
 *   max-in-flight (tenant and global) is exceeded, and recording each pod's release;
 * - `Finisher`: marks pods Succeeded a while after they run, as finished jobs would,
 *   so budget frees up and every pod can eventually be released.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { appendFileSync, openSync } from 'node:fs';
import {
  CoreV1Api,
  PatchStrategy,
  makeInformer,
  setHeaderOptions,
  type KubeConfig,
  type V1Pod,
} from '@kubernetes/client-node';
import { toStoredAmount } from '../../../src/lib/quantity.ts';

const here = dirname(fileURLToPath(import.meta.url));

export interface ControllerProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** SIGTERM and wait for a clean exit. */
  stop(): Promise<number | null>;
  /** JSON lines the controller printed on stdout (ready, stopped with its metrics). */
  readonly messages: Record<string, unknown>[];
  /** SIGKILL: no cleanup at all. */
  kill(): Promise<void>;
}

export async function startController(
  config: Record<string, unknown>,
  logFile: string,
): Promise<ControllerProcess> {
  const err = openSync(logFile, 'a');
  const child = spawn(process.execPath, [join(here, 'controller.ts')], {
    env: { ...process.env, TOLLGATE_E2E_CONTROLLER: JSON.stringify(config) },
    stdio: ['ignore', 'pipe', err],
  });
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => resolve(code)),
  );
  const lines = createInterface({ input: child.stdout! });
  const messages: Record<string, unknown>[] = [];
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`controller not ready in 60s; see ${logFile}`)),
      60_000,
    );
    lines.on('line', (line) => {
      appendFileSync(logFile, `${line}\n`);
      if (line.startsWith('{"ready"') || line.startsWith('{"stopped"'))
        messages.push(JSON.parse(line) as Record<string, unknown>);
      if (line.includes('"ready":true')) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`controller exited with ${code} before ready; see ${logFile}`));
    });
  });
  return {
    child,
    pid: child.pid as number,
    messages,
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

export interface TenantLimits {
  namespaces: string[];
  gatePrefix: string;
  pods?: number;
  cpuMillis?: number;
  maxInFlight: number;
}

export interface Violation {
  at: number;
  what: string;
}

interface Seen {
  namespace: string;
  name: string;
  firstSeenAt: number;
  releasedAt?: number;
  /** Times our gate was seen to go from present to absent (must be 1 at most). */
  releases: number;
  gatedAgainAfterRelease: boolean;
  pod: V1Pod;
}

function cpuMillis(pod: V1Pod): number {
  let sum = 0;
  for (const c of pod.spec?.containers ?? []) {
    const cpu = c.resources?.requests?.cpu;
    if (cpu !== undefined) sum += toStoredAmount('cpu', cpu);
  }
  return sum;
}

/**
 * Watches pods with its own informer and checks the invariants after every event.
 * The limits are read through a function so a test can raise them exactly when it has
 * pushed a policy commit (the controller cannot see a commit before its push ends).
 */
export class BudgetWatcher {
  readonly seen = new Map<string, Seen>();
  readonly violations: Violation[] = [];
  readonly peak = new Map<string, { pods: number; cpu: number; inFlight: number }>();
  peakGlobalInFlight = 0;
  events = 0;
  #informer: ReturnType<typeof makeInformer<V1Pod>>;
  #tenants: () => Record<string, TenantLimits>;
  #globalMaxInFlight: () => number;
  #peakSince = new Map<string, { since: number; pods: number }>();

  constructor(
    kc: KubeConfig,
    tenants: () => Record<string, TenantLimits>,
    globalMaxInFlight: () => number,
  ) {
    const core = kc.makeApiClient(CoreV1Api);
    this.#tenants = tenants;
    this.#globalMaxInFlight = globalMaxInFlight;
    this.#informer = makeInformer<V1Pod>(kc, '/api/v1/pods', () => core.listPodForAllNamespaces());
    this.#informer.on('add', (pod) => this.#observe(pod));
    this.#informer.on('update', (pod) => this.#observe(pod));
    this.#informer.on('error', () => {
      if (!this.#stopped) setTimeout(() => void this.#informer.start(), 500);
    });
  }

  #stopped = false;

  start(): Promise<void> {
    return this.#informer.start();
  }

  stop(): Promise<void> {
    this.#stopped = true;
    return this.#informer.stop();
  }

  /** Starts measuring the peak usage of a tenant from now (e.g. after a budget raise). */
  markPeak(tenant: string): void {
    this.#peakSince.set(tenant, { since: Date.now(), pods: 0 });
  }

  peakSince(tenant: string): number {
    return this.#peakSince.get(tenant)?.pods ?? 0;
  }

  #tenantOf(pod: V1Pod): [string, TenantLimits] | undefined {
    return Object.entries(this.#tenants()).find(([, t]) =>
      t.namespaces.includes(pod.metadata?.namespace ?? ''),
    );
  }

  static hasOurGate(pod: V1Pod, prefix: string): boolean {
    return (pod.spec?.schedulingGates ?? []).some((g) => g.name.startsWith(prefix));
  }

  #observe(pod: V1Pod): void {
    this.events += 1;
    const tenant = this.#tenantOf(pod);
    if (!tenant) return;
    const [tenantName, limits] = tenant;
    const key = `${pod.metadata?.namespace}/${pod.metadata?.name}`;
    const now = Date.now();
    const gated = BudgetWatcher.hasOurGate(pod, limits.gatePrefix);
    let seen = this.seen.get(key);
    if (!seen) {
      seen = {
        namespace: pod.metadata!.namespace!,
        name: pod.metadata!.name!,
        firstSeenAt: now,
        releases: 0,
        gatedAgainAfterRelease: false,
        pod,
      };
      this.seen.set(key, seen);
      if (!gated) seen.releasedAt = undefined; // never gated by us: not ours to count
    } else {
      const wasGated = BudgetWatcher.hasOurGate(seen.pod, limits.gatePrefix);
      if (wasGated && !gated) {
        seen.releases += 1;
        seen.releasedAt ??= now;
      }
      if (!wasGated && gated) seen.gatedAgainAfterRelease = true;
    }
    seen.pod = pod;

    // Invariants over the tenant, after this event.
    let pods = 0;
    let cpu = 0;
    let inFlight = 0;
    let globalInFlight = 0;
    for (const s of this.seen.values()) {
      const p = s.pod;
      const t = this.#tenantOf(p);
      if (!t) continue;
      const released = !BudgetWatcher.hasOurGate(p, t[1].gatePrefix);
      const finished = p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed';
      if (!released || finished) continue;
      // Another controller's gate still on it: it cannot be scheduled, so it is not charged.
      if ((p.spec?.schedulingGates ?? []).length > 0) continue;
      const flying = !p.spec?.nodeName && (p.spec?.schedulingGates ?? []).length === 0;
      if (flying) globalInFlight += 1;
      if (t[0] !== tenantName) continue;
      pods += 1;
      cpu += cpuMillis(p);
      if (flying) inFlight += 1;
    }
    if (limits.pods !== undefined && pods > limits.pods)
      this.violations.push({
        at: now,
        what: `${tenantName}: ${pods} pods > budget ${limits.pods}`,
      });
    if (limits.cpuMillis !== undefined && cpu > limits.cpuMillis)
      this.violations.push({
        at: now,
        what: `${tenantName}: cpu ${cpu}m > budget ${limits.cpuMillis}m`,
      });
    if (inFlight > limits.maxInFlight)
      this.violations.push({
        at: now,
        what: `${tenantName}: ${inFlight} in flight > ${limits.maxInFlight}`,
      });
    if (globalInFlight > this.#globalMaxInFlight())
      this.violations.push({
        at: now,
        what: `global: ${globalInFlight} in flight > ${this.#globalMaxInFlight()}`,
      });
    const peak = this.peak.get(tenantName) ?? { pods: 0, cpu: 0, inFlight: 0 };
    this.peak.set(tenantName, {
      pods: Math.max(peak.pods, pods),
      cpu: Math.max(peak.cpu, cpu),
      inFlight: Math.max(peak.inFlight, inFlight),
    });
    this.peakGlobalInFlight = Math.max(this.peakGlobalInFlight, globalInFlight);
    const since = this.#peakSince.get(tenantName);
    if (since) since.pods = Math.max(since.pods, pods);
  }
}

/** Marks running pods of the given namespaces Succeeded `afterMs` after they are seen running. */
export class Finisher {
  #informer: ReturnType<typeof makeInformer<V1Pod>>;
  #core: CoreV1Api;
  #timers = new Set<NodeJS.Timeout>();
  #done = new Set<string>();
  #stopped = false;
  finished = 0;

  constructor(
    kc: KubeConfig,
    namespaces: readonly string[],
    afterMs: number,
    exempt: (pod: V1Pod) => boolean = () => false,
  ) {
    this.#core = kc.makeApiClient(CoreV1Api);
    this.#informer = makeInformer<V1Pod>(kc, '/api/v1/pods', () =>
      this.#core.listPodForAllNamespaces(),
    );
    const onPod = (pod: V1Pod) => {
      // By uid: a pod deleted and re-created under the same name is another pod to finish.
      const key = `${pod.metadata?.namespace}/${pod.metadata?.name}/${pod.metadata?.uid}`;
      if (this.#stopped || !namespaces.includes(pod.metadata?.namespace ?? '') || exempt(pod))
        return;
      if (pod.status?.phase !== 'Running' || this.#done.has(key)) return;
      this.#done.add(key);
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        void this.#finish(pod, 0);
      }, afterMs);
      this.#timers.add(timer);
    };
    this.#informer.on('add', onPod);
    this.#informer.on('update', onPod);
    this.#informer.on('error', () => {
      if (!this.#stopped) setTimeout(() => void this.#informer.start(), 500);
    });
  }

  async #finish(pod: V1Pod, attempt: number): Promise<void> {
    if (this.#stopped) return;
    try {
      await this.#core.patchNamespacedPodStatus(
        {
          name: pod.metadata!.name!,
          namespace: pod.metadata!.namespace!,
          body: { status: { phase: 'Succeeded' } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      this.finished += 1;
    } catch (error) {
      // Until it lands or the pod is gone: a pod left Running would hold its tenant's
      // budget for good (the soak's kube-apiserver restarts last about 5 s; five tries in
      // one second once left pods Running for ever and stalled a tenant).
      if ((error as { code?: number }).code === 404) return;
      const timer = setTimeout(
        () => {
          this.#timers.delete(timer);
          void this.#finish(pod, attempt + 1);
        },
        Math.min(2_000, 200 * 2 ** attempt),
      );
      this.#timers.add(timer);
    }
  }

  start(): Promise<void> {
    return this.#informer.start();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const t of this.#timers) clearTimeout(t);
    await this.#informer.stop();
  }
}

/** The value of one series in Prometheus text format, or undefined. */
export function metricValue(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] as number;
}
