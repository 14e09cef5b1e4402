/**
 * Leader election against the real API server, as the unprivileged `tollgate` identity
 * (so the Lease Role in deploy/base/rbac.yaml is exercised too).
 *
 * "Killing" the leader here is a network partition of its lease client: the elector
 * object stays alive, so the test can watch its fence() the whole time. The takeover
 * bound (lease duration + one retry period from the partition) and the ordering (the old
 * leader's fence closed before the new leader's term began) are measured, not assumed.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import {
  LeaderElector,
  leaseClientFromKubeConfig,
  type LeaseClient,
} from '../../../src/cluster/leader.ts';

const namespace = 'tollgate-system';
const timings = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 500 };

/** A lease client whose network can be cut. */
function partitionable(inner: LeaseClient): LeaseClient & { cut: boolean } {
  const refuse = (): Promise<never> =>
    Promise.reject(
      Object.assign(new Error('connect ECONNREFUSED (partitioned by the test)'), {
        code: 'ECONNREFUSED',
      }),
    );
  const client = {
    cut: false,
    get: (ns: string, name: string) => (client.cut ? refuse() : inner.get(ns, name)),
    create: (ns: string, lease: Parameters<LeaseClient['create']>[1]) =>
      client.cut ? refuse() : inner.create(ns, lease),
    replace: (ns: string, name: string, lease: Parameters<LeaseClient['replace']>[2]) =>
      client.cut ? refuse() : inner.replace(ns, name, lease),
  };
  return client;
}

