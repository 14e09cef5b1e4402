import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  emptyPlanState,
  planReleases,
  type Plan,
  type PlanState,
} from '../../../src/decide/release-plan.ts';
import { RELEASED_ANNOTATION } from '../../../src/decide/lifecycle.ts';
import { snapshotOf, type PodLike } from '../../../src/decide/objects.ts';
import type { Policy } from '../../../src/policy/model.ts';
import { aNode } from '../../builders/node.ts';
import { aPod, type PodBuilder } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant, type TenantBuilder } from '../../builders/policy.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const gateA = 'team-a.tollgate.io/ready';
const gateB = 'team-b.tollgate.io/ready';

function policyWith(
  tenantA: TenantBuilder,
  options: { global?: Parameters<ReturnType<typeof aPolicy>['pacing']>[0] } = {},
): Policy {
  return aPolicy()
    .tenant(tenantA)
    .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' }))
    .pacing(options.global ?? {})
    .obj();
}

function gated(n: number, namespace = 'team-a', gate = gateA, cpu = '1'): PodBuilder[] {
  return Array.from({ length: n }, (_, i) =>
    aPod(`p${String(i).padStart(3, '0')}`, namespace)
      .gated(gate)
      .requests({ cpu })
      .createdAt(now - 60_000 + i),
  );
}

function plan(
  policy: Policy,
  pods: (PodBuilder | PodLike)[],
  state: PlanState = emptyPlanState,
  at = now,
  nodes = [aNode('n1')],
): Plan {
  const objs = pods.map((p) =>
    'obj' in p && typeof p.obj === 'function' ? (p as PodBuilder).obj() : (p as PodLike),
  );
  return planReleases(
    policy,
    snapshotOf(
      objs,
      nodes.map((n) => n.obj()),
    ),
    state,
    at,
  );
}

const released = (p: Plan) =>
  p.decisions.filter((d) => d.kind === 'Release').map((d) => d.target.name);
const kinds = (p: Plan) => p.decisions.map((d) => d.kind);

test('release decisions under budget and pacing', async (t) => {
  const cases: { name: string; policy: Policy; pods: PodBuilder[]; want: number }[] = [
    {
      name: 'a pod whose conditions hold is released',
      policy: policyWith(aTenant('team-a')),
      pods: gated(1),
      want: 1,
    },
    {
      name: 'a pod-count budget releases only up to the budget, counting pods already released',
      policy: policyWith(aTenant('team-a').budget({ pods: 3 })),
      pods: [...gated(5), aPod('old', 'team-a').boundTo('n1').running()],
      want: 2,
    },
    {
      name: 'a cpu budget charges every pod its effective requests',
      policy: policyWith(aTenant('team-a').budget({ cpu: '2500m' })),
      pods: gated(5),
      want: 2,
    },
    {
      name: 'finished pods free their budget',
      policy: policyWith(aTenant('team-a').budget({ pods: 1 })),
      pods: [...gated(2), aPod('done', 'team-a').boundTo('n1').phase('Succeeded')],
      want: 1,
    },
    {
      name: 'tenant max in flight counts released pods not yet scheduled, including unschedulable ones',
      policy: policyWith(aTenant('team-a').pacing({ maxInFlight: 3 })),
      pods: [...gated(5), aPod('x', 'team-a'), aPod('y', 'team-a').unschedulable()],
      want: 1,
    },
    {
      name: 'global max in flight bounds every tenant',
      policy: policyWith(aTenant('team-a'), { global: { maxInFlight: 2 } }),
      pods: gated(5),
      want: 2,
    },
    {
      name: 'a batch size caps one pass',
      policy: policyWith(aTenant('team-a').pacing({ batchSize: 4 })),
      pods: gated(10),
      want: 4,
    },
    {
      name: 'a release rate caps a burst to one second of releases',
      policy: policyWith(aTenant('team-a').pacing({ releasesPerSecond: 3 })),
      pods: gated(10),
      want: 3,
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => assert.equal(released(plan(c.policy, c.pods)).length, c.want));
  }
});

