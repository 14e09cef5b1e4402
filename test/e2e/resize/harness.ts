/**
 * The resize e2e world: the shared real control plane with a simulated kubelet, tollgate's
 * live cluster view and write executor as the unprivileged `tollgate` identity, the real
 * dispatcher, the Git audit writer on a real Git server, and a real Prometheus scraping
 * an exporter whose per-pod values the test sets.
 */
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { SimulatedKubelet } from '../../support/kubelet.ts';
import { startGitServer, type GitServer } from '../../support/git-server.ts';
import { eventually } from '../../support/eventually.ts';
import { eventDispatcher } from '../../support/event-writes.ts';
import { LiveClusterView } from '../../../src/cluster/view.ts';
import { createWriteExecutor } from '../../../src/cluster/writer.ts';
import { GitAuditWriter } from '../../../src/audit/writer.ts';
import { createEventRecorder, type EventRecorder } from '../../../src/cluster/events.ts';
import type { ClusterView } from '../../../src/cluster/types.ts';
import type { Dispatcher } from '../../../src/dispatch/types.ts';
import type { Policy, ResizePolicy } from '../../../src/policy/model.ts';
import {
  startResizeLoop,
  type ResizeLoop,
  type ResizeLoopDeps,
} from '../../../src/loops/resize.ts';
import { createPrometheusClient } from '../../../src/signals/prometheus.ts';
import { aPolicy, aTenant } from '../../builders/policy.ts';
import { sealedValue, testStateKeys } from '../../builders/resize.ts';
import { freshClone } from '../audit/support.ts';
import { createDispatcherForTest, startPrometheusForTest, type TestPrometheus } from './parts.ts';
import { actualMemoryOf, memoryOf, workerPod } from './pods.ts';

export const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** The queue signal the resize e2e tests set through the exporter: up above 100, down below 20. */
export function queueSignal(
  metric = 'tollgate_test_queue_length',
): ResizePolicy['signals'][number] {
  return {
    name: 'queue',
    query: `${metric}{namespace="$namespace",pod="$pod"}`,
    scaleUpAbove: 100,
    scaleDownBelow: 20,
  };
}

/** The JSON of one of tollgate's resize annotations on `pod`, its seal verified (or {}). */
export function storedState(pod: V1Pod, annotation: string): Record<string, unknown> {
  const text = pod.metadata?.annotations?.[annotation];
  return sealedValue(pod.metadata?.uid ?? '', annotation, text) ?? {};
}

export interface ResizeWorld {
  readonly cp: ControlPlane;
  readonly kubelet: SimulatedKubelet;
  readonly admin: CoreV1Api;
  readonly view: LiveClusterView;
  readonly dispatcher: Dispatcher;
  readonly audit: GitAuditWriter;
  readonly git: GitServer;
  readonly auditRepo: string;
  readonly prom: TestPrometheus;
  readonly namespace: string;
  readonly events: EventRecorder;
  /** Starts the loop with a policy provider; stopped by `stop()`. */
  loop(policy: () => Policy | undefined, options?: Partial<ResizeLoopDeps>): ResizeLoop;
  pod(name: string): Promise<V1Pod>;
  /** Creates a pod pinned to a node and waits until the kubelet runs it. */
  runPod(body: V1Pod): Promise<V1Pod>;
  /**
   * Asserts `name` was resized in place: the pod `runPod` started (same uid), its
   * containers restarted exactly `restarts` times since (restarts the test itself
   * caused, e.g. OOM kills; tollgate's policies here allow none).
   */
  assertInPlace(name: string, restarts?: number): Promise<V1Pod>;
  /** Audit records (JSON objects) on the audit branch of the real Git server. */
  auditRecords(): Promise<Record<string, unknown>[]>;
  stop(): Promise<void>;
}

/** The compiled policy snapshot the loop decides against, with one tenant owning `namespace`. */
export function policyFor(
  namespace: string,
  resizePolicies: ResizePolicy[],
  extra: Partial<Policy> = {},
): Policy {
  const base = aPolicy().tenant(aTenant('team-a').namespaces(namespace)).obj();
  return { ...base, resizePolicies, ...extra };
}

