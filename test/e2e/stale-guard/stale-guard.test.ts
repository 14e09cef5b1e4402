/**
 * The stale-guard with real parts: a real write through the dispatcher and the real
 * writer, a real informer (LiveClusterView) whose watch events are held back by a
 * wrapper around its real source, and live reads against a kube-apiserver that is
 * restarted under them.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { eventually } from '../../support/eventually.ts';
import { createClusterView, type LiveClusterView } from '../../../src/cluster/view.ts';
import { createResourceSource } from '../../../src/cluster/source.ts';
import { createWriteExecutor } from '../../../src/cluster/writer.ts';
import {
  FreshnessHealth,
  LiveReader,
  StaleGuard,
  type StaleGuardPolicy,
} from '../../../src/cluster/stale-guard.ts';
import { PriorityDispatcher } from '../../../src/dispatch/queue.ts';
import { holdable } from '../../support/holdable-source.ts';

const namespace = 'stale-guard-e2e';
const gate = 'tollgate.io/gate';
const policy: StaleGuardPolicy = {
  maxCacheLagMs: 2000,
  destructive: ['Cancel'],
  requeue: { baseMs: 50, maxMs: 1000 },
  liveReads: { qps: 20, burst: 5, breaker: { failureThreshold: 2, openMs: 1500 } },
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

test("a decision after tollgate's write, while the informer is held back, is skipped as stale and goes on once the cache catches up", async () => {
  const pod = await admin.createNamespacedPod({
    namespace,
    body: {
      metadata: { name: 'held' },
      spec: {
        schedulingGates: [{ name: gate }],
        containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10' }],
      },
    },
  });
  const sources: ReturnType<typeof holdable>[] = [];
  view = createClusterView({
    kubeConfig: cp.kubeConfig('tollgate'),
    namespaces: [namespace],
    sourceFactory: (target) => {
      const wrapped = holdable(createResourceSource(cp.kubeConfig('tollgate'), target));
      sources.push(wrapped);
      return wrapped;
    },
  });
  view.start();
  await view.whenSynced(AbortSignal.timeout(30_000));
  const guard = new StaleGuard({ policy, loop: 'gate-release' });
  assert.equal(
    guard.check(`${namespace}/held`, pod.metadata?.resourceVersion).fresh,
    false,
    'nothing is fresh before markSynced',
  );
  guard.markSynced();
  await eventually('the view to hold the pod', async () => view?.pod(namespace, 'held'));
  for (const source of sources) source.hold();

  const dispatcher = new PriorityDispatcher({
    executor: createWriteExecutor(cp.kubeConfig('tollgate')),
  });
  const answer = dispatcher.enqueue({
    key: `${namespace}/held`,
    target: {
      namespace,
      name: 'held',
      uid: pod.metadata?.uid ?? '',
      resourceVersion: pod.metadata?.resourceVersion ?? '',
    },
    op: { type: 'removeGate', gate, gateIndex: 0 },
    priority: 1,
    tenant: namespace,
    deadline: Date.now() + 30_000,
    decisionId: 'stale-e2e-1',
  });
  assert.ok(answer.accepted);
  const result = await answer.done;
  assert.equal(result.result, 'succeeded');
  const written = result.result === 'succeeded' ? result.resourceVersion : '';
  guard.recordWrite(`${namespace}/held`, written);
  await dispatcher.close();

  // The informer is held back: the cache still shows the pod as it was before the write.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const cached = view.pod(namespace, 'held') as V1Pod;
  assert.deepEqual(
    cached.spec?.schedulingGates?.map((g) => g.name),
    [gate],
    'cache has not seen the write',
  );
  const stale = guard.check(`${namespace}/held`, cached.metadata?.resourceVersion);
  assert.equal(stale.fresh, false);
  assert.equal(!stale.fresh && stale.reason, 'behind');
  assert.ok(!stale.fresh && stale.retryAfterMs === 50, 'first requeue after the base delay');

  for (const source of sources) source.release();
  const caughtUp = await eventually('the cache to catch up with the write', async () => {
    const now = view?.pod(namespace, 'held');
    return now && guard.check(`${namespace}/held`, now.metadata?.resourceVersion).fresh
      ? now
      : undefined;
  });
  assert.deepEqual(
    caughtUp.spec?.schedulingGates ?? [],
    [],
    'the decision now sees the released pod',
  );
  assert.equal(guard.size, 0, 'the entry is forgotten once the cache caught up');
});

test('live reads open the breaker while the API server is down and close it after the restart; the guard reports degraded meanwhile', async () => {
  const core = cp.kubeConfig('tollgate').makeApiClient(CoreV1Api);
  const changes: (string | undefined)[] = [];
  const health = new FreshnessHealth({ onChange: (degraded) => changes.push(degraded) });
  const reader = new LiveReader<V1Pod>({
    read: async (ns, name) => {
      try {
        return await core.readNamespacedPod({ namespace: ns, name });
      } catch (error) {
        if ((error as { code?: unknown }).code === 404) return undefined;
        throw error;
      }
    },
    policy: policy.liveReads,
    health,
  });
  const ok = await reader.read(namespace, 'held');
  assert.equal(ok.ok && ok.object?.metadata?.name, 'held');
  assert.deepEqual(await reader.read(namespace, 'absent'), { ok: true, object: undefined });

  const restarting = cp.restartApiServer();
  // While the API server is away reads fail; after failureThreshold the breaker refuses without sending.
  const refused = await eventually(
    'the breaker to open',
    async () => {
      const outcome = await reader.read(namespace, 'held');
      return !outcome.ok && reader.state === 'open' ? outcome : undefined;
    },
    { timeoutMs: 20_000, intervalMs: 20 },
  );
  assert.equal(refused.ok, false);
  assert.match(health.degraded ?? '', /live reads failing \(\d+ in a row\)/, 'degraded while open');
  await restarting;
  const closed = await eventually(
    'a probe to close the breaker after the restart',
    async () => {
      const outcome = await reader.read(namespace, 'held');
      return outcome.ok ? outcome : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
  assert.equal(closed.ok, true);
  assert.equal(reader.state, 'closed');
  assert.equal(health.degraded, undefined, 'no longer degraded once a read answers');
  assert.deepEqual(
    changes.map((c) => (c === undefined ? 'recovered' : 'degraded')),
    ['degraded', 'recovered'],
    'one change each way (one Event each in tollgate run)',
  );
});