async function until(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}`);
    await sleep(5);
  }
}

describe('leader election on a real Lease', () => {
  let cp: ControlPlane;
  before(async () => {
    cp = await sharedControlPlane();
  });
  after(async () => {
    await cp?.stop();
  });

  it('the follower takes over within lease duration + retry period of a partition, after the old leader fenced itself', async () => {
    const leaseName = 'leader-partition';
    const kc = cp.kubeConfig('tollgate');
    const netA = partitionable(leaseClientFromKubeConfig(kc));
    const a = new LeaderElector({
      leases: netA,
      namespace,
      name: leaseName,
      identity: 'replica-a',
      timings,
    });
    const b = new LeaderElector({
      leases: leaseClientFromKubeConfig(kc),
      namespace,
      name: leaseName,
      identity: 'replica-b',
      timings,
    });
    const aLost: number[] = [];
    a.onStoppedLeading(() => aLost.push(Date.now()));
    let bStartedAt: number | undefined;
    let aFenceWhenBStarted: boolean | undefined;
    b.onStartedLeading((term) => {
      bStartedAt = Date.now();
      aFenceWhenBStarted = a.fence();
      assert.equal(term.token.holder, 'replica-b');
    });
    try {
      a.start();
      await until(() => a.isLeader(), 5_000, 'replica-a to lead');
      const firstTerm = a.term()!.token;
      b.start();

      // Two renew cycles' worth of sampling: never two open fences at once.
      const sampleEnd = Date.now() + 2 * timings.leaseDurationMs;
      while (Date.now() < sampleEnd) {
        assert.ok(!(a.fence() && b.fence()), 'two replicas had an open fence at the same moment');
        assert.ok(a.fence(), 'the healthy leader kept its term');
        await sleep(10);
      }

      netA.cut = true;
      const partitionedAt = Date.now();
      let aFenceClosedAt: number | undefined;
      while (bStartedAt === undefined) {
        if (aFenceClosedAt === undefined && !a.fence()) aFenceClosedAt = Date.now();
        assert.ok(!(a.fence() && b.fence()), 'two replicas had an open fence at the same moment');
        if (Date.now() - partitionedAt > 3 * timings.leaseDurationMs)
          assert.fail('replica-b never took over');
        await sleep(2);
      }
      const takeoverMs = bStartedAt - partitionedAt;
      const fenceClosedMs = (aFenceClosedAt ?? bStartedAt) - partitionedAt;
      console.log(
        `partition -> replica-a fence closed: ${fenceClosedMs}ms; partition -> replica-b leader: ${takeoverMs}ms`,
      );

      assert.equal(
        aFenceWhenBStarted,
        false,
        "replica-a's fence was still open when replica-b's term began",
      );
      assert.ok(
        aFenceClosedAt !== undefined && aFenceClosedAt <= bStartedAt,
        'replica-a fenced itself first',
      );
      // The fence closes at most a renew deadline after the partition; the loop above
      // samples every ~2ms, so the observed moment may lag by a few milliseconds.
      assert.ok(
        fenceClosedMs <= timings.renewDeadlineMs + 25,
        `fence closed ${fenceClosedMs}ms after the partition`,
      );
      assert.ok(
        takeoverMs <= timings.leaseDurationMs + timings.retryPeriodMs,
        `takeover took ${takeoverMs}ms > lease ${timings.leaseDurationMs} + retry ${timings.retryPeriodMs}`,
      );
      assert.ok(
        aLost.length === 1 && aLost[0]! <= bStartedAt,
        'replica-a reported the loss before the takeover',
      );

      const lease = await kc
        .makeApiClient(CoordinationV1Api)
        .readNamespacedLease({ namespace, name: leaseName });
      assert.equal(lease.spec?.holderIdentity, 'replica-b');
      assert.equal(lease.spec?.leaseTransitions, firstTerm.leaseTransitions + 1);
      assert.deepEqual(b.term()?.token, {
        holder: 'replica-b',
        leaseTransitions: firstTerm.leaseTransitions + 1,
      });

      // The partition heals: replica-a sees a live holder and stays a follower.
      netA.cut = false;
      await sleep(2 * timings.retryPeriodMs + 200);
      assert.equal(a.isLeader(), false);
      assert.equal(b.isLeader(), true);
    } finally {
      netA.cut = false;
      await a.stop();
      await b.stop();
    }
  });

  it('a leader that stops releases the lease and the follower takes over without waiting out the lease', async () => {
    const leaseName = 'leader-release';
    const kc = cp.kubeConfig('tollgate');
    const a = new LeaderElector({
      leases: leaseClientFromKubeConfig(kc),
      namespace,
      name: leaseName,
      identity: 'replica-a',
      timings,
    });
    const b = new LeaderElector({
      leases: leaseClientFromKubeConfig(kc),
      namespace,
      name: leaseName,
      identity: 'replica-b',
      timings,
    });
    try {
      a.start();
      await until(() => a.isLeader(), 5_000, 'replica-a to lead');
      b.start();
      await sleep(timings.retryPeriodMs * 2);
      assert.equal(b.isLeader(), false);

      const stoppedAt = Date.now();
      await a.stop();
      assert.equal(a.fence(), false, 'a stopped leader is fenced at once');
      const lease = await kc
        .makeApiClient(CoordinationV1Api)
        .readNamespacedLease({ namespace, name: leaseName });
      assert.equal(lease.spec?.holderIdentity, undefined, 'holderIdentity cleared on release');

      await until(() => b.isLeader(), timings.leaseDurationMs, 'replica-b to lead');
      const takeoverMs = Date.now() - stoppedAt;
      console.log(`release -> replica-b leader: ${takeoverMs}ms`);
      assert.ok(
        takeoverMs <= timings.retryPeriodMs + 250,
        `took ${takeoverMs}ms; a released lease needs no expiry wait`,
      );
    } finally {
      await a.stop();
      await b.stop();
    }
  });

  it('an identity without the Lease Role cannot lead', async () => {
    const intruder = new LeaderElector({
      leases: leaseClientFromKubeConfig(cp.kubeConfig('intruder')),
      namespace,
      name: 'leader-forbidden',
      identity: 'intruder',
      timings,
    });
    try {
      intruder.start();
      await sleep(3 * timings.retryPeriodMs);
      assert.equal(intruder.isLeader(), false);
    } finally {
      await intruder.stop();
    }
  });

  it('timings that could allow two leaders are refused before anything runs', () => {
    assert.throws(
      () =>
        new LeaderElector({
          leases: leaseClientFromKubeConfig(cp.kubeConfig('tollgate')),
          namespace,
          name: 'x',
          identity: 'x',
          timings: { leaseDurationMs: 2_000, renewDeadlineMs: 2_000, retryPeriodMs: 500 },
        }),
      /leaseDuration \(2000ms\) must be greater than renewDeadline/,
    );
  });
});
