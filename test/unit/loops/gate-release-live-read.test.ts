/**
 * The gate-release loop's destructive write (Cancel deletes the pod) asks the real
 * stale-guard whether the cache may be trusted, given the view's measured lag: from the
 * cache, after a live read, or held. In-memory stand-ins for the view, dispatcher and
 * audit; the proof against a real API server is test/e2e/stale-guard/cache-lag.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { startGateReleaseLoop } from '../../../src/loops/gate-release.ts';
import { StaleGuard } from '../../../src/cluster/stale-guard.ts';
import type { ClusterView } from '../../../src/cluster/types.ts';
import type { Dispatcher, WriteRequest } from '../../../src/dispatch/types.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import type { DecisionKindName, Policy } from '../../../src/policy/model.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';
import { recordingAudit } from '../../support/recording-audit.ts';

const gate = 'team-a.tollgate.io/ready';
const policy = aPolicy()
  .tenant(aTenant('team-a'))
  .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Approved' }))
  .approve('Cancel', 'team-a', 'doomed')
  .obj();
const maxCacheLagMs = policy.staleness.maxCacheLagMs;

const cases: {
  name: string;
  lagMs: number | undefined;
  restored?: boolean;
  liveChanged?: boolean;
  liveReads: number;
  deleted: boolean;
  outcome: RegExp;
}[] = [
  {
    name: 'a measured lag within maxCacheLag deletes from the cache, without a live read',
    lagMs: maxCacheLagMs - 1,
    liveReads: 0,
    deleted: true,
    outcome: /succeeded/,
  },
  {
    name: 'a measured lag beyond maxCacheLag takes a live read first, then deletes',
    lagMs: maxCacheLagMs + 1,
    liveReads: 1,
    deleted: true,
    outcome: /succeeded/,
  },
  {
    name: 'an unknown lag takes a live read first',
    lagMs: undefined,
    liveReads: 1,
    deleted: true,
    outcome: /succeeded/,
  },
  {
    name: 'a live read that shows the pod changed cancels the delete',
    lagMs: maxCacheLagMs + 1,
    liveChanged: true,
    liveReads: 1,
    deleted: false,
    outcome: /cancelled: live read: the pod changed/,
  },
  {
    name: 'before the view has synced since start, nothing is read or deleted: the Cancel is skipped as stale',
    lagMs: 0,
    restored: true,
    liveReads: 0,
    deleted: false,
    outcome: /SkipStale recorded/,
  },
];

/** One pass of the real loop and stale-guard over one pod, with in-memory edges. */
async function onePass(
  policyIn: Policy,
  pod: V1Pod,
  c: { lagMs: number | undefined; restored?: boolean; liveChanged?: boolean },
): Promise<{ liveReads: number; requests: WriteRequest[]; recorded: Decision[] }> {
  const view: ClusterView = {
    synced: true,
    whenSynced: async () => undefined,
    pods: () => [pod],
    pod: (ns, name) => (ns === 'team-a' && name === pod.metadata?.name ? pod : undefined),
    nodes: () => [],
    object: () => undefined,
    lastResourceVersion: () => undefined,
    onChange: () => () => undefined,
  };
  const requests: WriteRequest[] = [];
  const dispatcher: Dispatcher = {
    enqueue(request) {
      requests.push(request);
      return {
        accepted: true,
        coalesced: false,
        done: Promise.resolve({ result: 'succeeded', resourceVersion: '999' }),
      };
    },
    whenNotFull: async () => undefined,
    cancel: () => undefined,
    depth: 0,
    close: async () => undefined,
  };
  const { audit, recorded } = recordingAudit();
  const guard = new StaleGuard({
    policy: policyIn.staleness,
    loop: 'gate-release',
    restored: c.restored ?? false,
  });
  let liveReads = 0;
  // The builder's pods are created at the ManualClock's start: 2 s on, a 1 s expiry has
  // passed, whatever the machine's date.
  const clock = new ManualClock();
  clock.advance(2_000);
  const loop = startGateReleaseLoop({
    clock,
    view,
    dispatcher,
    audit,
    policy: () => policyIn,
    staleGuard: guard,
    cacheLagMs: () => c.lagMs,
    readPod: async () => {
      liveReads += 1;
      const live = structuredClone(pod) as V1Pod;
      if (c.liveChanged && live.metadata) live.metadata.resourceVersion = '12345';
      return live;
    },
    autoStart: false,
  });
  const report = await loop.pass();
  await report.settled;
  await loop.stop();
  return { liveReads, requests, recorded };
}

