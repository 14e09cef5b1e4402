/**
 * The write executor against a real kube-apiserver, as the unprivileged `tollgate`
 * identity (RBAC from deploy/): every write asserts the state it was decided on.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { createApiCaller } from '../../../src/cluster/api-request.ts';
import {
  apiCallOf,
  createWriteExecutor,
  failedPatchTestMessage,
  failedPatchTestStatus,
} from '../../../src/cluster/writer.ts';
import type { WriteOperation, WriteRequest } from '../../../src/dispatch/types.ts';
import type { WriteExecutor } from '../../../src/dispatch/types.ts';

const namespace = 'writer-e2e';
const gate = 'tollgate.io/gate';
const foreignGate = 'example.com/hold';
let cp: ControlPlane;
let admin: CoreV1Api;
let write: WriteExecutor;

before(async () => {
  cp = await sharedControlPlane();
  admin = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
  write = createWriteExecutor(cp.kubeConfig('tollgate'));
  await admin.createNamespace({ body: { metadata: { name: namespace } } });
});
after(async () => {
  await admin.deleteNamespace({ name: namespace }).catch(() => undefined);
});

async function createPod(name: string, gates: string[]): Promise<V1Pod> {
  return admin.createNamespacedPod({
    namespace,
    body: {
      metadata: { name },
      spec: {
        schedulingGates: gates.map((g) => ({ name: g })),
        containers: [
          {
            name: 'app',
            image: 'registry.k8s.io/pause:3.10',
            resources: {
              requests: { cpu: '100m', memory: '64Mi' },
              limits: { cpu: '200m', memory: '64Mi' },
            },
          },
        ],
      },
    },
  });
}

function request(
  pod: V1Pod,
  op: WriteOperation,
  resourceVersion = pod.metadata?.resourceVersion ?? '',
): WriteRequest {
  const name = pod.metadata?.name ?? '';
  return {
    key: `${namespace}/${name}`,
    target: { namespace, name, uid: pod.metadata?.uid ?? '', resourceVersion },
    op,
    priority: 1,
    tenant: namespace,
    deadline: Date.now() + 60_000,
    decisionId: `test-${name}`,
  };
}

const signal = (): AbortSignal => new AbortController().signal;

/** Plain JSON of what the typed client returns (its model classes are not deep-equal to literals). */
const plain = <T>(value: T): T => JSON.parse(JSON.stringify(value ?? null)) as T;

async function rejection(
  promise: Promise<unknown>,
): Promise<{ statusCode?: number; conflict?: boolean; message: string; reason?: string }> {
  try {
    await promise;
  } catch (error) {
    return error as { statusCode?: number; conflict?: boolean; message: string };
  }
  assert.fail('the write was expected to fail');
}

test("removeGate removes only tollgate's gate and leaves a foreign gate in place", async () => {
  const pod = await createPod('two-gates', [foreignGate, gate]);
  const { resourceVersion } = await write(
    request(pod, { type: 'removeGate', gate, gateIndex: 1 }),
    signal(),
  );
  const after = await admin.readNamespacedPod({ name: 'two-gates', namespace });
  assert.deepEqual(plain(after.spec?.schedulingGates), [{ name: foreignGate }]);
  assert.equal(after.metadata?.resourceVersion, resourceVersion);
});

test('removeGate on the only gate leaves the pod without gates', async () => {
  const pod = await createPod('one-gate', [gate]);
  await write(request(pod, { type: 'removeGate', gate, gateIndex: 0 }), signal());
  const after = await admin.readNamespacedPod({ name: 'one-gate', namespace });
  assert.deepEqual(after.spec?.schedulingGates ?? [], []);
});

