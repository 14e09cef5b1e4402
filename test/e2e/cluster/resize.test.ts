/**
 * Proof that in-place resize on the local control plane behaves as on a real node:
 * the apiserver validates and versions `pods/resize`, and the simulated kubelet answers
 * with the conditions, events and statuses a kubelet writes (accepted and actuated,
 * Infeasible, Deferred until room appears).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  CoreV1Api,
  PatchStrategy,
  Watch,
  setHeaderOptions,
  type V1Pod,
} from '@kubernetes/client-node';
import {
  sharedControlPlane,
  startControlPlane,
  type ControlPlane,
} from '../../support/control-plane.ts';
import { SimulatedKubelet } from '../../support/kubelet.ts';
import { creatable, eventually, removeNamespace, runNamespace } from '../../support/eventually.ts';
import { aPod } from '../../builders/pod.ts';

const strategic = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
const namespace = runNamespace('e2e-resize');

/** The client returns model class instances; deepStrictEqual compares prototypes too. */
const plain = (value: unknown): unknown => JSON.parse(JSON.stringify(value ?? null));
const condition = (pod: V1Pod | undefined, type: string) =>
  pod?.status?.conditions?.find((c) => c.type === type);

describe('in-place resize through pods/resize', () => {
  let cp: ControlPlane;
  let core: CoreV1Api;
  let kubelet: SimulatedKubelet;

  before(async () => {
    cp = await sharedControlPlane();
    core = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
    kubelet = new SimulatedKubelet(cp.kubeConfig('admin'), {
      actuationDelayMs: 300,
      log: (line) => console.error(`[kubelet] ${line}`),
    });
    await kubelet.addNode('resize-walk', { cpu: '2', memory: '4Gi' });
    await kubelet.addNode('resize-infeasible', { cpu: '2', memory: '4Gi' });
    await kubelet.addNode('resize-deferred', { cpu: '2', memory: '4Gi' });
    await kubelet.start();
    await core.createNamespace({ body: { metadata: { name: namespace } } });
  });

  after(async () => {
    await kubelet?.stop();
    await removeNamespace(core, namespace);
  });

  /** Creates a Burstable pod pinned (through the scheduler) to `node` and waits until it runs. */
  async function runningPod(
    name: string,
    node: string,
    cpu: string,
    cpuLimit: string,
  ): Promise<V1Pod> {
    const pod = aPod(name, namespace)
      .requests({ cpu, memory: '128Mi' }, { cpu: cpuLimit, memory: '256Mi' })
      .obj();
    pod.spec!.nodeSelector = { 'kubernetes.io/hostname': node };
    await core.createNamespacedPod({ namespace, body: creatable(pod) });
    return eventually(`${name} to run on ${node}`, async () => {
      const current = await core.readNamespacedPod({ name, namespace });
      return current.status?.phase === 'Running' && current.spec?.nodeName === node
        ? current
        : undefined;
    });
  }

  function resize(name: string, cpu: string, cpuLimit: string): Promise<V1Pod> {
    return core.patchNamespacedPodResize(
      {
        name,
        namespace,
        body: {
          spec: {
            containers: [
              { name: 'app', resources: { requests: { cpu }, limits: { cpu: cpuLimit } } },
            ],
          },
        },
      },
      strategic,
    );
  }

  async function eventReasons(name: string): Promise<string[]> {
    const events = await core.listNamespacedEvent({
      namespace,
      fieldSelector: `involvedObject.name=${name}`,
    });
    return events.items.map((e) => `${e.type}/${e.reason}`);
  }

  test('an accepted resize walks through PodResizeInProgress to updated actual resources', async () => {
    await runningPod('walk', 'resize-walk', '500m', '1');
    // Watch every version of the pod, so the transient InProgress state cannot be missed.
    const seen: V1Pod[] = [];
    const watch = await new Watch(cp.kubeConfig('admin')).watch(
      `/api/v1/namespaces/${namespace}/pods`,
      { fieldSelector: 'metadata.name=walk' },
      (_phase, pod: V1Pod) => seen.push(pod),
      () => undefined,
    );
    try {
      const patched = await resize('walk', '800m', '1500m');
      const generation = patched.metadata?.generation ?? 0;
      assert.ok(generation >= 2, `a resize bumps metadata.generation (got ${generation})`);

      const done = await eventually(
        'the resize to complete',
        async () => {
          const pod = await core.readNamespacedPod({ name: 'walk', namespace });
          const actual = pod.status?.containerStatuses?.[0]?.resources;
          return actual?.requests?.cpu === '800m' && !condition(pod, 'PodResizeInProgress')
            ? pod
            : undefined;
        },
        { describe: () => JSON.stringify(seen.at(-1)?.status) },
      );
      const status = done.status!.containerStatuses![0]!;
      assert.deepEqual(plain(status.resources), {
        requests: { cpu: '800m', memory: '128Mi' },
        limits: { cpu: '1500m', memory: '256Mi' },
      });
      assert.deepEqual(plain(status.allocatedResources), { cpu: '800m', memory: '128Mi' });
      assert.equal(done.status?.observedGeneration, generation);
      assert.equal(condition(done, 'PodResizePending'), undefined);

      const inProgress = seen.map((p) => condition(p, 'PodResizeInProgress')).find(Boolean);
      assert.ok(inProgress, 'PodResizeInProgress was reported while the resize was actuated');
      assert.equal(inProgress.status, 'True');
      assert.equal(inProgress.observedGeneration, generation);
      const whileInProgress = seen.find((p) => condition(p, 'PodResizeInProgress'));
      assert.deepEqual(plain(whileInProgress?.status?.containerStatuses?.[0]?.allocatedResources), {
        cpu: '800m',
        memory: '128Mi',
      });
      assert.equal(
        whileInProgress?.status?.containerStatuses?.[0]?.resources?.requests?.cpu,
        '500m',
        'allocated first, actual after',
      );
      assert.ok((await eventReasons('walk')).includes('Normal/ResizeStarted'));
    } finally {
      watch.abort();
    }
  });

  test('the apiserver itself refuses a resize larger than the node (PodResizeValidator, cause NodeCapacity)', async () => {
    await runningPod('too-big', 'resize-infeasible', '500m', '1');
    await assert.rejects(resize('too-big', '3', '3'), (error: { code?: number; body?: string }) => {
      assert.equal(error.code, 403);
      assert.match(
        String(error.body),
        /node didn't have enough allocatable resources: cpu, requested: 3000, allocatable: 2000/,
      );
      assert.match(String(error.body), /"reason":"NodeCapacity"/);
      return true;
    });
    const pod = await core.readNamespacedPod({ name: 'too-big', namespace });
    assert.equal(pod.metadata?.generation, 1, 'a refused resize does not bump the generation');
  });

  test('where the apiserver admits it, a resize larger than the node becomes PodResizePending Infeasible with a Warning event', async (t) => {
    if (cp.external) {
      t.skip(
        'needs a control plane without the PodResizeValidator admission plugin; skipped on an external cluster',
      );
      return;
    }
    // Apiservers before PodResizeValidator (and any with it disabled) leave this check to
    // the kubelet; tollgate must understand both answers.
    const lenient = await startControlPlane({
      name: 'no-resize-validator',
      apiServerArgs: ['--disable-admission-plugins=PodResizeValidator'],
    });
    const lenientKubelet = new SimulatedKubelet(lenient.kubeConfig('admin'));
    try {
      const api = lenient.kubeConfig('admin').makeApiClient(CoreV1Api);
      await lenientKubelet.addNode('small', { cpu: '2', memory: '4Gi' });
      await lenientKubelet.start();
      const pod = aPod('too-big', 'default')
        .requests({ cpu: '500m', memory: '128Mi' }, { cpu: '1', memory: '256Mi' })
        .obj();
      await api.createNamespacedPod({ namespace: 'default', body: creatable(pod) });
      await eventually(
        'too-big to run',
        async () =>
          (await api.readNamespacedPod({ name: 'too-big', namespace: 'default' })).status?.phase ===
          'Running',
      );
      const patched = await api.patchNamespacedPodResize(
        {
          name: 'too-big',
          namespace: 'default',
          body: {
            spec: {
              containers: [
                { name: 'app', resources: { requests: { cpu: '3' }, limits: { cpu: '3' } } },
              ],
            },
          },
        },
        strategic,
      );
      const infeasible = await eventually('PodResizePending Infeasible', async () => {
        const current = await api.readNamespacedPod({ name: 'too-big', namespace: 'default' });
        return condition(current, 'PodResizePending')?.reason === 'Infeasible'
          ? current
          : undefined;
      });
      const pending = condition(infeasible, 'PodResizePending')!;
      assert.equal(pending.status, 'True');
      assert.equal(pending.observedGeneration, patched.metadata?.generation);
      assert.match(pending.message ?? '', /cpu, requested: 3000, capacity: 2000/);
      assert.equal(
        infeasible.status?.containerStatuses?.[0]?.resources?.requests?.cpu,
        '500m',
        'actual resources unchanged',
      );
      assert.equal(condition(infeasible, 'PodResizeInProgress'), undefined);
      await eventually('the ResizeInfeasible event', async () => {
        const events = await api.listNamespacedEvent({
          namespace: 'default',
          fieldSelector: 'involvedObject.name=too-big',
        });
        return events.items.some((e) => e.type === 'Warning' && e.reason === 'ResizeInfeasible');
      });
    } finally {
      await lenientKubelet.stop();
      await lenient.stop();
    }
  });

  test('a resize that fits the node but not beside other pods is Deferred and completes when room appears', async () => {
    await runningPod('neighbour', 'resize-deferred', '1200m', '2');
    await runningPod('grower', 'resize-deferred', '600m', '1');
    const generation = (await resize('grower', '1', '1500m')).metadata?.generation;
    const deferred = await eventually('PodResizePending Deferred', async () => {
      const current = await core.readNamespacedPod({ name: 'grower', namespace });
      return condition(current, 'PodResizePending')?.reason === 'Deferred' ? current : undefined;
    });
    assert.equal(condition(deferred, 'PodResizePending')?.observedGeneration, generation);
    assert.match(
      condition(deferred, 'PodResizePending')?.message ?? '',
      /cpu, requested: 1000, used: 1200, capacity: 2000/,
    );
    assert.equal(
      deferred.status?.containerStatuses?.[0]?.allocatedResources?.cpu,
      '600m',
      'nothing allocated while deferred',
    );

    await core.deleteNamespacedPod({ name: 'neighbour', namespace });
    const grown = await eventually(
      'the deferred resize to complete once the neighbour left',
      async () => {
        const current = await core.readNamespacedPod({ name: 'grower', namespace });
        const done = current.status?.containerStatuses?.[0]?.resources?.requests?.cpu === '1';
        return done &&
          !condition(current, 'PodResizePending') &&
          !condition(current, 'PodResizeInProgress')
          ? current
          : undefined;
      },
    );
    assert.equal(grown.status?.containerStatuses?.[0]?.allocatedResources?.cpu, '1');
    assert.equal(grown.status?.observedGeneration, generation);
  });
});
