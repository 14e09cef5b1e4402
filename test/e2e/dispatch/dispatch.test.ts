/**
 * The dispatcher against a real kube-apiserver, writing as the unprivileged `tollgate`
 * identity through the real write executor (src/cluster/writer.ts).
 *
 * The API server runs with API Priority and Fairness off and one mutating request in
 * flight at most, so concurrent patches are answered 429 (system:masters is exempt from
 * that limit, which is why the test's own set-up writes as admin and tollgate does not).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { createWriteExecutor } from '../../../src/cluster/writer.ts';
import { PriorityDispatcher } from '../../../src/dispatch/queue.ts';
import type { WriteRequest, WriteResult } from '../../../src/dispatch/types.ts';
import { registry } from '../../../src/observe/metrics.ts';

const gate = 'tollgate.io/gate';
let cp: ControlPlane;
let admin: CoreV1Api;

before(async () => {
  cp = await startControlPlane({
    name: 'dispatch',
    apiServerArgs: [
      '--enable-priority-and-fairness=false',
      '--max-requests-inflight=2',
      '--max-mutating-requests-inflight=1',
    ],
  });
  admin = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
});
after(async () => {
  await cp?.stop();
});

async function createPods(namespace: string, count: number): Promise<V1Pod[]> {
  await admin.createNamespace({ body: { metadata: { name: namespace } } });
  const pods: V1Pod[] = [];
  for (let i = 0; i < count; i++) {
    pods.push(
      await admin.createNamespacedPod({
        namespace,
        body: {
          metadata: { name: `p${i}`, labels: { writer: 'none' } },
          spec: {
            schedulingGates: [{ name: gate }],
            containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10' }],
          },
        },
      }),
    );
  }
  return pods;
}

function removeGate(
  pod: V1Pod,
  resourceVersion = pod.metadata?.resourceVersion ?? '',
): WriteRequest {
  const namespace = pod.metadata?.namespace ?? '';
  const name = pod.metadata?.name ?? '';
  return {
    key: `${namespace}/${name}`,
    target: { namespace, name, uid: pod.metadata?.uid ?? '', resourceVersion },
    op: { type: 'removeGate', gate, gateIndex: 0 },
    priority: 1,
    tenant: namespace,
    deadline: Date.now() + 120_000,
    decisionId: `e2e-${namespace}-${name}`,
  };
}

async function counter(name: string, labels: Record<string, string>): Promise<number> {
  const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  return values
    .filter((v) =>
      Object.entries(labels).every(
        ([k, value]) => (v.labels as Record<string, unknown>)[k] === value,
      ),
    )
    .reduce((sum, v) => sum + v.value, 0);
}

test('with the API server limited to one mutating request, many concurrent patches back off on 429 and all finish', async () => {
  const namespace = 'dispatch-throttle';
  const pods = await createPods(namespace, 60);
  const dispatcher = new PriorityDispatcher({
    executor: createWriteExecutor(cp.kubeConfig('tollgate')),
    capacity: 100,
    concurrency: 12,
    qps: 1000,
    burst: 1000,
    retry: { baseMs: 50, maxMs: 2000, maxAttempts: 30, maxElapsedMs: 90_000 },
  });
  const throttledBefore = await counter('tollgate_dispatch_retries_total', {
    op: 'removeGate',
    reason: 'throttled',
  });
  const code429Before = await counter('tollgate_api_requests_total', {
    verb: 'patch',
    code: '429',
  });
  const started = Date.now();
  const results = await Promise.all(
    pods.map((pod) => {
      const answer = dispatcher.enqueue(removeGate(pod));
      assert.ok(answer.accepted);
      return answer.done;
    }),
  );
  const elapsed = Date.now() - started;
  await dispatcher.close();
  const byResult = new Map<string, number>();
  for (const result of results) byResult.set(result.result, (byResult.get(result.result) ?? 0) + 1);
  const throttled =
    (await counter('tollgate_dispatch_retries_total', { op: 'removeGate', reason: 'throttled' })) -
    throttledBefore;
  const code429 =
    (await counter('tollgate_api_requests_total', { verb: 'patch', code: '429' })) - code429Before;
  process.stderr.write(
    `[dispatch e2e] 60 patches in ${elapsed} ms: ${JSON.stringify(Object.fromEntries(byResult))}, 429 answers ${code429}, throttled retries ${throttled}\n`,
  );
  assert.deepEqual(Object.fromEntries(byResult), { succeeded: 60 }, 'every write finished');
  assert.ok(code429 > 0, 'the API server answered some patches 429');
  assert.ok(throttled > 0, 'the dispatcher retried throttled writes');
  const list = await admin.listNamespacedPod({ namespace });
  for (const pod of list.items) {
    assert.deepEqual(pod.spec?.schedulingGates ?? [], [], `${pod.metadata?.name} released`);
  }
});

test('outside writers to the same pods make tollgate writes come back as conflict, never overwriting them', async () => {
  const namespace = 'dispatch-conflict';
  const pods = await createPods(namespace, 30);
  const labelPatch = (value: string) => ({ metadata: { labels: { writer: value } } });
  const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  // Half the pods are changed by someone else after tollgate decided: their decision is stale for sure.
  for (const pod of pods.slice(0, 15)) {
    await admin.patchNamespacedPod(
      { namespace, name: pod.metadata?.name ?? '', body: labelPatch('before') },
      mergePatch,
    );
  }
  const dispatcher = new PriorityDispatcher({
    executor: createWriteExecutor(cp.kubeConfig('tollgate')),
    capacity: 100,
    concurrency: 4,
    qps: 50,
    burst: 5,
    retry: { baseMs: 50, maxMs: 2000, maxAttempts: 30, maxElapsedMs: 90_000 },
  });
  // The other half race with an outside writer that keeps patching them while tollgate writes.
  let racing = true;
  const lastWritten = new Map<string, string>();
  const outside = (async () => {
    for (let round = 0; racing && round < 200; round++) {
      for (const pod of pods.slice(15)) {
        const name = pod.metadata?.name ?? '';
        const value = `round-${round}`;
        await admin.patchNamespacedPod({ namespace, name, body: labelPatch(value) }, mergePatch);
        lastWritten.set(name, value);
      }
    }
  })();
  const results: WriteResult[] = await Promise.all(
    pods.map((pod) => {
      const answer = dispatcher.enqueue(removeGate(pod));
      assert.ok(answer.accepted);
      return answer.done;
    }),
  );
  racing = false;
  await outside;
  await dispatcher.close();
  const list = await admin.listNamespacedPod({ namespace });
  const byName = new Map(list.items.map((pod) => [pod.metadata?.name ?? '', pod]));
  let conflicts = 0;
  pods.forEach((pod, index) => {
    const name = pod.metadata?.name ?? '';
    const now = byName.get(name);
    const result = results[index] as WriteResult;
    const gates = (now?.spec?.schedulingGates ?? []).map((g) => g.name);
    if (index < 15) {
      assert.equal(
        result.result,
        'conflict',
        `${name}: a decision made before someone else's change conflicts`,
      );
    } else {
      assert.ok(
        ['conflict', 'succeeded'].includes(result.result),
        `${name}: ${JSON.stringify(result)}`,
      );
    }
    if (result.result === 'conflict') {
      conflicts += 1;
      assert.deepEqual(gates, [gate], `${name}: a conflicting write changed nothing`);
    } else {
      assert.deepEqual(gates, [], `${name}: gate removed`);
    }
    // The outside writer's change is never overwritten.
    const expected = index < 15 ? 'before' : (lastWritten.get(name) ?? 'none');
    assert.equal(now?.metadata?.labels?.writer, expected, `${name}: outside writer's label kept`);
  });
  const codes = (
    (await registry.getSingleMetric('tollgate_api_requests_total')?.get())?.values ?? []
  )
    .filter((v) => v.labels.verb === 'patch' && v.value > 0)
    .map((v) => `${v.labels.code}=${v.value}`);
  process.stderr.write(
    `[dispatch e2e] conflicts ${conflicts} of 30 (15 certain, 15 raced); patch answers in this process: ${codes.join(' ')}\n`,
  );
});

test('writes sent while the API server restarts are retried (network errors, and the 403s of its unsynced RBAC cache) and all succeed', async () => {
  const namespace = 'dispatch-restart';
  const pods = await createPods(namespace, 20);
  const dispatcher = new PriorityDispatcher({
    executor: createWriteExecutor(cp.kubeConfig('tollgate')),
    capacity: 100,
    concurrency: 2,
    // Slow enough that most writes are sent while the API server is away.
    qps: 4,
    burst: 1,
    retry: { baseMs: 200, maxMs: 2000, maxAttempts: 40, maxElapsedMs: 90_000 },
  });
  const networkBefore = await counter('tollgate_dispatch_retries_total', {
    op: 'removeGate',
    reason: 'network',
  });
  const forbiddenBefore = await counter('tollgate_dispatch_retries_total', {
    op: 'removeGate',
    reason: 'forbidden',
  });
  const restarting = cp.restartApiServer();
  const results = await Promise.all(
    pods.map((pod) => {
      const answer = dispatcher.enqueue(removeGate(pod));
      assert.ok(answer.accepted);
      return answer.done;
    }),
  );
  await restarting;
  await dispatcher.close();
  const network =
    (await counter('tollgate_dispatch_retries_total', { op: 'removeGate', reason: 'network' })) -
    networkBefore;
  const codes = (
    (await registry.getSingleMetric('tollgate_api_requests_total')?.get())?.values ?? []
  )
    .filter((v) => v.labels.verb === 'patch' && v.value > 0)
    .map((v) => `${v.labels.code}=${v.value}`);
  process.stderr.write(
    `[dispatch e2e] restart: network retries ${network}; patch answers so far: ${codes.join(' ')}\n`,
  );
  assert.ok(network > 0, 'some writes met the API server away and were retried');
  // Measured: a restarted kube-apiserver serves requests before its RBAC cache has
  // synced and answers them 403. The dispatcher sends a 403 again, a few times with
  // backoff (retry.maxForbiddenAttempts): every write must succeed, none fail with it.
  const forbidden =
    (await counter('tollgate_dispatch_retries_total', { op: 'removeGate', reason: 'forbidden' })) -
    forbiddenBefore;
  process.stderr.write(`[dispatch e2e] restart: 403 retries ${forbidden}\n`);
  results.forEach((result, index) =>
    assert.equal(
      result.result,
      'succeeded',
      `${pods[index]?.metadata?.name}: ${JSON.stringify(result)}`,
    ),
  );
  const list = await admin.listNamespacedPod({ namespace });
  for (const pod of list.items)
    assert.deepEqual(pod.spec?.schedulingGates ?? [], [], `${pod.metadata?.name} released`);
});
