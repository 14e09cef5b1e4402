/**
 * Failover with a lagging standby, real parts: a real kube-apiserver, the standby's real
 * informer (LiveClusterView) with its watch held back (a wrapper around the real source),
 * the real gate-release loop and stale-guard, the term's catch-up barrier as `tollgate
 * run` starts it (run/loops.ts beginTermCatchUp: a fresh revision read from the API
 * server), live reads through the bounded reader, the real writer as `tollgate`.
 *
 * The previous leader released the pod just before the failover; the standby's cache
 * still shows it gated, with a measured lag of 0 ms, and an approved Cancel (a delete,
 * destructive). With the barrier, the delete waits for one live read, which shows the
 * pod released: nothing is deleted. Without it (the control row), the delete is sent
 * from the cache. Once the watch is let go and the view shows a pod event at or past the
 * revision, the barrier lifts.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { eventually } from '../../support/eventually.ts';
import { createClusterView, type LiveClusterView } from '../../../src/cluster/view.ts';
import { createResourceSource } from '../../../src/cluster/source.ts';
import { createWriteExecutor } from '../../../src/cluster/writer.ts';
import { boundedPodReader, podReader } from '../../../src/cluster/client.ts';
import { StaleGuard } from '../../../src/cluster/stale-guard.ts';
import { PriorityDispatcher } from '../../../src/dispatch/queue.ts';
import type { WriteRequest } from '../../../src/dispatch/types.ts';
import { startGateReleaseLoop } from '../../../src/loops/gate-release.ts';
import { beginTermCatchUp } from '../../../src/run/loops.ts';
import { silentLogger } from '../../../src/observe/log.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';
import { holdable } from '../../support/holdable-source.ts';
import { recordingAudit } from '../../support/recording-audit.ts';

const namespace = 'lagging-standby';
const gate = `${namespace}.tollgate.io/ready`;

let cp: ControlPlane;
let admin: CoreV1Api;
const views: LiveClusterView[] = [];

before(async () => {
  cp = await sharedControlPlane();
  admin = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
  await admin.createNamespace({ body: { metadata: { name: namespace } } });
});
after(async () => {
  for (const view of views) await view.stop();
  await admin.deleteNamespace({ name: namespace }).catch(() => undefined);
});

const rows = [
  {
    name: 'with the term catch-up barrier, the Cancel takes a live read and deletes nothing',
    barrier: true,
  },
  { name: 'without it (control), the Cancel is sent from the lagging cache', barrier: false },
];

for (const row of rows) {
  test(row.name, async () => {
    const podName = row.barrier ? 'released-by-old-leader' : 'control';
    const policy = aPolicy()
      .tenant(aTenant(namespace))
      .gatePolicy(aGatePolicy('ready', namespace).conditions({ type: 'Approved' }))
      .approve('Cancel', namespace, podName)
      .obj();
    await admin.createNamespacedPod({
      namespace,
      body: {
        metadata: { name: podName },
        spec: {
          schedulingGates: [{ name: gate }],
          containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10' }],
        },
      },
    });
    const kubeConfig = cp.kubeConfig('tollgate');
    const sources: ReturnType<typeof holdable>[] = [];
    const view = createClusterView({
      kubeConfig,
      namespaces: [namespace],
      sourceFactory: (target) => {
        const wrapped = holdable(createResourceSource(kubeConfig, target));
        sources.push(wrapped);
        return wrapped;
      },
    });
    views.push(view);
    view.start();
    await view.whenSynced(AbortSignal.timeout(30_000));
    await eventually('the standby sees the pod', async () => view.pod(namespace, podName));
    for (const source of sources) source.hold();

    // The previous leader's last write: the gate removed (the standby's cache never saw it).
    const released = await admin.patchNamespacedPod(
      { namespace, name: podName, body: [{ op: 'remove', path: '/spec/schedulingGates/0' }] },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    );
    // Another writer moves etcd's revision past the release before the term's fresh
    // read, as leases and events do in any cluster.
    await admin.createNamespacedConfigMap({
      namespace,
      body: { metadata: { name: `${podName}-other-writer` }, data: { at: 'after-release' } },
    });

    const guards = {
      gate: new StaleGuard({ policy: policy.staleness, loop: 'gate-release', restored: false }),
      resize: new StaleGuard({ policy: policy.staleness, loop: 'resize', restored: false }),
    };
    const catchUp = row.barrier
      ? beginTermCatchUp({ guards, view, kubeConfig }, silentLogger)
      : undefined;
    if (catchUp)
      await eventually('the fresh revision is read', async () => {
        const decision = guards.gate.requireLive(`${namespace}/${podName}`, 'Cancel', 0);
        return decision.action === 'liveRead' && /revision \d+/.test(decision.reason);
      });

    const sent: WriteRequest[] = [];
    const execute = createWriteExecutor(kubeConfig);
    const dispatcher = new PriorityDispatcher({
      executor: (request, signal) => {
        sent.push(request);
        return execute(request, signal);
      },
    });
    const { audit, recorded } = recordingAudit();
    const loop = startGateReleaseLoop({
      view,
      dispatcher,
      audit,
      policy: () => policy,
      staleGuard: guards.gate,
      cacheLagMs: () => 0,
      readPod: boundedPodReader(podReader(kubeConfig), () => policy.staleness.liveReads),
      autoStart: false,
    });
    const report = await loop.pass();
    await report.settled;
    await loop.stop();
    await dispatcher.close();

    const cancel = recorded.find((d) => d.kind === 'Cancel');
    // Distinct deletes decided, not sends: the dispatcher may send one write again (a
    // 403 is resent a few times, as the API server's RBAC cache warms after a restart).
    const deletes = [
      ...new Set(sent.filter((r) => r.op.type === 'delete').map((r) => r.decisionId)),
    ];
    if (row.barrier) {
      assert.equal(deletes.length, 0, 'nothing deleted on the lagging cache');
      assert.match(JSON.stringify(cancel?.outcome), /cancelled.*live read/);
      const live = await admin.readNamespacedPod({ namespace, name: podName });
      assert.equal(live.metadata?.uid, released.metadata?.uid, 'the pod is still there');
      assert.equal(guards.gate.catchingUp, true, 'the view is still held behind');
      for (const source of sources) source.release();
      // The view reaches the term's revision with the next pod event or bookmark in its
      // namespaces. The fresh read's revision is etcd's, which other writers (leases,
      // events) move past the release; the API server's bookmark comes about once a
      // minute, so the test makes the next event itself rather than racing a timeout.
      await admin.patchNamespacedPod(
        {
          namespace,
          name: podName,
          body: [{ op: 'add', path: '/metadata/annotations', value: { 'e2e/touched': 'after' } }],
        },
        setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
      );
      await eventually('the barrier lifts once the view reached the revision', async () =>
        guards.gate.catchingUp ? undefined : true,
      );
      catchUp?.stop();
    } else {
      assert.equal(deletes.length, 1, 'the control sends the delete from the cache');
    }
  });
}
