/**
 * The world the fault-isolation e2e tests share: the real control plane (apiserver,
 * scheduler, controller-manager, etcd), a simulated kubelet with two roomy nodes, a real
 * Git server holding the policy and audit repositories, and tollgate's gate-release stack
 * run in this process as the unprivileged `tollgate` identity (deploy/'s RBAC applies).
 *
 * Policies are written in tollgate's own format (schemas/) by `policyFiles`, pushed to
 * Git, and loaded by the real policy source, so a test exercises compile and run time
 * exactly as users do.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseAllDocuments, stringify } from 'yaml';
import {
  CoreV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  type KubeConfig,
  type KubernetesObject,
  type V1Pod,
} from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { SimulatedKubelet } from '../../support/kubelet.ts';
import { startGitServer, pushTree, type GitServer } from '../../support/git-server.ts';
import {
  startGateReleaseStack,
  type GateReleaseStack,
  type GateReleaseStackOptions,
} from '../../support/gate-release-stack.ts';
import { creatable } from '../../support/eventually.ts';
import { createLogger } from '../../../src/observe/log.ts';
import type { Clock } from '../../../src/lib/clock.ts';
import { Finisher } from '../gate-release/harness.ts';
import { IsolationWatcher, type WatchedTenant } from './watcher.ts';

export interface TenantSpec {
  readonly name: string;
  readonly namespaces: readonly string[];
  readonly gatePrefixes: readonly string[];
  readonly budget?: Record<string, unknown>;
  readonly pacing?: { maxInFlight?: number; releasesPerSecond?: number; batchSize?: number };
  readonly orphanedGates?: string;
}

export interface GatePolicySpec {
  readonly name: string;
  readonly tenant: string;
  readonly gate: string;
  readonly conditions?: readonly Record<string, unknown>[];
  readonly expiry?: Record<string, unknown>;
  readonly recheck?: Record<string, unknown>;
  readonly selector?: Record<string, unknown>;
}

export interface ApprovalSpec {
  readonly name: string;
  readonly action: 'Release' | 'Cancel';
  readonly target: Record<string, unknown>;
}

export interface PolicyState {
  readonly tenants: readonly TenantSpec[];
  readonly gatePolicies: readonly GatePolicySpec[];
  readonly approvals?: readonly ApprovalSpec[];
}

const doc = (kind: string, name: string, spec: unknown): string =>
  stringify({ apiVersion: 'tollgate.io/v1alpha1', kind, metadata: { name }, spec });

/** The policy repository's files for `state`, with settings generous enough never to be the limit. */
export function policyFiles(state: PolicyState): Record<string, string | null> {
  const files: Record<string, string | null> = {
    'tollgate.yaml': doc('Settings', 'tollgate', {
      cluster: 'e2e',
      audit: {
        branch: 'tollgate/audit',
        mode: 'strict',
        batch: { maxDecisions: 500, maxDelay: '100ms' },
      },
      pacing: { maxInFlight: 200, releasesPerSecond: 200, batchSize: 200 },
    }),
    'staleness.yaml': doc('StalenessPolicy', 'default', {
      maxCacheLag: '5s',
      destructive: ['Cancel'],
      requeue: { base: '200ms', max: '2s' },
      liveReads: { qps: 20, burst: 40, breaker: { failureThreshold: 5, open: '10s' } },
    }),
  };
  for (const t of state.tenants) {
    files[`tenants/${t.name}.yaml`] = doc('Tenant', t.name, {
      namespaces: t.namespaces,
      gatePrefixes: t.gatePrefixes,
      ...(t.budget ? { budget: t.budget } : {}),
      ...(t.orphanedGates ? { orphanedGates: t.orphanedGates } : {}),
      pacing: { maxInFlight: 50, releasesPerSecond: 50, batchSize: 50, ...t.pacing },
    });
  }
  for (const g of state.gatePolicies) {
    files[`gates/${g.name}.yaml`] = doc('GatePolicy', g.name, {
      tenant: g.tenant,
      gate: g.gate,
      conditions: g.conditions ?? [{ type: 'Budget' }],
      ...(g.expiry ? { expiry: g.expiry } : {}),
      ...(g.recheck ? { recheck: g.recheck } : {}),
      ...(g.selector ? { selector: g.selector } : {}),
    });
  }
  for (const a of state.approvals ?? []) {
    files[`approvals/${a.name}.yaml`] = doc('Approval', a.name, {
      action: a.action,
      target: a.target,
      approvedBy: 'reviewer@example.com',
      reason: 'checked by hand in the e2e',
    });
  }
  return files;
}

