/**
 * Proof that the local control plane has the real scheduling-gate semantics tollgate
 * relies on: a gated pod waits (and the scheduler counts it as gated), removing the gate
 * lets the real scheduler bind it and the simulated kubelet run it, and the apiserver
 * refuses to add a gate after creation.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { SimulatedKubelet } from '../../support/kubelet.ts';
import { creatable, eventually, removeNamespace, runNamespace } from '../../support/eventually.ts';
import { aPod } from '../../builders/pod.ts';

const gate = 'tollgate.io/e2e-ready';
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

function gatedPendingPods(metrics: string): number {
  const line = metrics
    .split('\n')
    .find((l) => l.startsWith('scheduler_pending_pods{queue="gated"}'));
  if (!line)
    throw new Error('kube-scheduler /metrics has no scheduler_pending_pods{queue="gated"} series');
  return Number(line.split(' ').at(-1));
}

describe('scheduling gates on the real control plane', () => {
  let cp: ControlPlane;
  let core: CoreV1Api;
  let kubelet: SimulatedKubelet;
  const namespace = runNamespace('e2e-gates');

  before(async () => {
    cp = await sharedControlPlane();
    core = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
    kubelet = new SimulatedKubelet(cp.kubeConfig('admin'), {
      log: (line) => console.error(`[kubelet] ${line}`),
    });
    await kubelet.addNode('gates-node-1', { cpu: '4', memory: '8Gi' });
    await kubelet.start();
    await core.createNamespace({ body: { metadata: { name: namespace } } });
  });

  after(async () => {
    await kubelet?.stop();
    await removeNamespace(core, namespace);
  });

  test('a gated pod is not scheduled, is counted as gated, and runs once its gate is removed', async (t) => {
    const pod = aPod('gated', namespace)
      .gated(gate)
      .requests({ cpu: '100m', memory: '64Mi' })
      .obj();
    // Pinned to this file's node: a shared or external cluster has other (maybe dead) nodes.
    pod.spec!.nodeSelector = { 'kubernetes.io/hostname': 'gates-node-1' };
    await core.createNamespacedPod({ namespace, body: creatable(pod) });

    if (cp.external) {
      t.diagnostic(
        'scheduler metrics are not reachable on an external cluster; gated-queue check skipped',
      );
    } else {
      await eventually('scheduler_pending_pods{queue="gated"} to count the pod', async () =>
        gatedPendingPods(await cp.schedulerMetrics()) >= 1 ? true : undefined,
      );
    }
    // Give the scheduler time it would need to bind an ungated pod, then check it did not.
    await sleep(1500);
    const waiting = await core.readNamespacedPod({ name: 'gated', namespace });
    assert.equal(waiting.spec?.nodeName, undefined, 'a gated pod must not be bound');
    assert.equal(
      waiting.status?.conditions?.find((c) => c.type === 'PodScheduled')?.reason,
      'SchedulingGated',
    );

    await core.patchNamespacedPod(
      { name: 'gated', namespace, body: [{ op: 'remove', path: '/spec/schedulingGates' }] },
      jsonPatch,
    );
    let seen: unknown;
    const running = await eventually(
      'the released pod to be bound and Running',
      async () => {
        const current = await core.readNamespacedPod({ name: 'gated', namespace });
        seen = { nodeName: current.spec?.nodeName, status: current.status };
        return current.spec?.nodeName === 'gates-node-1' && current.status?.phase === 'Running'
          ? current
          : undefined;
      },
      { describe: () => JSON.stringify(seen) },
    );
    const status = running.status?.containerStatuses?.[0];
    assert.equal(status?.ready, true);
    assert.deepEqual(status?.resources?.requests, { cpu: '100m', memory: '64Mi' });
    if (!cp.external) {
      await eventually('the gated queue to be empty again', async () =>
        gatedPendingPods(await cp.schedulerMetrics()) === 0 ? true : undefined,
      );
    }
  });

  test('adding a scheduling gate after creation is rejected by the apiserver', async () => {
    await core.createNamespacedPod({
      namespace,
      body: creatable(aPod('late-gate', namespace).gated(gate).obj()),
    });
    await assert.rejects(
      core.patchNamespacedPod(
        {
          name: 'late-gate',
          namespace,
          body: [{ op: 'add', path: '/spec/schedulingGates/-', value: { name: 'x.io/late' } }],
        },
        jsonPatch,
      ),
      (error: { code?: number; body?: string }) => {
        assert.equal(error.code, 422);
        assert.match(String(error.body), /only deletion is allowed, but found new scheduling gate/);
        return true;
      },
    );
  });
});