for (const c of cases) {
  test(c.name, async () => {
    const pod = aPod('doomed', 'team-a').gated(gate).obj();
    const { liveReads, requests, recorded } = await onePass(policy, pod, c);
    assert.equal(liveReads, c.liveReads, 'live reads');
    assert.equal(
      requests.some((r) => r.op.type === 'delete'),
      c.deleted,
      'delete sent',
    );
    const cancel = recorded.find((d) => d.kind === 'Cancel');
    const outcome = cancel
      ? `${cancel.outcome.result}: ${'message' in cancel.outcome ? cancel.outcome.message : ''}`
      : recorded.some((d) => d.kind === 'SkipStale')
        ? 'SkipStale recorded'
        : 'no Cancel recorded';
    assert.match(outcome, c.outcome);
  });
}

// A Release forced by expiry (action Release) is destructive by default; a plain Release
// only when the StalenessPolicy lists it.
const withDestructive = (p: Policy, destructive: DecisionKindName[]): Policy => ({
  ...p,
  staleness: { ...p.staleness, destructive },
});
const expiring = aPolicy()
  .tenant(aTenant('team-a'))
  .gatePolicy(
    aGatePolicy('ready', 'team-a').conditions({ type: 'Approved' }).expiry(1000, 'Release'),
  )
  .obj();
const approved = aPolicy()
  .tenant(aTenant('team-a'))
  .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Approved' }))
  .approve('Release', 'team-a', 'ready-pod')
  .obj();

const releaseCases: {
  name: string;
  policy: Policy;
  lagMs: number | undefined;
  liveChanged?: boolean;
  liveReads: number;
  released: boolean;
}[] = [
  {
    name: 'an expiry Release with ExpireRelease destructive and the lag beyond maxCacheLag takes a live read, then releases',
    policy: withDestructive(expiring, ['Cancel', 'ExpireRelease']),
    lagMs: maxCacheLagMs + 1,
    liveReads: 1,
    released: true,
  },
  {
    name: 'an expiry Release whose pod changed under the cache is not released',
    policy: withDestructive(expiring, ['Cancel', 'ExpireRelease']),
    lagMs: undefined,
    liveChanged: true,
    liveReads: 1,
    released: false,
  },
  {
    name: 'an expiry Release within maxCacheLag releases from the cache',
    policy: withDestructive(expiring, ['Cancel', 'ExpireRelease']),
    lagMs: 0,
    liveReads: 0,
    released: true,
  },
  {
    name: 'a plain Release not listed as destructive never takes a live read, even with the lag unknown',
    policy: withDestructive(approved, ['Cancel', 'ExpireRelease']),
    lagMs: undefined,
    liveReads: 0,
    released: true,
  },
  {
    name: 'a plain Release listed as destructive takes a live read when the lag is unknown',
    policy: withDestructive(approved, ['Release']),
    lagMs: undefined,
    liveReads: 1,
    released: true,
  },
];

for (const c of releaseCases) {
  test(c.name, async () => {
    const pod = aPod('ready-pod', 'team-a').gated(gate).obj();
    const { liveReads, requests } = await onePass(c.policy, pod, c);
    assert.equal(liveReads, c.liveReads, 'live reads');
    assert.equal(
      requests.some((r) => r.op.type === 'removeGate'),
      c.released,
      'gate removal sent',
    );
  });
}