/** How a test's tollgate differs from the default one (see GateReleaseStackOptions). */
export type TollgateOptions = Pick<
  GateReleaseStackOptions,
  'recoverIntents' | 'scopeNamespaces' | 'wrapSource' | 'syncWaitMs'
>;

export interface World {
  readonly cp: ControlPlane;
  readonly kc: KubeConfig;
  readonly core: CoreV1Api;
  readonly kubelet: SimulatedKubelet;
  readonly git: GitServer;
  readonly policyUrl: string;
  readonly auditUrl: string;
  readonly work: string;
  pushPolicy(state: PolicyState, message: string): Promise<string>;
  createNamespaces(...names: string[]): Promise<void>;
  createPods(pods: readonly V1Pod[]): Promise<void>;
  /** Applies deploy/components/cancel (pod delete), as an operator enabling Cancel does. */
  grantCancel(): Promise<void>;
  /** tollgate's gate-release stack in this process, as the `tollgate` identity. */
  startTollgate(
    id?: string,
    dispatcher?: { capacity: number; concurrency: number; qps: number; burst: number },
    clock?: Clock,
    options?: TollgateOptions,
  ): Promise<GateReleaseStack>;
  stop(): Promise<void>;
}

/** How a test's cluster differs from the default one. */
export interface ClusterOptions {
  /** Extra kube-controller-manager flags (e.g. the node lifecycle controller on). */
  readonly controllerManagerArgs?: string[];
  /** The simulated kubelet's lease renewal period (default 10 s). */
  readonly leaseRenewMs?: number;
}