export async function startResizeWorld(
  name: string,
  nodes: Record<string, { cpu: string; memory: string }>,
): Promise<ResizeWorld> {
  const cp = await sharedControlPlane();
  const adminKc = cp.kubeConfig('admin');
  const admin = adminKc.makeApiClient(CoreV1Api);
  const kubelet = new SimulatedKubelet(adminKc, { actuationDelayMs: 200, deferredRetryMs: 1000 });
  for (const [node, size] of Object.entries(nodes)) await kubelet.addNode(node, size);
  await kubelet.start();
  // Pod-level in-place resize is refused unless the node declares the feature
  // (Node.status.declaredFeatures, as a 1.37 kubelet does).
  for (const node of Object.keys(nodes)) {
    await admin.patchNodeStatus(
      {
        name: node,
        body: { status: { declaredFeatures: ['InPlacePodLevelResourcesVerticalScaling'] } },
      },
      mergePatch,
    );
  }
  const namespace = `rz-${name}-${Math.random().toString(36).slice(2, 7)}`;
  await admin.createNamespace({ body: { metadata: { name: namespace } } });

  const tollgateKc = cp.kubeConfig('tollgate');
  const view = new LiveClusterView({ kubeConfig: tollgateKc, namespaces: [namespace] });
  view.start();
  await view.whenSynced();
  const dispatcher = await createDispatcherForTest(createWriteExecutor(tollgateKc));

  const git = await startGitServer();
  const auditRepo = git.createRepo(`audit-${name}`);
  const { writer: audit } = await GitAuditWriter.open({
    url: auditRepo,
    token: git.token,
    branch: 'tollgate/audit',
    cacheDir: mkdtempSync(join(tmpdir(), `tollgate-resize-audit-${name}-`)),
    cluster: 'e2e',
    controller: 'resize-e2e',
    mode: 'strict',
    batch: { maxDecisions: 100, maxDelayMs: 100 },
  });

  const prom = await startPrometheusForTest();
  const events = createEventRecorder(eventDispatcher(tollgateKc), {
    ratePerSecond: 50,
    burst: 100,
    reportingInstance: 'resize-e2e',
  });
  const core = tollgateKc.makeApiClient(CoreV1Api);
  const loops: ResizeLoop[] = [];
  const started = new Map<string, V1Pod>();
  const restartsOf = (pod: V1Pod | undefined) =>
    (pod?.status?.containerStatuses ?? []).reduce((sum, s) => sum + (s.restartCount ?? 0), 0);

  return {
    cp,
    kubelet,
    admin,
    view,
    dispatcher,
    audit,
    git,
    auditRepo,
    prom,
    namespace,
    events,
    loop(policy, options = {}) {
      const loop = startResizeLoop({
        view: view as ClusterView,
        policy,
        dispatcher,
        audit,
        prometheus: createPrometheusClient({ url: prom.url, timeoutMs: 3000 }),
        intervalMs: 500,
        stepMs: () => 1000,
        stateKeys: testStateKeys,
        readPod: async (ns, pod) => core.readNamespacedPod({ namespace: ns, name: pod }),
        events: (pod, event) => {
          const meta = pod.metadata ?? {};
          events.record(
            { namespace: meta.namespace ?? '', name: meta.name ?? '', uid: meta.uid ?? '' },
            { type: event.type, reason: event.reason, action: event.reason, note: event.message },
          );
        },
        ...options,
      });
      loops.push(loop);
      return loop;
    },
    pod: (pod) => admin.readNamespacedPod({ namespace, name: pod }),
    async runPod(body) {
      await admin.createNamespacedPod({
        namespace,
        body: { ...body, metadata: { ...body.metadata, namespace } },
      });
      const podName = body.metadata?.name ?? '';
      return eventually(
        `pod ${podName} running with reported resources`,
        async () => {
          const pod = await admin.readNamespacedPod({ namespace, name: podName });
          const seen = view.pod(namespace, podName);
          return pod.status?.phase === 'Running' &&
            pod.status.containerStatuses?.every((s) => s.resources) &&
            seen?.status?.phase === 'Running'
            ? pod
            : undefined;
        },
        { timeoutMs: 60_000 },
      ).then((pod) => {
        started.set(podName, pod);
        return pod;
      });
    },
    async assertInPlace(name, restarts = 0) {
      const first = started.get(name);
      const now = await admin.readNamespacedPod({ namespace, name });
      assert.ok(first, `${name} was started by runPod`);
      assert.equal(
        now.metadata?.uid,
        first.metadata?.uid,
        `${name}: the same pod (uid), never replaced`,
      );
      assert.equal(
        restartsOf(now) - restartsOf(first),
        restarts,
        `${name}: containers restarted only as the test caused`,
      );
      return now;
    },
    async auditRecords() {
      await audit.flush();
      const dir = await freshClone(git, auditRepo, 'tollgate/audit');
      const { allFiles } = await import('../audit/support.ts');
      const { readFileSync } = await import('node:fs');
      return allFiles(join(dir, 'audit'))
        .filter((f) => f.endsWith('.jsonl'))
        .flatMap((f) =>
          readFileSync(f, 'utf8')
            .split('\n')
            .filter((line) => line.trim())
            .map((line) => JSON.parse(line) as Record<string, unknown>),
        );
    },
    async stop() {
      for (const loop of loops) await loop.stop();
      await dispatcher.close({ cancelQueued: true });
      await events.close();
      await audit.close();
      await view.stop();
      await kubelet.stop();
      await prom.stop();
      await git.close();
      await admin.deleteNamespace({ name: namespace }).catch(() => undefined);
    },
  };
}

/**
 * Runs worker `name` (100m, 512Mi) on `node` with a busy queue, then quiets the queue until
 * tollgate has lowered its memory one step to 384Mi (the policies' 128Mi step) and the
 * kubelet has actuated it. The queue is busy again when this returns the lowered pod.
 */
export async function runWorkerLoweredOneStep(
  world: ResizeWorld,
  queueMetric: string,
  pod: { name: string; app: string; node: string },
): Promise<V1Pod> {
  const Mi = 2 ** 20;
  const setQueue = (value: number) =>
    world.prom.set(queueMetric, { namespace: world.namespace, pod: pod.name }, value);
  setQueue(50);
  await world.runPod(workerPod(pod.name, pod.app, pod.node, { cpu: '100m', memory: '512Mi' }));
  setQueue(5);
  const lowered = await eventually(
    'memory lowered to 384Mi and actuated',
    async () => {
      const current = await world.pod(pod.name);
      return memoryOf(current) === 384 * Mi && actualMemoryOf(current) === 384 * Mi
        ? current
        : undefined;
    },
    { timeoutMs: 30_000 },
  );
  setQueue(50);
  return lowered;
}
