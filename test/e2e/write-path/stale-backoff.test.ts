/**
 * Per-key stale backoff with real parts: a real kube-apiserver, the real informer
 * (LiveClusterView) whose watch events are held back by a wrapper around its real
 * source, the real dispatcher and writer as the `tollgate` identity, the real
 * gate-release loop and stale-guard, and live reads through the bounded reader
 * (LiveReader) that `tollgate run` uses. The clock is injected: passes are explicit and
 * the backoff is read from the pass reports, never from elapsed time.
 *
 * tollgate wrote the pod (an annotation); the view never shows that write. The pod's
 * Release waits its own backoff (100 ms, then 200 ms: a pass inside it records nothing
 * again), and after 2 skips one live read decides: the gate is removed against the
 * live resourceVersion, which the API server's resourceVersion test would refuse for the
 * cached one.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CoreV1Api } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { eventually } from '../../support/eventually.ts';
import { createClusterView, type LiveClusterView } from '../../../src/cluster/view.ts';
import { createResourceSource } from '../../../src/cluster/source.ts';
import { createWriteExecutor } from '../../../src/cluster/writer.ts';
import { boundedPodReader, podReader } from '../../../src/cluster/client.ts';
import { StaleGuard } from '../../../src/cluster/stale-guard.ts';
import { PriorityDispatcher } from '../../../src/dispatch/queue.ts';
import { startGateReleaseLoop } from '../../../src/loops/gate-release.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';
import { holdable } from '../../support/holdable-source.ts';
import { recordingAudit } from '../../support/recording-audit.ts';

const namespace = 'stale-backoff-e2e';
const gate = `${namespace}.tollgate.io/ready`;
const key = `${namespace}/behind`;
const base = aPolicy()
  .tenant(aTenant(namespace))
  .gatePolicy(aGatePolicy('ready', namespace).conditions({ type: 'Approved' }))
  .approve('Release', namespace, 'behind')
  .obj();
const policy = {
  ...base,
  staleness: { ...base.staleness, requeue: { baseMs: 100, maxMs: 800 } },
};

let cp: ControlPlane;
let admin: CoreV1Api;
let view: LiveClusterView | undefined;

before(async () => {
  cp = await sharedControlPlane();
  admin = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
  await admin.createNamespace({ body: { metadata: { name: namespace } } });
});
after(async () => {
  await view?.stop();
  await admin.deleteNamespace({ name: namespace }).catch(() => undefined);
});

async function liveReadsOk(): Promise<number> {
  const values = (await registry.getSingleMetric('tollgate_live_reads_total')?.get())?.values;
  return values?.find((v) => v.labels.result === 'ok')?.value ?? 0;
}

test('a pod the view stays behind on waits its own backoff, then one live read decides and the gate goes', async () => {
  const pod = await admin.createNamespacedPod({
    namespace,
    body: {
      metadata: { name: 'behind' },
      spec: {
        schedulingGates: [{ name: gate }],
        containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10' }],
      },
    },
  });
  const kubeConfig = cp.kubeConfig('tollgate');
  const sources: ReturnType<typeof holdable>[] = [];
  view = createClusterView({
    kubeConfig,
    namespaces: [namespace],
    sourceFactory: (target) => {
      const wrapped = holdable(createResourceSource(kubeConfig, target));
      sources.push(wrapped);
      return wrapped;
    },
  });
  view.start();
  await view.whenSynced(AbortSignal.timeout(30_000));
  await eventually('the view to hold the pod', async () => view?.pod(namespace, 'behind'));
  for (const source of sources) source.hold();

  // tollgate's own write, which the held view never shows.
  const dispatcher = new PriorityDispatcher({ executor: createWriteExecutor(kubeConfig) });
  const clock = new ManualClock(Date.now());
  const annotated = dispatcher.enqueue({
    key,
    target: {
      namespace,
      name: 'behind',
      uid: pod.metadata?.uid ?? '',
      resourceVersion: pod.metadata?.resourceVersion ?? '',
    },
    op: { type: 'annotate', annotations: { 'tollgate.io/note': 'written by tollgate' } },
    priority: 1,
    tenant: namespace,
    deadline: clock.now() + 30_000,
    decisionId: 'stale-backoff-e2e-annotate',
  });
  assert.ok(annotated.accepted);
  const written = await annotated.done;
  assert.equal(written.result, 'succeeded');
  const guard = new StaleGuard({
    policy: policy.staleness,
    loop: 'gate-release',
    restored: false,
    clock,
    liveReadAfterSkips: 2,
  });
  guard.recordWrite(key, written.result === 'succeeded' ? written.resourceVersion : '');

  const { audit, recorded } = recordingAudit();
  const loop = startGateReleaseLoop({
    clock,
    view,
    dispatcher,
    audit,
    policy: () => policy,
    staleGuard: guard,
    cacheLagMs: () => 0,
    readPod: boundedPodReader(podReader(kubeConfig), () => policy.staleness.liveReads, clock),
    autoStart: false,
  });
  const readsBefore = await liveReadsOk();
  const requeues: (number | undefined)[] = [];
  for (const advance of [40, undefined, undefined]) {
    const report = await loop.pass();
    await report.settled;
    requeues.push(report.staleRetryAfterMs);
    clock.advance(advance ?? report.staleRetryAfterMs ?? 0);
  }
  const gatedMeanwhile = await admin.readNamespacedPod({ namespace, name: 'behind' });
  const decided = await loop.pass();
  await decided.settled;
  await loop.stop();
  await dispatcher.close();

  assert.deepEqual(requeues, [100, 60, 200], 'its own backoff: 100 ms, the rest of it, 200 ms');
  assert.deepEqual(
    gatedMeanwhile.spec?.schedulingGates?.map((g) => g.name),
    [gate],
    'nothing was sent while the pod waited',
  );
  assert.equal(recorded.filter((d) => d.kind === 'SkipStale').length, 2, 'one per counted skip');
  assert.equal((await liveReadsOk()) - readsBefore, 1, 'one live read decided');
  const live = await admin.readNamespacedPod({ namespace, name: 'behind' });
  assert.deepEqual(live.spec?.schedulingGates ?? [], [], 'the gate is removed on the API server');
  const release = recorded.find((d) => d.kind === 'Release');
  assert.equal(release?.outcome.result, 'succeeded');
  assert.equal(
    view.pod(namespace, 'behind')?.metadata?.resourceVersion,
    pod.metadata?.resourceVersion,
    'the view never caught up: the live read, not the cache, decided',
  );
});
