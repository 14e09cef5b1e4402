/**
 * The fence closing on writes in flight, end to end: a real LeaderElector on a real
 * Lease, the dispatcher `tollgate run` builds (src/run/writes.ts createRunDispatcher: the
 * real executor and read-back, the elector's fence, fenceClosed on the term's end), the
 * loops' term binding (TermWrites), and a proxy in front of the API server that holds
 * writes in flight by count (test/support/holding-api-proxy.ts): of two writes in flight,
 * one is applied by the API server with its answer held, the other never forwarded; ten
 * more wait queued. Then the leader loses its lease, two ways:
 *
 * - another replica takes the Lease (its renewal meets a 409 and a foreign holder);
 * - its renewals get no answer (a second proxy holds the Lease writes), so the renew
 *   deadline closes the fence by the clock while the renewal hangs.
 *
 * What must hold, by count: nothing is sent after the loss (the proxy saw exactly the two
 * writes); the queued ten are cancelled and still gated; the write the API server never
 * got is recorded cancelled (a read shows it not applied) and its pod still gated; the
 * write the API server applied is recorded succeeded (confirmed by the read-back) and its
 * pod is released. Every result matches the pod on the API server.
 *
 * The attempt timeout is set long (30 s) so that only the fence ends the held writes.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CoordinationV1Api, CoreV1Api, V1MicroTime, type V1Pod } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { eventually } from '../../support/eventually.ts';
import { startHoldingProxy, type HoldingProxy } from '../../support/holding-api-proxy.ts';
import { LeaderElector, leaseClientFromKubeConfig } from '../../../src/cluster/leader.ts';
import { CacheLagMeter } from '../../../src/cluster/cache-lag.ts';
import { dispatchSettings } from '../../../src/dispatch/settings.ts';
import type { WriteRequest, WriteResult } from '../../../src/dispatch/types.ts';
import { removeGateRequest } from './requests.ts';
import { TermWrites } from '../../../src/loops/leadership.ts';
import { createRunDispatcher } from '../../../src/run/writes.ts';

const gate = 'fence.tollgate.io/ready';
const leaseNamespace = 'tollgate-system';
const timings = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 250 };
const queuedWrites = 10;

let cp: ControlPlane;
let admin: CoreV1Api;
let proxy: HoldingProxy;
/** The elector's own way to the API server, to hold its renewals. */
let leaseProxy: HoldingProxy;

before(async () => {
  cp = await startControlPlane({ name: 'fence-abort' });
  admin = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
  proxy = await startHoldingProxy(cp.server, cp.tollgateKubeconfig);
  leaseProxy = await startHoldingProxy(cp.server, cp.tollgateKubeconfig);
});
after(async () => {
  await leaseProxy?.close();
  await proxy?.close();
  await cp?.stop();
});

const log = (line: string): void => void process.stderr.write(`[fence-abort e2e] ${line}\n`);

async function gatedPods(namespace: string, count: number): Promise<V1Pod[]> {
  await admin.createNamespace({ body: { metadata: { name: namespace } } });
  return Promise.all(
    Array.from({ length: count }, (_, i) =>
      admin.createNamespacedPod({
        namespace,
        body: {
          metadata: { name: `p${i}` },
          spec: {
            schedulingGates: [{ name: gate }],
            containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10' }],
          },
        },
      }),
    ),
  );
}

function release(pod: V1Pod, i: number): WriteRequest {
  return removeGateRequest(pod, gate, { decisionId: `${pod.metadata?.namespace}-${i}` });
}

/** Ways a leader loses its lease while it writes. */
const losses: { name: string; lose: (lease: string) => Promise<void> }[] = [
  {
    name: 'another replica takes the Lease',
    lose: async (lease) => {
      const leases = cp.kubeConfig('admin').makeApiClient(CoordinationV1Api);
      const current = await leases.readNamespacedLease({ namespace: leaseNamespace, name: lease });
      await leases.replaceNamespacedLease({
        namespace: leaseNamespace,
        name: lease,
        body: {
          ...current,
          spec: {
            ...current.spec,
            holderIdentity: 'replica-b',
            leaseDurationSeconds: 600,
            renewTime: new V1MicroTime(Date.now()),
            leaseTransitions: (current.spec?.leaseTransitions ?? 0) + 1,
          },
        },
      });
    },
  },
  {
    name: "the leader's renewals get no answer until the renew deadline closes its fence",
    lose: async () => leaseProxy.plan([], 'request'),
  },
];

