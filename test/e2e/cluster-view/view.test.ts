/**
 * The live cluster view against a real control plane, as the `tollgate` identity:
 * initial sync, namespace and object-set changes, an API server restart survived
 * with no event lost, and a 410 Gone answered by an atomic relist.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CoreV1Api, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { createClusterView, type LiveClusterView } from '../../../src/cluster/view.ts';
import { Informer, type RestartReason } from '../../../src/cluster/informer.ts';
import { createResourceSource, type ResourceSource } from '../../../src/cluster/source.ts';
import { informerRestarts } from '../../../src/cluster/informer-metrics.ts';
import type { ViewChange } from '../../../src/cluster/types.ts';

let cp: ControlPlane;
let admin: CoreV1Api;
const views: LiveClusterView[] = [];

before(async () => {
  cp = await sharedControlPlane();
  admin = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
  for (const name of ['view-a', 'view-b', 'view-restart', 'view-gone']) {
    await admin.createNamespace({ body: { metadata: { name } } });
  }
});
after(async () => {
  await Promise.all(views.map((v) => v.stop()));
});

function podBody(name: string): V1Pod {
  return {
    metadata: { name },
    spec: {
      schedulingGates: [{ name: 'tollgate.io/gate' }],
      containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10' }],
    },
  };
}

async function eventually(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function view(namespaces: string[]): LiveClusterView {
  const created = createClusterView({
    kubeConfig: cp.kubeConfig('tollgate'),
    namespaces,
    pageSize: 3,
    backoff: { baseMs: 200, maxMs: 2000 },
  });
  views.push(created);
  return created;
}

async function restartCount(resource: string, reason: string): Promise<number> {
  const metric = await informerRestarts.get();
  return (
    metric.values.find((v) => v.labels.resource === resource && v.labels.reason === reason)
      ?.value ?? 0
  );
}

test('the view syncs pods of managed namespaces, nodes and a referenced ConfigMap, and follows changes', async () => {
  for (let i = 0; i < 7; i++)
    await admin.createNamespacedPod({ namespace: 'view-a', body: podBody(`a-${i}`) });
  await admin.createNamespacedPod({ namespace: 'view-b', body: podBody('b-0') });
  await admin.createNode({ body: { metadata: { name: 'view-node-1', labels: { zone: 'z1' } } } });
  await admin.createNamespacedConfigMap({
    namespace: 'view-a',
    body: { metadata: { name: 'switch' }, data: { open: 'false' } },
  });
  await admin.createNamespacedConfigMap({
    namespace: 'view-a',
    body: { metadata: { name: 'unrelated' }, data: {} },
  });

  const live = view(['view-a']);
  const changes: ViewChange[] = [];
  live.onChange((c) => changes.push(c));
  live.watchObjects([{ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'view-a', name: 'switch' }]);
  live.start();
  await live.whenSynced(AbortSignal.timeout(20_000));
  // whenSynced covers pods, nodes and quotas; a referenced object is ready on its own
  // (objectProblem), its kind found by discovery first, so it may list after them.
  const switchRef = { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'view-a', name: 'switch' };
  await eventually(
    'the referenced ConfigMap listed',
    () => live.objectProblem(switchRef) === undefined,
  );

  assert.deepEqual([...live.pods()].map((p) => p.metadata?.name).sort(), [
    'a-0',
    'a-1',
    'a-2',
    'a-3',
    'a-4',
    'a-5',
    'a-6',
  ]);
  assert.equal(live.pod('view-b', 'b-0'), undefined, 'pods of unmanaged namespaces are not held');
  assert.ok([...live.nodes()].some((n) => n.metadata?.name === 'view-node-1'));
  const cm = live.object({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    namespace: 'view-a',
    name: 'switch',
  }) as KubernetesObject & { data?: Record<string, string> };
  assert.equal(cm?.data?.open, 'false');
  assert.equal(
    live.object({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'view-a', name: 'unrelated' }),
    undefined,
  );
  assert.equal(
    live.pod('view-a', 'a-0')?.metadata?.managedFields,
    undefined,
    'objects are trimmed',
  );
  for (const resource of ['pods', 'nodes', 'objects'] as const)
    assert.match(live.lastResourceVersion(resource) ?? '', /^\d+$/);

  await admin.replaceNamespacedConfigMap({
    name: 'switch',
    namespace: 'view-a',
    body: { metadata: { name: 'switch' }, data: { open: 'true' } },
  });
  await eventually('the ConfigMap change', () =>
    changes.some(
      (c) => c.resource === 'objects' && c.type === 'MODIFIED' && c.key === 'view-a/switch',
    ),
  );
  assert.equal(
    (
      live.object({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'view-a', name: 'switch' }) as {
        data?: Record<string, string>;
      }
    ).data?.open,
    'true',
  );

  live.setNamespaces(['view-a', 'view-b']);
  await eventually(
    'pods of the newly managed namespace',
    () => live.pod('view-b', 'b-0') !== undefined,
  );
  assert.ok(changes.some((c) => c.type === 'ADDED' && c.key === 'view-b/b-0'));

  live.watchObjects([
    { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'view-a', name: 'unrelated' },
  ]);
  await eventually(
    'the newly referenced ConfigMap',
    () =>
      live.object({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        namespace: 'view-a',
        name: 'unrelated',
      }) !== undefined,
  );
  assert.equal(
    live.object({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'view-a', name: 'switch' }),
    undefined,
    'no longer referenced',
  );
  assert.equal(live.synced, true);
});

test('a reference to a kind the API server does not serve is unreadable on its own: retried, explained, never holding up the view', async () => {
  const live = view(['view-a']);
  const nothing = { apiVersion: 'example.com/v1', kind: 'Nothing', namespace: 'view-a', name: 'x' };
  const served = { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'view-a', name: 'switch' };
  live.watchObjects([nothing, served]);
  live.start();
  await live.whenSynced(AbortSignal.timeout(20_000));
  assert.equal(live.synced, true);
  await eventually(
    'backoff restarts for the unknown kind',
    async () => (await restartCount('objects', 'error')) >= 2,
    15_000,
  );
  assert.match(live.objectProblem(nothing) ?? '', /does not serve/);
  await eventually(
    'the served reference listed',
    async () => live.objectProblem(served) === undefined,
    15_000,
  );
  const unreadable = live.references().filter((r) => !r.ready);
  assert.deepEqual(
    unreadable.map((r) => (r.ready ? '' : r.reason)),
    ['unserved'],
  );
  live.watchObjects([served]);
  assert.deepEqual(
    live.references().map((r) => r.ready),
    [true],
    'the unserved reference is gone once no policy names it',
  );
});

test('while the API server is unreachable each informer retries with growing delays, never in a storm, and never stops', async () => {
  const unreachable = cp.kubeConfig('tollgate');
  const cluster = unreachable.getCurrentCluster();
  assert.ok(cluster);
  // Port 1 on loopback: connection refused at once, the worst case for a retry storm.
  unreachable.loadFromOptions({
    clusters: [{ ...cluster, server: 'https://127.0.0.1:1' }],
    users: unreachable.users,
    contexts: unreachable.contexts,
    currentContext: unreachable.currentContext,
  });
  const restarts: RestartReason[] = [];
  const informer = new Informer({
    source: createResourceSource(unreachable, { apiVersion: 'v1', kind: 'Pod' }),
    backoff: { baseMs: 200, maxMs: 2000 },
    hooks: { restarted: (reason) => restarts.push(reason) },
  });
  informer.start();
  await new Promise((resolve) => setTimeout(resolve, 4000));
  await informer.stop();
  // Delays 100-200, 200-400, 400-800, 800-1600, 1000-2000 ms: 4 s hold 4 to 7 attempts.
  assert.ok(restarts.length >= 4 && restarts.length <= 8, `${restarts.length} attempts in 4 s`);
  assert.ok(restarts.every((r) => r === 'error'));
  assert.equal(informer.synced, false);
});

test('an API server restart is survived without restarting anything, and no event is lost', async () => {
  const namespace = 'view-restart';
  for (let i = 0; i < 5; i++)
    await admin.createNamespacedPod({ namespace, body: podBody(`before-${i}`) });
  const live = view([namespace]);
  const seen = new Map<string, ViewChange['type']>();
  live.onChange((c) => {
    if (c.resource === 'pods') seen.set(c.key, c.type);
  });
  live.start();
  await live.whenSynced(AbortSignal.timeout(20_000));
  const restartsBefore =
    (await restartCount('pods', 'closed')) +
    (await restartCount('pods', 'error')) +
    (await restartCount('pods', 'gone'));

  await admin.deleteNamespacedPod({ name: 'before-0', namespace, gracePeriodSeconds: 0 });
  await cp.restartApiServer();
  // Changes right after the server is back, while the view's watch is still reconnecting.
  for (let i = 0; i < 5; i++)
    await admin.createNamespacedPod({ namespace, body: podBody(`after-${i}`) });
  await admin.deleteNamespacedPod({ name: 'before-1', namespace, gracePeriodSeconds: 0 });
  await admin.deleteNamespacedPod({ name: 'after-0', namespace, gracePeriodSeconds: 0 });
  await admin.patchNamespacedPod({
    name: 'before-2',
    namespace,
    body: [{ op: 'add', path: '/metadata/labels', value: { moved: 'yes' } }],
  });

  const truth = async (): Promise<Map<string, string>> => {
    const list = await admin.listNamespacedPod({ namespace });
    return new Map(
      list.items.map((p) => [
        `${namespace}/${p.metadata?.name}`,
        p.metadata?.resourceVersion ?? '',
      ]),
    );
  };
  const held = (): Map<string, string> =>
    new Map(
      [...live.pods()].map((p) => [
        `${namespace}/${p.metadata?.name}`,
        p.metadata?.resourceVersion ?? '',
      ]),
    );
  await eventually(
    'the view to match a final list',
    async () => {
      const expected = await truth();
      const actual = held();
      return expected.size === actual.size && [...expected].every(([k, v]) => actual.get(k) === v);
    },
    60_000,
  );

  for (const key of ['before-0', 'before-1', 'after-0'])
    assert.equal(seen.get(`${namespace}/${key}`), 'DELETED', `${key} deletion was reported`);
  for (const key of ['after-1', 'after-2', 'after-3', 'after-4'])
    assert.equal(seen.get(`${namespace}/${key}`), 'ADDED', `${key} creation was reported`);
  assert.equal(seen.get(`${namespace}/before-2`), 'MODIFIED');
  assert.equal(live.pod(namespace, 'before-2')?.metadata?.labels?.moved, 'yes');
  const restartsAfter =
    (await restartCount('pods', 'closed')) +
    (await restartCount('pods', 'error')) +
    (await restartCount('pods', 'gone'));
  assert.ok(restartsAfter > restartsBefore, 'the pod informer restarted its watch by itself');
  const reasons = await Promise.all(
    (['closed', 'gone', 'error', 'timeout'] as const).map(
      async (r) => `${r}=${await restartCount('pods', r)}`,
    ),
  );
  console.log(`pod informer restarts after the API server restart: ${reasons.join(' ')}`);
  assert.equal(live.synced, true);
});

test('a 410 Gone from the real API server triggers an atomic relist with synthetic DELETED events', async () => {
  const namespace = 'view-gone';
  for (const name of ['keep', 'vanish'])
    await admin.createNamespacedPod({ namespace, body: podBody(name) });
  const real = createResourceSource(cp.kubeConfig('tollgate'), {
    apiVersion: 'v1',
    kind: 'Pod',
    namespace,
  });
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let first = true;
  // Holds the first watch until the test has changed the namespace, then opens it
  // from resourceVersion 1, long compacted out of the API server's window.
  const source: ResourceSource = {
    description: real.description,
    list: (options) => real.list(options),
    watch(start, onEvent, onDone) {
      if (!first) return real.watch(start, onEvent, onDone);
      first = false;
      let inner: ReturnType<ResourceSource['watch']> | undefined;
      let stopped = false;
      void released.then(() => {
        if (!stopped) inner = real.watch({ ...start, resourceVersion: '1' }, onEvent, onDone);
      });
      return {
        stop() {
          stopped = true;
          inner?.stop();
        },
      };
    },
  };
  const restarts: RestartReason[] = [];
  const informer = new Informer({
    source,
    hooks: { restarted: (reason) => restarts.push(reason) },
  });
  const changes: string[] = [];
  informer.onChange((c) => changes.push(`${c.type} ${c.key}`));
  informer.start();
  try {
    await informer.whenSynced(AbortSignal.timeout(20_000));
    const listedAt = informer.lastResourceVersion;
    await admin.deleteNamespacedPod({ name: 'vanish', namespace, gracePeriodSeconds: 0 });
    await admin.createNamespacedPod({ namespace, body: podBody('appear') });
    release();
    await eventually('the relist after 410', () => changes.includes(`DELETED ${namespace}/vanish`));
    assert.deepEqual(restarts.slice(0, 1), ['gone']);
    assert.ok(changes.includes(`ADDED ${namespace}/appear`));
    assert.deepEqual([...informer.values()].map((p) => p.metadata?.name).sort(), [
      'appear',
      'keep',
    ]);
    assert.ok(BigInt(informer.lastResourceVersion ?? '0') > BigInt(listedAt ?? '0'));
  } finally {
    await informer.stop();
  }
});
