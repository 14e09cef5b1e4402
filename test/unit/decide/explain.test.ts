// `tollgate explain` and `tollgate queue` on one fixed scenario, checked byte for byte:
// tenant team-a (budget 4 pods, 1 release/s, batch 1) with one running pod, three pods
// of the `fast` policy that only pacing separates, and one `waits` pod held by a
// condition whose expiry releases it.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { explainPods, queuePage } from '../../../src/decide/explain.ts';
import { snapshotOf } from '../../../src/decide/objects.ts';
import { formatExplanation } from '../../../src/cli/explain.ts';
import { formatQueue } from '../../../src/cli/queue.ts';
import { aNode } from '../../builders/node.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const policyUrl = 'https://git.example/platform/policy.git';
const minutesAgo = (m: number) => now - m * 60_000;

const fast = aGatePolicy('fast', 'team-a').priority(10).conditions({ type: 'Budget' });
const waits = aGatePolicy('waits', 'team-a')
  .conditions({
    type: 'ObjectCondition',
    object: { apiVersion: 'v1', kind: 'ConfigMap', name: 'inputs' },
    field: 'data.ready',
    equals: 'true',
  })
  .expiry(3_600_000, 'Release');
const policy = aPolicy()
  .tenant(aTenant('team-a').budget({ pods: 4 }).pacing({ releasesPerSecond: 1, batchSize: 1 }))
  .gatePolicy(fast, waits)
  .obj();
const gatedBy = (name: string, gate: string, createdMinutesAgo: number) =>
  aPod(name, 'team-a')
    .uid(`uid-${name}`)
    .gated(gate)
    .createdAt(minutesAgo(createdMinutesAgo))
    .obj();
const pods = [
  aPod('running', 'team-a')
    .uid('uid-running')
    .createdAt(minutesAgo(60))
    .boundTo('n1')
    .running()
    .obj(),
  aPod('w-1', 'team-a')
    .uid('uid-w-1')
    .gated(waits.gateName)
    .createdAt(minutesAgo(40))
    .condition('PodScheduled', 'False', 'SchedulingGated', minutesAgo(40))
    .condition('tollgate.io/Released', 'False', 'ObjectCondition', minutesAgo(39))
    .obj(),
  gatedBy('f-new', fast.gateName, 10),
  gatedBy('f-old', fast.gateName, 30),
  gatedBy('f-mid', fast.gateName, 20),
];
const explanations = explainPods(policy, snapshotOf(pods, [aNode('n1').obj()]), now);
const explained = (pod: string) => {
  const found = explanations.find((e) => e.pod === `team-a/${pod}`);
  assert.ok(found, `${pod} explained`);
  return found;
};

describe('explain: why a pod waits and when it would go', () => {
  it('lists only gated pods, in the release order: priority first, then the oldest gate', () => {
    assert.deepEqual(
      explanations.map((e) => `${e.position}/${e.queueLength} ${e.pod} ${e.waiting}`),
      [
        '1/4 team-a/f-old nothing',
        '2/4 team-a/f-mid pacing',
        '3/4 team-a/f-new pacing',
        '4/4 team-a/w-1 conditions',
      ],
    );
  });

  it('estimates a paced pod from the pods ahead of it at the current pace', () => {
    assert.deepEqual(explained('f-new').estimate, {
      releaseAt: '2026-11-29T08:00:02.000Z',
      basis: 'pace: 1 pod(s) ahead held only by pacing, plus this one, at 1/s',
    });
  });

  it('prints a paced pod byte for byte', () => {
    assert.equal(
      formatExplanation(explained('f-mid'), policyUrl),
      [
        'Pod:        team-a/f-mid',
        'Tenant:     team-a',
        'Policy:     fast',
        `Source:     ${policyUrl} at 0000000000000000000000000000000000000001: gates/fast.yaml`,
        'Gate:       team-a.tollgate.io/fast',
        'Gated:      since 2026-11-29T07:40:00.000Z',
        'State:      gated since 2026-11-29T07:40:00.000Z: held by tollgate (see Waiting)',
        'Pod conditions:',
        '  (none shown)',
        'Waiting:    pacing: queued: tenant batch of 1 done',
        "Order:      2 of 4 in tenant team-a's release order",
        'Conditions:',
        '  not met Pacing: tenant batch of 1 done',
        'Budget:     pods 1/4',
        'Pacing:     1/s, batch 1, max in flight 1000',
        'Expiry:     none',
        'Estimate:   2026-11-29T08:00:01.000Z (pace: 0 pod(s) ahead held only by pacing, plus this one, at 1/s)',
        '',
      ].join('\n'),
    );
  });

  it('prints a pod held by a condition, bounded by its expiry, with since when, byte for byte', () => {
    assert.equal(
      formatExplanation(explained('w-1'), policyUrl),
      [
        'Pod:        team-a/w-1',
        'Tenant:     team-a',
        'Policy:     waits',
        `Source:     ${policyUrl} at 0000000000000000000000000000000000000001: gates/waits.yaml`,
        'Gate:       team-a.tollgate.io/waits',
        'Gated:      since 2026-11-29T07:20:00.000Z',
        'State:      gated since 2026-11-29T07:21:00.000Z: held by tollgate (see Waiting)',
        'Pod conditions:',
        '  PodScheduled False (SchedulingGated) since 2026-11-29T07:20:00.000Z',
        '  tollgate.io/Released False (ObjectCondition) since 2026-11-29T07:21:00.000Z',
        'Waiting:    conditions: waiting for ObjectCondition',
        "Order:      4 of 4 in tenant team-a's release order",
        'Conditions:',
        '  not met ObjectCondition: {"object":"ConfigMap/team-a/inputs","found":false}',
        'Budget:     pods 1/4',
        'Pacing:     1/s, batch 1, max in flight 1000',
        'Expiry:     2026-11-29T08:20:00.000Z, then Release',
        'Estimate:   2026-11-29T08:20:00.000Z (at the latest at its expiry (action Release); earlier once ObjectCondition hold(s))',
        '',
      ].join('\n'),
    );
  });
});

describe('queue: held pods in release order, filtered and paged', () => {
  it('pages with a next offset until the last page', () => {
    const first = queuePage(explanations, { limit: 3 });
    assert.deepEqual([first.total, first.next, first.items.length], [4, 3, 3]);
    const last = queuePage(explanations, { limit: 3, offset: 3 });
    assert.deepEqual([last.next, last.items.map((e) => e.pod)], [null, ['team-a/w-1']]);
  });

  it('filters by GatePolicy and by tenant', () => {
    assert.deepEqual(
      queuePage(explanations, { policy: 'waits' }).items.map((e) => e.pod),
      ['team-a/w-1'],
    );
    assert.equal(queuePage(explanations, { tenant: 'team-b' }).total, 0);
  });

  it('prints a page byte for byte', () => {
    assert.equal(
      formatQueue(queuePage(explanations, { limit: 2, offset: 1 }), 1),
      [
        '#  POD           TENANT  POLICY  WAITING  ESTIMATE                  REASON',
        '2  team-a/f-mid  team-a  fast    pacing   2026-11-29T08:00:01.000Z  queued: tenant batch of 1 done',
        '3  team-a/f-new  team-a  fast    pacing   2026-11-29T08:00:02.000Z  queued: tenant batch of 1 done',
        '4 held pod(s); next page: --continue 3',
        '',
      ].join('\n'),
    );
  });
});