test('the write removes only our gate, tested at its index, on the resourceVersion decided on', () => {
  const pod = aPod('p', 'team-a').gated('other.io/keep', gateA).resourceVersion('42');
  const result = plan(policyWith(aTenant('team-a')), [pod]);
  assert.deepEqual(
    result.writes.map((w) => [w.op, w.target.resourceVersion, w.key]),
    [
      [
        {
          type: 'removeGate',
          gate: gateA,
          gateIndex: 1,
          markReleased: { annotationsPresent: false },
        },
        '42',
        'team-a/p',
      ],
    ],
  );
  assert.equal(result.decisions[0]?.id, `gate-release:Release:uid-team-a-p:42:${now}`);
});

test('the removal marks the pod released in the same patch, saying whether it has annotations', async (t) => {
  const cases = [
    { name: 'a pod without annotations', pod: aPod('p', 'team-a').gated(gateA), present: false },
    {
      name: 'a pod with annotations',
      pod: aPod('p', 'team-a').annotate('team.example/owner', 'x').gated(gateA),
      present: true,
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => {
      const [write] = plan(policyWith(aTenant('team-a')), [c.pod]).writes;
      assert.deepEqual(write?.op, {
        type: 'removeGate',
        gate: gateA,
        gateIndex: 0,
        markReleased: { annotationsPresent: c.present },
      });
    });
  }
});

test('a pod carrying only a foreign gate gets no decision at all', () => {
  const result = plan(policyWith(aTenant('team-a')), [aPod('p', 'team-a').gated('other.io/x')]);
  assert.deepEqual(result.decisions, []);
  assert.deepEqual(result.writes, []);
});

test('tokens refill with time and the plan asks to be woken when they have', () => {
  const policy = policyWith(aTenant('team-a').pacing({ releasesPerSecond: 2 }));
  const first = plan(policy, gated(10));
  assert.equal(released(first).length, 2);
  assert.ok(
    first.requeueAfterMs !== undefined && first.requeueAfterMs > 0 && first.requeueAfterMs <= 1000,
  );
  const pods = gated(10).slice(2);
  const second = plan(policy, pods, first.nextState, now + 500);
  assert.equal(released(second).length, 1, 'half a second at 2/s is one token');
});

test('tenants share releases by weight', () => {
  const policy = aPolicy()
    .tenant(aTenant('team-a').weight(3), aTenant('team-b').weight(1))
    .gatePolicy(aGatePolicy('ready', 'team-a'), aGatePolicy('ready', 'team-b'))
    .pacing({ batchSize: 8 })
    .obj();
  const result = plan(policy, [...gated(20), ...gated(20, 'team-b', gateB)]);
  const byTenant = (name: string) =>
    result.decisions.filter((d) => d.kind === 'Release' && d.tenant === name).length;
  assert.deepEqual([byTenant('team-a'), byTenant('team-b')], [6, 2]);
});

test('fair share carries over between passes, so the tenant second in a pass is first in the next', () => {
  const policy = aPolicy()
    .tenant(aTenant('team-a'), aTenant('team-b'))
    .gatePolicy(aGatePolicy('ready', 'team-a'), aGatePolicy('ready', 'team-b'))
    .pacing({ batchSize: 3 })
    .obj();
  let state = emptyPlanState;
  const counts = { 'team-a': 0, 'team-b': 0 } as Record<string, number>;
  let podsA = gated(30);
  let podsB = gated(30, 'team-b', gateB);
  for (let pass = 0; pass < 4; pass++) {
    const result = plan(policy, [...podsA, ...podsB], state, now + pass * 1000);
    for (const d of result.decisions.filter((x) => x.kind === 'Release'))
      counts[d.tenant as string]! += 1;
    const done = new Set(
      result.decisions
        .filter((d) => d.kind === 'Release')
        .map((d) => `${d.target.namespace}/${d.target.name}`),
    );
    const notDone = (p: PodBuilder) =>
      !done.has(`${p.obj().metadata!.namespace}/${p.obj().metadata!.name}`);
    podsA = podsA.filter(notDone);
    podsB = podsB.filter(notDone);
    // The released pods are gone from this snapshot (finished), so the in-flight writes are settled.
    state = { ...result.nextState, acting: new Map() };
  }
  assert.deepEqual(counts, { 'team-a': 6, 'team-b': 6 });
});

