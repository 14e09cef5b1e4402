/**
 * The simulated kubelet's test hooks and its own behaviour on the real control plane:
 * node objects and leases, OOM kills, image presence, node failure, pod-level resources
 * and their in-place resize, deletion of terminating pods, a relist after an apiserver
 * restart, and a few thousand pods.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  CoordinationV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
} from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { SimulatedKubelet } from '../../support/kubelet.ts';
import { creatable, eventually, removeNamespace, runNamespace } from '../../support/eventually.ts';
import { aPod } from '../../builders/pod.ts';

const namespace = runNamespace('e2e-kubelet');
const bulkNamespace = runNamespace('e2e-bulk');
const strategic = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

describe('simulated kubelet', () => {
  let cp: ControlPlane;
  let core: CoreV1Api;
  let kubelet: SimulatedKubelet;

  before(async () => {
    cp = await sharedControlPlane();
    core = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
    kubelet = new SimulatedKubelet(cp.kubeConfig('admin'));
    await kubelet.addNode('k-warm', {
      cpu: '4',
      memory: '8Gi',
      images: ['registry.example/app:1'],
      labels: { pool: 'k' },
    });
    await kubelet.addNode('k-spare', { cpu: '4', memory: '8Gi', labels: { pool: 'k' } });
    await kubelet.start();
    await core.createNamespace({ body: { metadata: { name: namespace } } });
  });

  after(async () => {
    await kubelet?.stop();
    await removeNamespace(core, namespace);
    await removeNamespace(core, bulkNamespace);
  });

  async function runOn(pod: V1Pod, node: string): Promise<V1Pod> {
    pod.spec!.nodeSelector = { 'kubernetes.io/hostname': node };
    const name = pod.metadata!.name!;
    await core.createNamespacedPod({ namespace, body: creatable(pod) });
    return eventually(`${name} to run`, async () => {
      const current = await core.readNamespacedPod({ name, namespace });
      return current.status?.phase === 'Running' ? current : undefined;
    });
  }

  test('nodes are Ready, untainted, carry capacity, allocatable and images, and renew their lease', async () => {
    const node = await core.readNode({ name: 'k-warm' });
    assert.equal(node.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'True');
    assert.equal(node.spec?.taints, undefined);
    assert.equal(node.status?.allocatable?.cpu, '4');
    assert.equal(node.status?.capacity?.memory, '8Gi');
    assert.deepEqual(
      node.status?.images?.map((i) => i.names),
      [['registry.example/app:1']],
    );
    const lease = await cp
      .kubeConfig('admin')
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ name: 'k-warm', namespace: 'kube-node-lease' });
    assert.equal(lease.spec?.holderIdentity, 'k-warm');
    assert.ok(lease.spec?.renewTime, 'the lease has a renew time');
  });

  test('setImages makes an image present on a node', async () => {
    await kubelet.setImages('k-spare', ['registry.example/app:2', 'registry.example/sidecar:1']);
    const node = await core.readNode({ name: 'k-spare' });
    assert.deepEqual(
      node.status?.images?.map((i) => i.names?.[0]),
      ['registry.example/app:2', 'registry.example/sidecar:1'],
    );
  });

  test('oomKill marks the container OOMKilled in lastState and counts a restart', async () => {
    await runOn(
      aPod('oom', namespace).requests({ cpu: '100m', memory: '64Mi' }, { memory: '64Mi' }).obj(),
      'k-warm',
    );
    await kubelet.oomKill(namespace, 'oom', 'app');
    const status = (await core.readNamespacedPod({ name: 'oom', namespace })).status
      ?.containerStatuses?.[0];
    assert.equal(status?.restartCount, 1);
    assert.equal(status?.lastState?.terminated?.reason, 'OOMKilled');
    assert.equal(status?.lastState?.terminated?.exitCode, 137);
    assert.ok(status?.state?.running, 'the container runs again');
    await assert.rejects(
      kubelet.oomKill(namespace, 'oom', 'nope'),
      /has no running container "nope" \(has app\)/,
    );
  });

  test('a pod with pod-level resources reports them and resizes them in place', async () => {
    const pod = aPod('pod-level', namespace)
      .podResources({ cpu: '500m', memory: '256Mi' }, { cpu: '1', memory: '512Mi' })
      .obj();
    const started = await runOn(pod, 'k-warm');
    assert.equal(started.status?.resources?.requests?.cpu, '500m');
    assert.equal(started.status?.allocatedResources?.cpu, '500m');
    const patched = await core.patchNamespacedPodResize(
      {
        name: 'pod-level',
        namespace,
        body: { spec: { resources: { requests: { cpu: '700m' }, limits: { cpu: '1' } } } },
      },
      strategic,
    );
    const done = await eventually('the pod-level resize to complete', async () => {
      const current = await core.readNamespacedPod({ name: 'pod-level', namespace });
      const settled = !current.status?.conditions?.some((c) => c.type.startsWith('PodResize'));
      return current.status?.resources?.requests?.cpu === '700m' && settled ? current : undefined;
    });
    assert.equal(done.status?.allocatedResources?.cpu, '700m');
    assert.equal(done.status?.observedGeneration, patched.metadata?.generation);
  });

  test('failResize reports PodResizeInProgress reason Error until the actuation succeeds on retry', async () => {
    await runOn(
      aPod('flaky', namespace)
        .requests({ cpu: '200m', memory: '64Mi' }, { cpu: '400m', memory: '128Mi' })
        .obj(),
      'k-spare',
    );
    kubelet.failResize(namespace, 'flaky', { message: 'runtime said no', times: 3 });
    await core.patchNamespacedPodResize(
      {
        name: 'flaky',
        namespace,
        body: {
          spec: {
            containers: [
              { name: 'app', resources: { requests: { cpu: '300m' }, limits: { cpu: '400m' } } },
            ],
          },
        },
      },
      strategic,
    );
    const failing = await eventually('PodResizeInProgress reason Error', async () => {
      const current = await core.readNamespacedPod({ name: 'flaky', namespace });
      const inProgress = current.status?.conditions?.find((c) => c.type === 'PodResizeInProgress');
      return inProgress?.reason === 'Error' ? current : undefined;
    });
    assert.equal(
      failing.status?.conditions?.find((c) => c.type === 'PodResizeInProgress')?.message,
      'runtime said no',
    );
    assert.equal(
      failing.status?.containerStatuses?.[0]?.resources?.requests?.cpu,
      '200m',
      'actual unchanged while failing',
    );
    assert.equal(
      failing.status?.containerStatuses?.[0]?.allocatedResources?.cpu,
      '300m',
      'allocation already made',
    );
    await eventually('the resize to complete after the failures', async () => {
      const current = await core.readNamespacedPod({ name: 'flaky', namespace });
      const settled = !current.status?.conditions?.some((c) => c.type.startsWith('PodResize'));
      return current.status?.containerStatuses?.[0]?.resources?.requests?.cpu === '300m' && settled;
    });
  });

  test('a deleted pod is removed by the kubelet instead of hanging in Terminating', async () => {
    await runOn(aPod('short-lived', namespace).obj(), 'k-spare');
    await core.deleteNamespacedPod({ name: 'short-lived', namespace });
    await eventually(
      'the pod to be gone',
      async () =>
        (await core.listNamespacedPod({ namespace, fieldSelector: 'metadata.name=short-lived' }))
          .items.length === 0,
    );
  });

  test('after an apiserver restart the kubelet relists and still runs new pods', async (t) => {
    if (cp.external) {
      t.skip('restartApiServer is not supported against an external cluster');
      return;
    }
    await cp.restartApiServer();
    await runOn(aPod('after-restart', namespace).obj(), 'k-spare');
  });

  test('failNode makes a node NotReady, taints it and marks its pods not ready', async () => {
    await kubelet.addNode('k-doomed', { cpu: '2', memory: '2Gi' });
    await runOn(aPod('on-doomed', namespace).obj(), 'k-doomed');
    await kubelet.failNode('k-doomed');
    const node = await core.readNode({ name: 'k-doomed' });
    assert.equal(node.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'False');
    assert.deepEqual(
      node.spec?.taints?.map((taint) => `${taint.key}:${taint.effect}`),
      ['node.kubernetes.io/not-ready:NoSchedule'],
    );
    const pod = await core.readNamespacedPod({ name: 'on-doomed', namespace });
    assert.equal(pod.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'False');
  });

  test('a few thousand pods are bound by the scheduler and all reported Running', async (t) => {
    const count = Number(process.env.TOLLGATE_KUBELET_SCALE_PODS ?? 1000);
    const bulk = new SimulatedKubelet(cp.kubeConfig('admin'), { concurrency: 16 });
    for (let i = 0; i < 10; i += 1)
      await bulk.addNode(`bulk-${i}`, {
        cpu: '64',
        memory: '256Gi',
        pods: 500,
        labels: { pool: 'bulk' },
      });
    await bulk.start();
    try {
      await core.createNamespace({ body: { metadata: { name: bulkNamespace } } });
      const started = Date.now();
      const names = Array.from({ length: count }, (_, i) => `bulk-${i}`);
      // Created with bounded parallelism: the point is the kubelet, not the client.
      for (let i = 0; i < names.length; i += 50) {
        await Promise.all(
          names.slice(i, i + 50).map((name) => {
            const pod = aPod(name, bulkNamespace).requests({ cpu: '10m', memory: '16Mi' }).obj();
            pod.spec!.nodeSelector = { pool: 'bulk' };
            return core.createNamespacedPod({ namespace: bulkNamespace, body: creatable(pod) });
          }),
        );
      }
      const created = Date.now() - started;
      let running = 0;
      await eventually(
        `all ${count} pods Running`,
        async () => {
          const list = await core.listNamespacedPod({ namespace: bulkNamespace });
          running = list.items.filter(
            (p) => p.status?.phase === 'Running' && p.status.containerStatuses?.[0]?.resources,
          ).length;
          return running === count;
        },
        { timeoutMs: 300_000, intervalMs: 1000, describe: () => `${running} running` },
      );
      t.diagnostic(
        `${count} pods: created in ${created}ms, all Running after ${Date.now() - started}ms`,
      );
      process.stderr.write(
        `[kubelet] ${count} pods: created in ${created}ms, all Running after ${Date.now() - started}ms\n`,
      );
    } finally {
      await bulk.stop();
    }
  });
});
