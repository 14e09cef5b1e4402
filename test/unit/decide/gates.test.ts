import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gateIndex, ownedGate } from '../../../src/decide/gates.ts';
import {
  chargeReason,
  chargesBudget,
  classifyPod,
  RELEASED_ANNOTATION,
} from '../../../src/decide/lifecycle.ts';
import { tenantUsage } from '../../../src/decide/conditions.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const policy = aPolicy()
  .tenant(aTenant('team-a'), aTenant('team-b'))
  .gatePolicy(
    aGatePolicy('ready', 'team-a'),
    aGatePolicy('gpu', 'team-a')
      .selector({ matchLabels: { accel: 'gpu' } })
      .priority(5),
    aGatePolicy('gpu-any', 'team-a').gate('team-a.tollgate.io/gpu'),
    aGatePolicy('ready', 'team-b'),
  )
  .obj();

test('ownedGate', async (t) => {
  const cases = [
    { name: 'a pod without gates has no owned gate', pod: aPod('p', 'team-a'), want: undefined },
    {
      name: 'a foreign gate is never owned',
      pod: aPod('p', 'team-a').gated('other.io/x'),
      want: undefined,
    },
    {
      name: 'our gate behind a foreign gate is found at its index',
      pod: aPod('p', 'team-a').gated('other.io/x', 'team-a.tollgate.io/ready'),
      want: { gate: 'team-a.tollgate.io/ready', index: 1, policy: 'ready' },
    },
    {
      name: "another tenant's gate in this tenant's namespace is not owned",
      pod: aPod('p', 'team-a').gated('team-b.tollgate.io/ready'),
      want: undefined,
    },
    {
      name: 'a gate in a namespace no tenant owns is not owned',
      pod: aPod('p', 'elsewhere').gated('team-a.tollgate.io/ready'),
      want: undefined,
    },
    {
      name: 'the highest-priority policy whose selector matches decides',
      pod: aPod('p', 'team-a').label('accel', 'gpu').gated('team-a.tollgate.io/gpu'),
      want: { gate: 'team-a.tollgate.io/gpu', index: 0, policy: 'gpu' },
    },
    {
      name: 'a policy whose selector does not match gives way to one that does',
      pod: aPod('p', 'team-a').gated('team-a.tollgate.io/gpu'),
      want: { gate: 'team-a.tollgate.io/gpu', index: 0, policy: 'gpu-any' },
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => {
      const owned = ownedGate(c.pod.obj(), policy);
      assert.deepEqual(
        owned && { gate: owned.gate, index: owned.index, policy: owned.gatePolicy?.name },
        c.want,
      );
    });
  }
});

test('a gate owned by name whose policy selects nothing is still ours, without a policy', () => {
  const p = aPolicy()
    .tenant(aTenant('team-a'))
    .gatePolicy(aGatePolicy('only-web', 'team-a').selector({ matchLabels: { app: 'web' } }))
    .obj();
  const owned = ownedGate(aPod('p', 'team-a').gated('team-a.tollgate.io/only-web').obj(), p);
  assert.equal(owned?.gate, 'team-a.tollgate.io/only-web');
  assert.equal(owned?.gatePolicy, undefined);
});

test('gateIndex finds a gate or returns -1', () => {
  const pod = aPod('p').gated('a.io/x', 'b.io/y').obj();
  assert.equal(gateIndex(pod, 'b.io/y'), 1);
  assert.equal(gateIndex(pod, 'c.io/z'), -1);
});

test('classifyPod', async (t) => {
  const cases = [
    {
      name: 'a pod with our gate is gated',
      pod: aPod('p', 'team-a').gated('team-a.tollgate.io/ready'),
      want: 'gated',
    },
    {
      name: 'a gated pod marked for review is in review',
      pod: aPod('p', 'team-a')
        .gated('team-a.tollgate.io/ready')
        .annotate('tollgate.io/review', '{}'),
      want: 'review',
    },
    {
      name: 'a pod with a gate under its tenant prefix that no GatePolicy names is orphaned',
      pod: aPod('p', 'team-a').gated('team-a.tollgate.io/renamed'),
      want: 'orphaned',
    },
    {
      name: "a pod with another tenant's prefix gate is waiting, not orphaned (not this tenant's to judge)",
      pod: aPod('p', 'team-a').gated('team-b.tollgate.io/ready'),
      want: 'waiting',
    },
    {
      name: 'a released pod with a foreign gate left is waiting',
      pod: aPod('p', 'team-a').gated('other.io/x'),
      want: 'waiting',
    },
    { name: 'a released pod without a node is pending', pod: aPod('p', 'team-a'), want: 'pending' },
    {
      name: 'a released pod the scheduler could not place is unschedulable',
      pod: aPod('p', 'team-a').unschedulable(),
      want: 'unschedulable',
    },
    {
      name: 'a bound pod not yet running is scheduled',
      pod: aPod('p', 'team-a').boundTo('n1'),
      want: 'scheduled',
    },
    {
      name: 'a bound running pod is running',
      pod: aPod('p', 'team-a').boundTo('n1').running(),
      want: 'running',
    },
    {
      name: 'a failed pod is failed',
      pod: aPod('p', 'team-a').boundTo('n1').phase('Failed'),
      want: 'failed',
    },
    {
      name: 'a succeeded pod is succeeded',
      pod: aPod('p', 'team-a').boundTo('n1').phase('Succeeded'),
      want: 'succeeded',
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => assert.equal(classifyPod(c.pod.obj(), policy), c.want));
  }
});

