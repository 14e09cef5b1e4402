/**
 * Leader election against the real API server, as the unprivileged `tollgate` identity
 * (so the Lease Role in deploy/base/rbac.yaml is exercised too).
 *
 * "Killing" the leader here is a network partition of its lease client: the elector
 * object stays alive, so the test can watch its fence() the whole time. The ordering (the
 * old leader's fence closed before the new leader's term began) is measured, not assumed;
 * the bounds are counted in lease reads, not milliseconds of a shared machine's clock (a
 * replica reads the Lease once per retry period, so the reads it needed bound the time it
 * waited). test/unit/cluster/leader-timing.test.ts proves the exact deadlines on an
 * injected clock.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoordinationV1Api, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
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

/** A lease client that counts its reads (one per acquire-or-renew attempt). */
function counting(inner: LeaseClient): LeaseClient & { reads: number } {
  const client = {
    reads: 0,
    get: (ns: string, name: string) => {
      client.reads += 1;
      return inner.get(ns, name);
    },
    create: (ns: string, lease: Parameters<LeaseClient['create']>[1]) => inner.create(ns, lease),
    replace: (ns: string, name: string, lease: Parameters<LeaseClient['replace']>[2]) =>
      inner.replace(ns, name, lease),
  };
  return client;
}

/** A lease client that keeps what the API server stored from each of its writes. */
function recordingWrites(inner: LeaseClient): LeaseClient & { stored: V1Lease[] } {
  const client = {
    stored: [] as V1Lease[],
    get: (ns: string, name: string) => inner.get(ns, name),
    create: async (ns: string, lease: V1Lease) => {
      const stored = await inner.create(ns, lease);
      client.stored.push(stored);
      return stored;
    },
    replace: async (ns: string, name: string, lease: V1Lease) => {
      const stored = await inner.replace(ns, name, lease);
      client.stored.push(stored);
      return stored;
    },
  };
  return client;
}

/** replica-a on `netA` and replica-b on a lease client that counts its reads. */
function twoReplicas(
  kc: KubeConfig,
  leaseName: string,
  netA: LeaseClient,
): { a: LeaderElector; b: LeaderElector; netB: ReturnType<typeof counting> } {
  const elector = (identity: string, leases: LeaseClient) =>
    new LeaderElector({ leases, namespace, name: leaseName, identity, timings });
  const netB = counting(leaseClientFromKubeConfig(kc));
  return { a: elector('replica-a', netA), b: elector('replica-b', netB), netB };
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
    const { a, b, netB } = twoReplicas(kc, leaseName, netA);
    const aLost: number[] = [];
    a.onStoppedLeading(() => aLost.push(Date.now()));
    let bStartedAt: number | undefined;
    let aFenceWhenBStarted: boolean | undefined;
    let bReadsAtStart = 0;
    b.onStartedLeading((term) => {
      bStartedAt = Date.now();
      bReadsAtStart = netB.reads;
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
      const bReadsAtPartition = netB.reads;
      let aFenceClosedAt: number | undefined;
      while (bStartedAt === undefined) {
        if (aFenceClosedAt === undefined && !a.fence()) aFenceClosedAt = Date.now();
        assert.ok(!(a.fence() && b.fence()), 'two replicas had an open fence at the same moment');
        if (Date.now() - partitionedAt > 3 * timings.leaseDurationMs)
          assert.fail('replica-b never took over');
        await sleep(2);
      }
      const takeoverMs = bStartedAt - partitionedAt;
      const bReads = bReadsAtStart - bReadsAtPartition;
      const fenceClosedMs = (aFenceClosedAt ?? bStartedAt) - partitionedAt;
      console.log(
        `partition -> replica-a fence closed: ${fenceClosedMs}ms; partition -> replica-b leader: ${takeoverMs}ms, ${bReads} lease reads`,
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
      // replica-a renewed at most a retry period before the partition and replica-b saw
      // that renewal at most a retry period later, so by replica-b's clock the lease
      // expires within lease + retry of the partition. replica-b reads once per retry
      // period, plus one read exactly at the expiry it observed: at most
      // (lease + retry) / retry + 2 reads. Waiting out a second lease duration would cost
      // 6 more at these timings. (The fence's own deadline is proven on an injected clock
      // in the unit test; here, the ordering above.)
      const bound =
        Math.ceil((timings.leaseDurationMs + timings.retryPeriodMs) / timings.retryPeriodMs) + 2;
      assert.ok(
        bReads <= bound,
        `replica-b read the lease ${bReads} times between the partition and its term; at most ${bound} (lease ${timings.leaseDurationMs}ms, retry ${timings.retryPeriodMs}ms)`,
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
      // The audit writer's name for the term (its checkpoints wait for the term's start).
      assert.equal(b.termToken(), `replica-b/${firstTerm.leaseTransitions + 1}`);
      assert.equal(a.termToken(), undefined, 'a replica whose term ended names none');

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
    const netA = recordingWrites(leaseClientFromKubeConfig(kc));
    const { a, b, netB } = twoReplicas(kc, leaseName, netA);
    let bReadsAtStart = 0;
    b.onStartedLeading(() => (bReadsAtStart = netB.reads));
    try {
      a.start();
      await until(() => a.isLeader(), 5_000, 'replica-a to lead');
      const firstTransitions = a.term()?.token.leaseTransitions;
      b.start();
      await sleep(timings.retryPeriodMs * 2);
      assert.equal(b.isLeader(), false);

      const stoppedAt = Date.now();
      const bReadsBeforeRelease = netB.reads;
      await a.stop();
      assert.equal(a.fence(), false, 'a stopped leader is fenced at once');
      // What the API server stored from replica-a's last write (its answer to the release),
      // not a later read: replica-b may already hold the lease by the time the test reads it.
      const released = netA.stored.at(-1);
      assert.equal(released?.spec?.holderIdentity, undefined, 'holderIdentity cleared on release');
      assert.equal(
        released?.spec?.leaseTransitions,
        firstTransitions,
        'the release is a write of replica-a term, not a new term',
      );

      await until(() => b.isLeader(), 3 * timings.leaseDurationMs, 'replica-b to lead');
      const takeoverMs = Date.now() - stoppedAt;
      const bReads = bReadsAtStart - bReadsBeforeRelease;
      console.log(`release -> replica-b leader: ${takeoverMs}ms, ${bReads} lease reads`);
      // The first read that starts after the release finds the lease free and takes it
      // (a read in flight during the release may still see replica-a); waiting out the
      // lease instead costs lease / retry = 6 reads.
      assert.ok(bReads <= 2, `replica-b read the lease ${bReads} times before taking it over`);
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