test('a higher-priority policy is released first', () => {
  const policy = aPolicy()
    .tenant(aTenant('team-a').pacing({ batchSize: 2 }))
    .gatePolicy(aGatePolicy('low', 'team-a'), aGatePolicy('high', 'team-a').priority(10))
    .obj();
  const low = gated(3, 'team-a', 'team-a.tollgate.io/low');
  const high = [aPod('urgent', 'team-a').gated('team-a.tollgate.io/high').createdAt(now)];
  assert.deepEqual(released(plan(policy, [...low, ...high])), ['urgent', 'p000']);
});

test('gangs are released whole or not at all', async (t) => {
  const gangPolicy = (budgetPods: number) =>
    aPolicy()
      .tenant(aTenant('team-a').budget({ pods: budgetPods }))
      .gatePolicy(
        aGatePolicy('ready', 'team-a').conditions(
          { type: 'Budget' },
          { type: 'GangComplete', groupLabel: 'gang', sizeAnnotation: 'gang-size' },
        ),
      )
      .obj();
  const members = (n: number) =>
    Array.from({ length: n }, (_, i) =>
      aPod(`m${i}`, 'team-a').gated(gateA).label('gang', 'g1').annotate('gang-size', '3'),
    );
  const cases = [
    { name: 'an incomplete gang is held', policy: gangPolicy(10), pods: members(2), want: 0 },
    {
      name: 'a complete gang whose budget fits is released together',
      policy: gangPolicy(10),
      pods: members(3),
      want: 3,
    },
    {
      name: 'a complete gang that does not fit the budget whole is held whole',
      policy: gangPolicy(2),
      pods: members(3),
      want: 0,
    },
  ];
  for (const c of cases)
    await t.test(c.name, () => assert.equal(released(plan(c.policy, c.pods)).length, c.want));
  await t.test(
    "a gang's writes name their gang, so the guard sends them together; a pod alone names none",
    () => {
      const gang = plan(gangPolicy(10), members(3)).writes;
      assert.equal(gang.length, 3);
      assert.equal(new Set(gang.map((w) => w.unit)).size, 1);
      assert.ok(gang[0]!.unit !== undefined, 'the gang is named');
      const alone = aPolicy()
        .tenant(aTenant('team-a'))
        .gatePolicy(aGatePolicy('ready', 'team-a'))
        .obj();
      const solo = plan(alone, [aPod('solo', 'team-a').gated(gateA)]).writes;
      assert.equal(solo.length, 1);
      assert.equal(solo[0]!.unit, undefined);
    },
  );
  // A gang released in part (one member's write failed, its leader died): the members
  // tollgate released ran and finished before the straggler was decided again.
  const createdAt = now - 60_000;
  const finishedMember = (name: string, scheduledAt: number) =>
    aPod(name, 'team-a')
      .label('gang', 'g1')
      .annotate('gang-size', '3')
      .annotate(RELEASED_ANNOTATION, gateA)
      .createdAt(createdAt)
      .boundTo('n1')
      .condition('PodScheduled', 'True', undefined, scheduledAt)
      .phase('Succeeded');
  const straggler = aPod('m2', 'team-a')
    .gated(gateA)
    .label('gang', 'g1')
    .annotate('gang-size', '3')
    .createdAt(createdAt);
  const partial = [
    {
      name: 'the last member of a gang released in part is released once its released members have finished',
      pods: [finishedMember('m0', now - 30_000), finishedMember('m1', now - 30_000), straggler],
      want: ['m2'],
    },
    {
      name: 'finished members of an earlier run of the group (scheduled before this pod was created) do not count',
      pods: [
        finishedMember('m0', createdAt - 5000),
        finishedMember('m1', createdAt - 5000),
        straggler,
      ],
      want: [],
    },
  ];
  for (const c of partial)
    await t.test(c.name, () => assert.deepEqual(released(plan(gangPolicy(10), c.pods)), c.want));
  // The same, but the released members were also deleted before the straggler was
  // decided again: the cluster no longer shows them; the plan's state remembers that the
  // straggler's release was decided with its whole gang.
  await t.test(
    'the last member of a gang released in part is released though its released members are gone, when its release was decided with its whole gang',
    () => {
      const first = plan(gangPolicy(10), members(3));
      assert.deepEqual(released(first), ['m0', 'm1', 'm2']);
      // m0 and m1 landed, ran and were deleted; m2's write conflicted (settled, not acting).
      const afterConflict = { ...first.nextState, acting: new Map() };
      const again = plan(gangPolicy(10), [members(3)[2]!], afterConflict, now + 60_000);
      assert.deepEqual(released(again), ['m2']);
      const gang = again.decisions[0]?.inputs.find((i) => i.condition === 'GangComplete');
      assert.deepEqual(
        [gang?.met, (gang?.value as { releasedWithGangAt?: string }).releasedWithGangAt],
        [true, new Date(now).toISOString()],
        'the input says why the gang counts as complete',
      );
    },
  );
  await t.test(
    'a gang member alone whose release was never decided still waits for its gang',
    () => {
      const first = plan(gangPolicy(10), members(2));
      assert.deepEqual(released(first), []);
      assert.deepEqual(
        released(plan(gangPolicy(10), [members(2)[1]!], first.nextState, now + 60_000)),
        [],
      );
    },
  );
  await t.test('a remembered gang release is forgotten once the member is no longer gated', () => {
    const first = plan(gangPolicy(10), members(3));
    const running = [0, 1, 2].map((i) =>
      aPod(`m${i}`, 'team-a')
        .label('gang', 'g1')
        .annotate('gang-size', '3')
        .annotate(RELEASED_ANNOTATION, gateA)
        .boundTo('n1')
        .running(),
    );
    const later = plan(
      gangPolicy(10),
      running,
      { ...first.nextState, acting: new Map() },
      now + 5000,
    );
    assert.deepEqual(later.nextState.gangReleases ?? {}, {});
  });
  await t.test('a gang larger than max in flight says it can never be released', () => {
    const policy = aPolicy()
      .tenant(aTenant('team-a').pacing({ maxInFlight: 2 }))
      .gatePolicy(
        aGatePolicy('ready', 'team-a').conditions({
          type: 'GangComplete',
          groupLabel: 'gang',
          sizeAnnotation: 'gang-size',
        }),
      )
      .obj();
    const result = plan(policy, members(3));
    assert.equal(released(result).length, 0);
    assert.match(result.decisions[0]?.reason ?? '', /can never be released/);
  });
});

