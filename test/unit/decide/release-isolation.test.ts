/**
 * Fault isolation in the gate-release plan: a pod with two of tollgate's gates, one
 * pending decision per pod, gates whose GatePolicy was renamed (orphaned), and running
 * pods tollgate never gated (charged or not by the tenant's `budget.neverGatedPods`).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { emptyPlanState, planReleases, type PlanState } from '../../../src/decide/release-plan.ts';
import { snapshotOf, type PodLike } from '../../../src/decide/objects.ts';
import type { Policy } from '../../../src/policy/model.ts';
import { aPod, type PodBuilder } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';
import { RELEASED_ANNOTATION } from '../../../src/decide/lifecycle.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const first = 'team-a.tollgate.io/first';
const second = 'team-a.tollgate.io/second';
const flag = { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'team-a', name: 'flag' };

const twoGates = (budget = 5): Policy =>
  aPolicy()
    .tenant(aTenant('team-a').budget({ pods: budget }))
    .gatePolicy(
      aGatePolicy('first', 'team-a').gate(first).conditions({ type: 'Budget' }),
      aGatePolicy('second', 'team-a')
        .gate(second)
        .conditions(
          { type: 'Budget' },
          {
            type: 'ObjectCondition',
            object: { apiVersion: 'v1', kind: 'ConfigMap', name: 'flag' },
            field: 'data.ready',
            equals: 'true',
          },
        ),
    )
    .obj();

const plan = (
  policy: Policy,
  pods: PodBuilder[],
  state: PlanState = emptyPlanState,
  ready = false,
) =>
  planReleases(
    policy,
    snapshotOf(
      pods.map((p) => p.obj() as PodLike),
      [],
      ready ? [{ ...flag, object: { data: { ready: 'true' } } }] : [],
    ),
    state,
    now,
  );

const kinds = (p: ReturnType<typeof plan>) => p.decisions.map((d) => `${d.kind} ${d.target.name}`);

describe('a pod with two gates tollgate owns', () => {
  const pod = () =>
    aPod('p', 'team-a')
      .gated(first, second)
      .createdAt(now - 60_000);

  it('the first gate is released by its own policy', () => {
    const p = plan(twoGates(), [pod()]);
    assert.deepEqual(
      p.writes.map((w) => w.op),
      [
        {
          type: 'removeGate',
          gate: first,
          gateIndex: 0,
          markReleased: { annotationsPresent: false },
        },
      ],
    );
  });

  it('while that release is pending the pod is neither charged nor decided again', () => {
    const p1 = plan(twoGates(), [pod()]);
    const p2 = plan(twoGates(), [pod()], p1.nextState);
    assert.deepEqual(p2.decisions, []);
    assert.equal(p2.summary.states['team-a']?.pending, 0, 'still gated by its second gate');
    assert.equal(p2.summary.states['team-a']?.gated, 1);
  });

  it('once the view shows the first gate gone, the second is judged by its own policy', () => {
    const p1 = plan(twoGates(), [pod()]);
    const after = () =>
      aPod('p', 'team-a')
        .gated(second)
        .createdAt(now - 60_000);
    const held = plan(twoGates(), [after()], p1.nextState);
    assert.deepEqual(kinds(held), ['Hold p']);
    assert.match(held.decisions[0]?.reason ?? '', /waiting for ObjectCondition/);
    const released = plan(twoGates(), [after()], p1.nextState, true);
    assert.deepEqual(
      released.writes.map((w) => w.op),
      [
        {
          type: 'removeGate',
          gate: second,
          gateIndex: 0,
          markReleased: { annotationsPresent: false },
        },
      ],
    );
  });
});

describe('one pending decision per pod', () => {
  const expiring = aPolicy()
    .tenant(aTenant('team-a'))
    .gatePolicy(
      aGatePolicy('ready', 'team-a')
        .gate('team-a.tollgate.io/ready')
        .conditions({
          type: 'ObjectCondition',
          object: { apiVersion: 'v1', kind: 'ConfigMap', name: 'flag' },
          field: 'data.ready',
          equals: 'true',
        })
        .expiry(1_000, 'Review'),
    )
    .obj();
  const old = () =>
    aPod('p', 'team-a')
      .gated('team-a.tollgate.io/ready')
      .createdAt(now - 60_000);

  it('a Review whose annotation is still queued is not decided again', () => {
    const p1 = plan(expiring, [old()]);
    assert.deepEqual(kinds(p1), ['Expire p', 'Review p']);
    const p2 = plan(expiring, [old()], p1.nextState);
    assert.deepEqual(kinds(p2), []);
  });

  it('once the loop drops the pending write (it failed), the pod is decided again', () => {
    const p1 = plan(expiring, [old()]);
    const p2 = plan(expiring, [old()], { ...p1.nextState, acting: new Map() });
    assert.deepEqual(kinds(p2), ['Expire p', 'Review p']);
  });
});

describe('gates whose GatePolicy was renamed (orphaned)', () => {
  const orphaned = 'team-a.tollgate.io/old';
  const policy = (action?: 'Review' | 'Release' | 'Cancel', budget = 1) => {
    const tenant = aTenant('team-a').budget({ pods: budget });
    if (action) tenant.orphanedGates(action);
    return aPolicy()
      .tenant(tenant)
      .gatePolicy(aGatePolicy('ready', 'team-a').gate('team-a.tollgate.io/new'))
      .obj();
  };
  const pods = () => [
    aPod('o1', 'team-a')
      .gated(orphaned)
      .createdAt(now - 60_000),
    aPod('o2', 'team-a')
      .gated(orphaned)
      .createdAt(now - 50_000),
  ];

  it('by default each is marked for review, recorded with the reason, with no Expire', () => {
    const p = plan(policy(), pods());
    assert.deepEqual(kinds(p), ['Review o1', 'Review o2']);
    assert.match(
      p.decisions[0]?.reason ?? '',
      /^orphaned: no GatePolicy names gate team-a\.tollgate\.io\/old any more/,
    );
    assert.deepEqual(
      p.writes.map((w) => w.op.type),
      ['annotate', 'annotate'],
    );
    assert.equal(p.summary.states['team-a']?.orphaned, 2);
  });

  it('Release releases them within the tenant budget', () => {
    const p = plan(policy('Release', 1), pods());
    assert.deepEqual(
      p.writes.map((w) => `${w.target.name} ${w.op.type}`),
      ['o1 removeGate'],
    );
    assert.ok(p.decisions.some((d) => d.kind === 'Hold' && d.target.name === 'o2'));
  });

  it('Cancel deletes them, with the reason', () => {
    const p = plan(policy('Cancel'), pods());
    assert.deepEqual(
      p.writes.map((w) => w.op.type),
      ['delete', 'delete'],
    );
    assert.match(p.decisions[0]?.reason ?? '', /orphanedGates: Cancel/);
  });

  it('an orphaned pod is never charged to the budget', () => {
    const p = plan(policy('Review', 0), pods());
    assert.equal(p.summary.states['team-a']?.pending, 0);
  });
});

describe("running pods tollgate never gated, by the tenant's budget.neverGatedPods", () => {
  const withChoice = (choice: 'Charge' | 'Ignore') =>
    aPolicy()
      .tenant(aTenant('team-a').budget({ pods: 2 }).neverGatedPods(choice))
      .gatePolicy(aGatePolicy('first', 'team-a').gate(first).conditions({ type: 'Budget' }))
      .obj();
  const pods = () => [
    ...[1, 2, 3].map((i) => aPod(`kueue-${i}`, 'team-a').boundTo('n1').running()),
    aPod('ours', 'team-a')
      .gated(first)
      .createdAt(now - 60_000),
  ];
  const cases = [
    { choice: 'Charge' as const, want: ['Hold ours'], charged: { released: 0, neverGated: 3 } },
    { choice: 'Ignore' as const, want: ['Release ours'], charged: { released: 0, neverGated: 0 } },
  ];
  for (const c of cases) {
    it(`${c.choice}: ${c.want[0]}`, () => {
      const p = plan(withChoice(c.choice), pods());
      assert.deepEqual(kinds(p), c.want);
      assert.deepEqual(p.summary.charged['team-a'], c.charged);
    });
  }

  it('Ignore: a pod tollgate released stays charged, so the budget still holds the next', () => {
    const released = [1, 2].map((i) =>
      aPod(`ours-${i}`, 'team-a').annotate(RELEASED_ANNOTATION, first).boundTo('n1').running(),
    );
    const p = plan(withChoice('Ignore'), [...released, ...pods()]);
    assert.deepEqual(kinds(p), ['Hold ours']);
    assert.deepEqual(p.summary.charged['team-a'], { released: 2, neverGated: 0 });
  });
});