losses.forEach((loss, row) => {
  test(`${loss.name} with two writes in flight and ${queuedWrites} queued: nothing is sent after, and each outcome is what the API server shows`, async () => {
    const namespace = `fence-${row}`;
    const leaseName = `tollgate-fence-${row}`;
    const pods = await gatedPods(namespace, 2 + queuedWrites);
    const tollgate = cp.kubeConfig('tollgate');
    const elector = new LeaderElector({
      leases: leaseClientFromKubeConfig(leaseProxy.kubeConfigFor(tollgate)),
      namespace: leaseNamespace,
      name: leaseName,
      identity: 'replica-a',
      timings,
    });
    leaseProxy.plan([], 'pass');
    const termWrites = new TermWrites();
    const dispatcher = createRunDispatcher({
      config: {
        writes: dispatchSettings({
          concurrency: 2,
          qps: 100,
          burst: 100,
          attemptTimeoutMs: 30_000,
        }),
      },
      kubeConfig: proxy.kubeConfigFor(tollgate),
      cacheLag: new CacheLagMeter(),
      elector,
      termWrites,
    });
    let lostAt: number | undefined;
    elector.onStoppedLeading(() => {
      lostAt ??= proxy.writes.length;
      void elector.stop(); // a candidate again would win the deleted Lease back
    });
    const term = new Promise<AbortSignal>((resolve) =>
      elector.onStartedLeading((started) => resolve(started.signal)),
    );
    elector.start();
    const writes = termWrites.bind(dispatcher, await term);
    proxy.plan(['answer', 'request'], 'pass');
    const proxiedBefore = proxy.writes.length;
    const results = pods.map((pod, i) => {
      const answer = writes.enqueue(release(pod, i));
      assert.ok(answer.accepted);
      return answer.done;
    });
    const ours = () => proxy.writes.slice(proxiedBefore);
    await eventually(
      'two writes in flight, the first applied by the API server',
      async () => ours().length === 2 && ours()[0]?.upstreamStatus === 200,
    );
    assert.equal(dispatcher.inFlight, 2);
    assert.equal(dispatcher.depth, queuedWrites);

    await loss.lose(leaseName);
    const settled = await Promise.all(results);
    await dispatcher.close();
    await elector.stop();

    const live = (await admin.listNamespacedPod({ namespace })).items;
    const gated = new Set(
      live.filter((p) => (p.spec?.schedulingGates ?? []).length > 0).map((p) => p.metadata?.name),
    );
    const byName = new Map(pods.map((pod, i) => [pod.metadata?.name ?? '', settled[i]]));
    const nameOf = (path: string): string => path.split('/pods/')[1]?.split(/[/?]/)[0] ?? '';
    const [applied, unsent] = ours();
    const appliedName = nameOf(applied?.path ?? '');
    const unsentName = nameOf(unsent?.path ?? '');
    log(
      `${loss.name}: proxy saw ${ours().length} writes (${lostAt === undefined ? '?' : lostAt - proxiedBefore} before the loss); results ${JSON.stringify(
        settled.map((r) => r?.result),
      )}; gated after: ${gated.size} of ${pods.length}`,
    );
    assert.equal(ours().length, 2, 'no write reached the API server after the two in flight');
    assert.equal(lostAt, proxy.writes.length, 'none after the loss either');
    assert.deepEqual(
      [applied?.mode, unsent?.mode, unsent?.upstreamStatus],
      ['answer', 'request', undefined],
    );
    assert.deepEqual(byName.get(appliedName), {
      result: 'succeeded',
      resourceVersion:
        live.find((p) => p.metadata?.name === appliedName)?.metadata?.resourceVersion ?? '?',
      confirmedBy: 'read-back',
    } satisfies WriteResult);
    const unsentResult = byName.get(unsentName);
    assert.equal(unsentResult?.result, 'cancelled');
    assert.match(
      (unsentResult as { message: string }).message,
      /aborted in flight; a read of the object shows the write not applied/,
    );
    for (const [name, result] of byName) {
      assert.equal(
        result?.result === 'succeeded',
        !gated.has(name),
        `${name}: recorded ${result?.result}, gate ${gated.has(name) ? 'still there' : 'removed'}`,
      );
      if (name !== appliedName && name !== unsentName)
        assert.equal(result?.result, 'cancelled', `${name}, queued, cancelled`);
    }
    assert.equal(gated.size, pods.length - 1, 'only the write the API server applied released');
  });
});