test('a hold is recorded once per reason, so a quiet cluster records nothing', () => {
  const policy = policyWith(aTenant('team-a').budget({ pods: 0 }));
  const first = plan(policy, gated(3));
  assert.deepEqual(kinds(first), ['Hold', 'Hold', 'Hold']);
  assert.deepEqual(
    first.decisions[0]?.inputs.map((i) => [i.condition, i.met]),
    [['Budget', false]],
  );
  const second = plan(policy, gated(3), first.nextState, now + 5000);
  assert.deepEqual(second.decisions, []);
});

test('a release the view has not caught up with is not decided again and still charges the budget', () => {
  const policy = policyWith(aTenant('team-a').budget({ pods: 2 }));
  const first = plan(policy, gated(3));
  assert.equal(released(first).length, 2);
  const second = plan(policy, gated(3), first.nextState, now + 100);
  assert.equal(released(second).length, 0);
  assert.deepEqual(second.writes, []);
});

test('a restarted controller derives everything from the cluster and does not exceed the budget', () => {
  const policy = policyWith(aTenant('team-a').budget({ pods: 3 }));
  const pods = [...gated(3), aPod('r1', 'team-a'), aPod('r2', 'team-a').boundTo('n1').running()];
  assert.equal(released(plan(policy, pods, emptyPlanState)).length, 1);
});