test('chargesBudget: only a pod that can be scheduled or runs takes from the budget', async (t) => {
  const cases = [
    {
      name: 'a pod with our gate is not charged',
      pod: aPod('p', 'team-a').gated('team-a.tollgate.io/ready'),
      charged: false,
    },
    {
      name: "a pod with only Kueue's gate is not charged",
      pod: aPod('p', 'team-a').gated('kueue.x-k8s.io/admission'),
      charged: false,
    },
    {
      name: "a pod with Kueue's gate and ours is not charged",
      pod: aPod('p', 'team-a').gated('kueue.x-k8s.io/admission', 'team-a.tollgate.io/ready'),
      charged: false,
    },
    {
      name: 'a pod with no gate left and no node is charged',
      pod: aPod('p', 'team-a'),
      charged: true,
    },
    {
      name: 'a running pod is charged',
      pod: aPod('p', 'team-a').boundTo('n1').running(),
      charged: true,
    },
    {
      name: 'a pod whose gate no GatePolicy names any more is not charged',
      pod: aPod('p', 'team-a').gated('team-a.tollgate.io/renamed'),
      charged: false,
    },
    {
      name: 'a finished pod is not charged',
      pod: aPod('p', 'team-a').boundTo('n1').phase('Succeeded'),
      charged: false,
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () =>
      assert.equal(chargesBudget(classifyPod(c.pod.obj(), policy)), c.charged),
    );
  }
});

test("tenantUsage charges no pod held by another controller's gate", () => {
  const pods = [
    ...Array.from({ length: 5 }, (_, i) =>
      aPod(`kueue-${i}`, 'team-a').gated('kueue.x-k8s.io/admission').requests({ cpu: '1' }).obj(),
    ),
    aPod('running', 'team-a').boundTo('n1').running().requests({ cpu: '1' }).obj(),
  ];
  const usage = tenantUsage(policy, pods).get('team-a');
  assert.equal(usage?.pods, 1);
  assert.equal(usage?.resources.cpu, 1000);
});

test("chargeReason: pods tollgate never released are charged by the tenant's choice", async (t) => {
  const charge = aTenant('team-a').obj();
  const ignore = aTenant('team-a').neverGatedPods('Ignore').obj();
  const marked = (pod: ReturnType<typeof aPod>) =>
    pod.annotate(RELEASED_ANNOTATION, 'team-a.tollgate.io/ready');
  const cases = [
    {
      name: 'a running pod tollgate released is charged as released under Charge',
      pod: marked(aPod('p', 'team-a').boundTo('n1').running()),
      tenant: charge,
      want: 'released',
    },
    {
      name: 'a running pod tollgate released is charged as released under Ignore',
      pod: marked(aPod('p', 'team-a').boundTo('n1').running()),
      tenant: ignore,
      want: 'released',
    },
    {
      name: 'a running pod tollgate never gated is charged as neverGated under Charge',
      pod: aPod('p', 'team-a').boundTo('n1').running(),
      tenant: charge,
      want: 'neverGated',
    },
    {
      name: 'a running pod tollgate never gated is not charged under Ignore',
      pod: aPod('p', 'team-a').boundTo('n1').running(),
      tenant: ignore,
      want: undefined,
    },
    {
      name: 'a pod whose release is sent but not yet seen is charged as released under Ignore',
      pod: aPod('p', 'team-a').gated('team-a.tollgate.io/ready'),
      tenant: ignore,
      releasing: true,
      state: 'pending' as const,
      want: 'released',
    },
    {
      name: 'a running pod tollgate held whose gate was removed by hand (break-glass) is charged as released under Ignore',
      pod: aPod('p', 'team-a')
        .boundTo('n1')
        .running()
        .condition('tollgate.io/Released', 'False', 'Budget'),
      tenant: ignore,
      want: 'released',
    },
    {
      name: 'a running pod recorded as break-glass is charged as released under Ignore',
      pod: aPod('p', 'team-a')
        .boundTo('n1')
        .running()
        .condition('tollgate.io/Released', 'True', 'RemovedOutsideTollgate'),
      tenant: ignore,
      want: 'released',
    },
    {
      name: "a pod still carrying Kueue's gate is not charged under Charge",
      pod: aPod('p', 'team-a').gated('kueue.x-k8s.io/admission'),
      tenant: charge,
      want: undefined,
    },
    {
      name: 'a finished pod tollgate released is not charged',
      pod: marked(aPod('p', 'team-a').boundTo('n1').phase('Succeeded')),
      tenant: charge,
      want: undefined,
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => {
      const pod = c.pod.obj();
      const state = c.state ?? classifyPod(pod, policy);
      assert.equal(chargeReason(pod, state, c.tenant, c.releasing), c.want);
    });
  }
});

test('tenantUsage under Ignore charges only the pods tollgate released', () => {
  const ignoring = aPolicy()
    .tenant(aTenant('team-a').neverGatedPods('Ignore'))
    .gatePolicy(aGatePolicy('ready', 'team-a'))
    .obj();
  const pods = [
    ...Array.from({ length: 4 }, (_, i) =>
      aPod(`kueue-run-${i}`, 'team-a').boundTo('n1').running().requests({ cpu: '1' }).obj(),
    ),
    aPod('ours', 'team-a')
      .annotate(RELEASED_ANNOTATION, 'team-a.tollgate.io/ready')
      .boundTo('n1')
      .running()
      .requests({ cpu: '1' })
      .obj(),
  ];
  assert.equal(tenantUsage(ignoring, pods).get('team-a')?.pods, 1);
  assert.equal(tenantUsage(policy, pods).get('team-a')?.pods, 5);
});