test('removeGate decided on a stale resourceVersion fails as a conflict and removes nothing', async () => {
  const pod = await createPod('stale-gate', [gate]);
  // Someone else changes the pod after tollgate decided on it.
  await admin.patchNamespacedPod(
    { name: 'stale-gate', namespace, body: { metadata: { labels: { touched: 'yes' } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  const error = await rejection(
    write(request(pod, { type: 'removeGate', gate, gateIndex: 0 }), signal()),
  );
  console.log(
    `failed JSON-patch test (stale resourceVersion): statusCode=${error.statusCode} reason=${error.reason} message=${error.message}`,
  );
  assert.equal(error.statusCode, failedPatchTestStatus);
  assert.equal(error.conflict, true);
  assert.match(error.message, new RegExp(failedPatchTestMessage));
  const after = await admin.readNamespacedPod({ name: 'stale-gate', namespace });
  assert.deepEqual(plain(after.spec?.schedulingGates), [{ name: gate }]);
});

test('removeGate fails as a conflict when the gate is no longer at the decided index', async () => {
  const pod = await createPod('moved-gate', [foreignGate, gate]);
  const error = await rejection(
    write(request(pod, { type: 'removeGate', gate, gateIndex: 0 }), signal()),
  );
  console.log(
    `failed JSON-patch test (gate name at index): statusCode=${error.statusCode} message=${error.message}`,
  );
  assert.equal(error.conflict, true);
  const after = await admin.readNamespacedPod({ name: 'moved-gate', namespace });
  assert.deepEqual(plain(after.spec?.schedulingGates), [{ name: foreignGate }, { name: gate }]);
});

test('delete with preconditions: a wrong uid or resourceVersion is a conflict, the right ones delete', async () => {
  // deploy/base grants no pod delete (only deploy/components/cancel does), so the
  // preconditions are proven with an identity that may delete; the base identity's
  // refusal is checked below.
  const deleter = createWriteExecutor(cp.kubeConfig('admin'));
  const pod = await createPod('to-delete', [gate]);
  const base = request(pod, { type: 'delete', reason: 'expired' });
  const wrongUidError = await rejection(
    deleter(
      { ...base, target: { ...base.target, uid: '00000000-0000-0000-0000-000000000000' } },
      signal(),
    ),
  );
  assert.equal(wrongUidError.statusCode, 409);
  assert.equal(wrongUidError.conflict, true);
  const staleError = await rejection(
    deleter(request(pod, { type: 'delete', reason: 'expired' }, '1'), signal()),
  );
  assert.equal(staleError.statusCode, 409);
  assert.equal(staleError.conflict, true);
  await deleter(base, signal());
  const gone = await rejection(admin.readNamespacedPod({ name: 'to-delete', namespace }));
  assert.equal((gone as { code?: number }).code, 404);
});

test('delete as the base tollgate identity is refused with 403, a final error', async () => {
  const pod = await createPod('not-deletable', [gate]);
  const error = await rejection(
    write(request(pod, { type: 'delete', reason: 'expired' }), signal()),
  );
  assert.equal(error.statusCode, 403);
  assert.equal(error.conflict, false);
});

test('resize through pods/resize is accepted, and a stale resourceVersion is a conflict', async () => {
  await createPod('to-resize', []);
  // The scheduler marks the gateless pod unschedulable (no nodes); decide on the pod after that write.
  let pod = await admin.readNamespacedPod({ name: 'to-resize', namespace });
  for (let i = 0; i < 100 && !pod.status?.conditions?.some((c) => c.type === 'PodScheduled'); i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    pod = await admin.readNamespacedPod({ name: 'to-resize', namespace });
  }
  const resize: WriteOperation = {
    type: 'resize',
    containers: [
      { name: 'app', resources: { requests: { cpu: '150m' }, limits: { cpu: '300m' } } },
    ],
  };
  const stale = await rejection(write(request(pod, resize, '1'), signal()));
  assert.equal(stale.statusCode, 409);
  assert.equal(stale.conflict, true);
  const { resourceVersion } = await write(request(pod, resize), signal());
  const after = await admin.readNamespacedPod({ name: 'to-resize', namespace });
  assert.equal(after.metadata?.resourceVersion, resourceVersion);
  assert.deepEqual(plain(after.spec?.containers[0]?.resources?.requests), {
    cpu: '150m',
    memory: '64Mi',
  });
  assert.deepEqual(plain(after.spec?.containers[0]?.resources?.limits), {
    cpu: '300m',
    memory: '64Mi',
  });
});

test('annotate merges tollgate annotations, removes one with null, and refuses a stale resourceVersion', async () => {
  const pod = await createPod('to-annotate', [gate]);
  const first = await write(
    request(pod, { type: 'annotate', annotations: { 'tollgate.io/a': '1', 'tollgate.io/b': '2' } }),
    signal(),
  );
  await write(
    request(
      pod,
      { type: 'annotate', annotations: { 'tollgate.io/b': null } },
      first.resourceVersion,
    ),
    signal(),
  );
  const after = await admin.readNamespacedPod({ name: 'to-annotate', namespace });
  assert.equal(after.metadata?.annotations?.['tollgate.io/a'], '1');
  assert.equal(after.metadata?.annotations?.['tollgate.io/b'], undefined);
  const stale = await rejection(
    write(request(pod, { type: 'annotate', annotations: { 'tollgate.io/c': '3' } }), signal()),
  );
  assert.equal(stale.statusCode, 409);
});

test('removeGate at an index that no longer exists is a conflict (the pod changed since the decision)', async () => {
  const pod = await createPod('validation', [gate]);
  const error = await rejection(
    write(request(pod, { type: 'removeGate', gate, gateIndex: 5 }), signal()),
  );
  assert.equal(error.conflict, true, 'a vanished index means the pod changed since the decision');
});

test('a write to a missing pod fails with 404 and the API message', async () => {
  const error = await rejection(
    write(
      request(
        { metadata: { name: 'nobody', uid: 'u', resourceVersion: '1' } },
        { type: 'removeGate', gate, gateIndex: 0 },
      ),
      signal(),
    ),
  );
  assert.equal(error.statusCode, 404);
  assert.equal(error.conflict, false);
  assert.match(error.message, /pods "nobody" not found/);
});

test('an aborted signal stops the write before it reaches the API', async () => {
  const pod = await createPod('aborted', [gate]);
  const controller = new AbortController();
  controller.abort(new DOMException('cancelled by test', 'AbortError'));
  await assert.rejects(
    write(request(pod, { type: 'removeGate', gate, gateIndex: 0 }), controller.signal),
    { name: 'AbortError' },
  );
  const after = await admin.readNamespacedPod({ name: 'aborted', namespace });
  assert.deepEqual(plain(after.spec?.schedulingGates), [{ name: gate }]);
});

test('aborting while the write is in flight rejects it with the abort reason', async () => {
  const pod = await createPod('aborted-in-flight', [gate]);
  const controller = new AbortController();
  const pending = write(
    request(pod, { type: 'annotate', annotations: { 'tollgate.io/x': '1' } }),
    controller.signal,
  );
  controller.abort(new DOMException('superseded', 'AbortError'));
  await assert.rejects(pending, { name: 'AbortError', message: 'superseded' });
});

test("the API server answers a write with the written object's metadata alone, and its resourceVersion is the one the executor reports", async () => {
  const pod = await createPod('metadata-answer', [gate]);
  const call = apiCallOf(
    request(pod, {
      type: 'podCondition',
      condition: { type: 'tollgate.io/Released', status: 'False', reason: 'Held', message: 'm' },
    }),
    'tollgate',
  );
  const answer = JSON.parse(await createApiCaller(cp.kubeConfig('tollgate'))(call, signal())) as {
    kind?: string;
    metadata?: { name?: string; resourceVersion?: string };
    spec?: unknown;
  };
  assert.equal(answer.kind, 'PartialObjectMetadata');
  assert.equal(answer.metadata?.name, 'metadata-answer');
  assert.equal(answer.spec, undefined, 'no spec, no status');
  const read = await admin.readNamespacedPod({ namespace, name: 'metadata-answer' });
  assert.equal(answer.metadata?.resourceVersion, read.metadata?.resourceVersion);
  const written = await write(
    request(read, { type: 'annotate', annotations: { 'tollgate.io/review': 'yes' } }),
    signal(),
  );
  const after = await admin.readNamespacedPod({ namespace, name: 'metadata-answer' });
  assert.equal(written.resourceVersion, after.metadata?.resourceVersion);
});