test('a raised budget opens gradually, not in one herd', () => {
  const before = policyWith(aTenant('team-a').budget({ pods: 10 }));
  const running = Array.from({ length: 10 }, (_, i) =>
    aPod(`r${i}`, 'team-a').boundTo('n1').running(),
  );
  const first = plan(before, [...running, ...gated(100)]);
  assert.equal(released(first).length, 0);
  const after = policyWith(aTenant('team-a').budget({ pods: 110 }));
  const atChange = plan(after, [...running, ...gated(100)], first.nextState, now + 1000);
  assert.equal(released(atChange).length, 0, 'the ramp starts where the old limit was');
  const halfway = plan(after, [...running, ...gated(100)], atChange.nextState, now + 6000);
  assert.equal(released(halfway).length, 50);
  assert.ok(halfway.requeueAfterMs !== undefined, 'a running ramp asks for another pass');
});

test('expiry', async (t) => {
  const withExpiry = (action: 'Review' | 'Cancel' | 'Release') =>
    aPolicy()
      .tenant(aTenant('team-a'))
      .gatePolicy(
        aGatePolicy('ready', 'team-a')
          .conditions({ type: 'ImagePresent', minNodes: 1 })
          .expiry(60_000, action),
      )
      .obj();
  const old = () =>
    aPod('old', 'team-a')
      .gated(gateA)
      .createdAt(now - 120_000);
  await t.test('a pod gated past its expiry with action Review is annotated, not released', () => {
    const result = plan(withExpiry('Review'), [old()]);
    assert.deepEqual(kinds(result), ['Expire', 'Review']);
    const op = result.writes[0]?.op;
    assert.equal(op?.type, 'annotate');
    assert.ok(op?.type === 'annotate' && typeof op.annotations['tollgate.io/review'] === 'string');
  });
  await t.test('a pod in review is held until an approval releases it', () => {
    const inReview = old().annotate('tollgate.io/review', '{}');
    assert.deepEqual(kinds(plan(withExpiry('Review'), [inReview])), ['Hold']);
    const policy = {
      ...withExpiry('Review'),
      approvals: aPolicy().approve('Release', 'team-a', 'old').obj().approvals,
    };
    assert.deepEqual(released(plan(policy, [inReview])), ['old']);
  });
  await t.test('a Cancel approval deletes the pod with the approval as the reason', () => {
    const policy = {
      ...withExpiry('Review'),
      approvals: aPolicy().approve('Cancel', 'team-a', 'old').obj().approvals,
    };
    const result = plan(policy, [old().annotate('tollgate.io/review', '{}')]);
    assert.equal(result.writes[0]?.op.type, 'delete');
    assert.deepEqual(kinds(result), ['Cancel']);
  });
  await t.test('action Cancel deletes an expired pod', () => {
    const result = plan(withExpiry('Cancel'), [old()]);
    assert.deepEqual(kinds(result), ['Expire', 'Cancel']);
    assert.equal(result.writes[0]?.op.type, 'delete');
  });
  await t.test('action Release waives the failing conditions', () => {
    assert.deepEqual(released(plan(withExpiry('Release'), [old()])), ['old']);
  });
  await t.test('a pod not yet expired is held and the plan wakes at its expiry', () => {
    const young = aPod('young', 'team-a')
      .gated(gateA)
      .createdAt(now - 50_000);
    const result = plan(withExpiry('Review'), [young]);
    assert.deepEqual(kinds(result), ['Hold']);
    assert.ok(result.requeueAfterMs !== undefined && result.requeueAfterMs <= 10_000);
  });
});

test('the summary tells gated, in-flight, unschedulable and running pods apart', () => {
  const policy = policyWith(aTenant('team-a').budget({ pods: 0 }));
  const result = plan(policy, [
    ...gated(2),
    aPod('a', 'team-a'),
    aPod('b', 'team-a').unschedulable(),
    aPod('c', 'team-a').boundTo('n1').running(),
    aPod('d', 'team-a').boundTo('n1').phase('Failed'),
  ]);
  const states = result.summary.states['team-a']!;
  assert.deepEqual(
    [states.gated, states.pending, states.unschedulable, states.running, states.failed],
    [2, 1, 1, 1, 1],
  );
  assert.deepEqual(result.summary.gated, [{ tenant: 'team-a', gate: gateA, count: 2 }]);
});