export async function startWorld(
  name: string,
  first: PolicyState,
  cluster: ClusterOptions = {},
): Promise<World> {
  const cp = await startControlPlane({
    name,
    ...(cluster.controllerManagerArgs
      ? { controllerManagerArgs: cluster.controllerManagerArgs }
      : {}),
  });
  const kc = cp.kubeConfig('admin');
  const core = kc.makeApiClient(CoreV1Api);
  const kubelet = new SimulatedKubelet(kc, {
    concurrency: 8,
    ...(cluster.leaseRenewMs ? { leaseRenewMs: cluster.leaseRenewMs } : {}),
  });
  for (let i = 1; i <= 2; i++)
    await kubelet.addNode(`iso-node-${i}`, { cpu: '64', memory: '256Gi', pods: 300 });
  await kubelet.start();
  const git = await startGitServer();
  const policyUrl = git.createRepo('policy');
  const auditUrl = git.createRepo('audit');
  const work = mkdtempSync(join(tmpdir(), `tollgate-${name}-`));
  const stacks: GateReleaseStack[] = [];
  const pushPolicy = (state: PolicyState, message: string) =>
    pushTree(git, policyUrl, policyFiles(state), { message, replace: true });
  await pushPolicy(first, 'policy v1');
  return {
    cp,
    kc,
    core,
    kubelet,
    git,
    policyUrl,
    auditUrl,
    work,
    pushPolicy,
    async createNamespaces(...names) {
      for (const n of names) await core.createNamespace({ body: { metadata: { name: n } } });
    },
    async createPods(pods) {
      for (const pod of pods) {
        for (let attempt = 0; ; attempt++) {
          try {
            await core.createNamespacedPod({
              namespace: pod.metadata!.namespace!,
              body: creatable(pod),
            });
            break;
          } catch (error) {
            if (attempt > 5) throw error;
            await sleep(200);
          }
        }
      }
    },
    async grantCancel() {
      const objects = kc.makeApiClient(KubernetesObjectApi);
      const file = new URL('../../../deploy/components/cancel/rbac.yaml', import.meta.url);
      for (const document of parseAllDocuments(readFileSync(file, 'utf8'))) {
        const object = document.toJS() as KubernetesObject | null;
        if (object)
          await objects.patch(
            object,
            undefined,
            undefined,
            'isolation-e2e',
            true,
            PatchStrategy.ServerSideApply,
          );
      }
    },
    async startTollgate(
      id = 'tollgate-1',
      dispatcher = { capacity: 1000, concurrency: 8, qps: 200, burst: 200 },
      clock?: Clock,
      options: TollgateOptions = {},
    ) {
      const stack = await startGateReleaseStack({
        kubeConfig: cp.kubeConfig('tollgate'),
        policyUrl,
        auditUrl,
        token: git.token,
        cacheDir: join(work, id),
        controller: id,
        cluster: 'e2e',
        auditMode: 'strict',
        log: createLogger({ name: id, level: process.env.TOLLGATE_LOG_LEVEL ?? 'warn' }),
        policyIntervalMs: 300,
        dispatcher,
        debounceMs: 50,
        ...(clock ? { clock } : {}),
        ...(options.recoverIntents ? { recoverIntents: true } : {}),
        ...(options.scopeNamespaces ? { scopeNamespaces: true } : {}),
        ...(options.wrapSource ? { wrapSource: options.wrapSource } : {}),
        ...(options.syncWaitMs !== undefined ? { syncWaitMs: options.syncWaitMs } : {}),
      });
      // Stopping twice (a test, then the world) must not stop the parts twice.
      let stopping: Promise<void> | undefined;
      const once: GateReleaseStack = { ...stack, stop: () => (stopping ??= stack.stop()) };
      stacks.push(once);
      return once;
    },
    async stop() {
      for (const s of stacks) await s.stop().catch(() => undefined);
      await kubelet.stop();
      await git.close();
      await cp.stop();
    },
  };
}

/**
 * The set-up every isolation test that releases pods shares: a world with its namespaces,
 * the independent budget watcher (its own informer, admin identity), and a finisher that
 * completes released pods so budgets free up. `startTollgate: false` leaves tollgate for
 * the test to start. If any part fails to start, the parts already started are stopped.
 */
export async function startWatchedWorld(
  name: string,
  policy: PolicyState,
  options: {
    namespaces: readonly string[];
    budgets: () => Record<string, WatchedTenant>;
    finish: readonly string[];
    startTollgate?: boolean;
    cluster?: ClusterOptions;
  },
): Promise<WatchedWorld> {
  const world = await startWorld(name, policy, options.cluster);
  let watcher: IsolationWatcher | undefined;
  let finisher: Finisher | undefined;
  try {
    await world.createNamespaces(...options.namespaces);
    watcher = new IsolationWatcher(world.kc, options.budgets);
    await watcher.start();
    finisher = new Finisher(world.kc, [...options.finish], 800);
    await finisher.start();
    if (options.startTollgate !== false) await world.startTollgate();
    return { world, watcher, finisher };
  } catch (error) {
    await stopWatchedWorld({ world, watcher, finisher });
    throw error;
  }
}

export interface WatchedWorld {
  readonly world: World;
  readonly watcher: IsolationWatcher;
  readonly finisher: Finisher;
}

/** Stops what `startWatchedWorld` started, in reverse order; parts never started are skipped. */
export async function stopWatchedWorld(parts: Partial<WatchedWorld>): Promise<void> {
  await parts.finisher?.stop();
  await parts.watcher?.stop();
  await parts.world?.stop();
}
