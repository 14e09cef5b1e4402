// Budget freed and charged again is recorded in the audit trail (issue 16): a released pod
// that stops taking from its tenant's budget (its node not Ready for the tenant's
// budget.unreadyNodeGrace, or the pod being deleted) gets one `Uncharge` record; when its
// node comes back Ready it is charged again, with one `Recharge` record saying whether the
// tenant now stands above its limit, and no new pod of the tenant is released until it is
// under it. Passes over one scenario with injected time, no clock.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Decision } from '../../../src/decide/decision.ts';
import { RELEASED_ANNOTATION } from '../../../src/decide/lifecycle.ts';
import { snapshotOf, type NodeLike } from '../../../src/decide/objects.ts';
import {
  emptyPlanState,
  planReleases,
  type Plan,
  type PlanState,
} from '../../../src/decide/release-plan.ts';
import { aNode } from '../../builders/node.ts';
import { aPod, type PodBuilder } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const m = 60_000;
const gate = 'team-a.tollgate.io/ready';
const policy = aPolicy()
  .tenant(
    aTenant('team-a')
      .budget({ pods: 3 })
      .unreadyNodeGrace(2 * m),
  )
  .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' }))
  .obj();
const released = (name: string, node: string): PodBuilder =>
  aPod(name, 'team-a')
    .uid(`uid-${name}`)
    .resourceVersion('5')
    .annotate(RELEASED_ANNOTATION, gate)
    .boundTo(node)
    .running();
const gated = (name: string): PodBuilder =>
  aPod(name, 'team-a')
    .uid(`uid-${name}`)
    .gated(gate)
    .createdAt(now - m);
const up = aNode('n1').obj();
const down = aNode('n2')
  .notReady(now - 3 * m, 'Unknown')
  .obj();
const back = aNode('n2').obj();

/** Passes in order, each on its pods and nodes, the plan state carried. */
function passes(steps: { pods: PodBuilder[]; nodes: NodeLike[]; at: number }[]): Plan[] {
  let state: PlanState = emptyPlanState;
  return steps.map((step) => {
    const plan = planReleases(
      policy,
      snapshotOf(
        step.pods.map((p) => p.obj()),
        step.nodes,
      ),
      state,
      step.at,
    );
    state = plan.nextState;
    return plan;
  });
}
const charges = (plan: Plan): string[] =>
  plan.decisions
    .filter((d) => d.kind === 'Uncharge' || d.kind === 'Recharge')
    .map((d) => `${d.kind} ${d.target.name}`)
    .sort();
const released_ = (plan: Plan): string[] =>
  plan.decisions.filter((d) => d.kind === 'Release').map((d) => d.target.name);
const record = (plan: Plan, kind: string, name: string): Decision => {
  const found = plan.decisions.find((d) => d.kind === kind && d.target.name === name);
  assert.ok(found, `${kind} ${name} in ${plan.decisions.map((d) => d.kind).join(',')}`);
  return found;
};

describe('a node fails, its pods are freed, then the node comes back Ready', () => {
  const onBoth = [released('a', 'n1'), released('lost-1', 'n2'), released('lost-2', 'n2')];
  const [freed, again, backReady, stillOver, finished] = passes([
    // The node has been Unknown for 3m (grace 2m): lost-1 and lost-2 are freed; next goes.
    { pods: [...onBoth, gated('next')], nodes: [up, down], at: now },
    // Nothing changed: nothing recorded again.
    { pods: [...onBoth, gated('next')], nodes: [up, down], at: now + 1000 },
    // The node is Ready: lost-1 and lost-2 charged again; a, next, lost-1, lost-2 = 4 of 3.
    {
      pods: [...onBoth, released('next', 'n1'), gated('later')],
      nodes: [up, back],
      at: now + 2000,
    },
    {
      pods: [...onBoth, released('next', 'n1'), gated('later')],
      nodes: [up, back],
      at: now + 3000,
    },
    // lost-2 finished: 3 of 3, still no room for later.
    {
      pods: [
        released('a', 'n1'),
        released('lost-1', 'n2'),
        released('next', 'n1'),
        aPod('lost-2', 'team-a').uid('uid-lost-2').boundTo('n2').phase('Succeeded'),
        gated('later'),
      ],
      nodes: [up, back],
      at: now + 4000,
    },
  ]);
  const table: { pass: string; plan: () => Plan; charges: string[]; released: string[] }[] = [
    {
      pass: 'freed',
      plan: () => freed!,
      charges: ['Uncharge lost-1', 'Uncharge lost-2'],
      released: ['next'],
    },
    { pass: 'the same again', plan: () => again!, charges: [], released: [] },
    {
      pass: 'node back Ready',
      plan: () => backReady!,
      charges: ['Recharge lost-1', 'Recharge lost-2'],
      released: [],
    },
    { pass: 'still over the limit', plan: () => stillOver!, charges: [], released: [] },
    { pass: 'a recharged pod finished', plan: () => finished!, charges: [], released: [] },
  ];
  for (const row of table)
    it(`${row.pass}: records ${row.charges.join(', ') || 'no charge change'}, releases ${row.released.join(', ') || 'nothing'}`, () => {
      assert.deepEqual(charges(row.plan()), row.charges);
      assert.deepEqual(released_(row.plan()), row.released);
    });
  it('the Uncharge record names the node, since when, the grace and the reason as its input', () => {
    const d = record(freed!, 'Uncharge', 'lost-1');
    assert.equal(d.loop, 'gate-release');
    assert.equal(d.tenant, 'team-a');
    assert.deepEqual(d.outcome, { result: 'recorded' });
    assert.equal(
      d.reason,
      `no longer charged to tenant team-a's budget: node n2 not Ready since ${new Date(now - 3 * m).toISOString()}, for longer than the tenant's budget.unreadyNodeGrace (2m)`,
    );
    assert.deepEqual(d.inputs, [
      { condition: 'Budget', met: true, value: { freedBy: 'nodeNotReady', node: 'n2' } },
    ]);
    assert.deepEqual(d.policy, {
      commit: policy.commit,
      file: 'tenants/team-a.yaml',
      name: 'team-a',
    });
  });
  it('the Recharge record says the tenant stands above its limit and holds new releases', () => {
    const d = record(backReady!, 'Recharge', 'lost-1');
    assert.equal(
      d.reason,
      "charged again to tenant team-a's budget: node n2 is Ready again; the tenant uses 4 of 3 pods, over its limit: no pod of the tenant is released until it is under it",
    );
    assert.deepEqual(d.inputs, [
      { condition: 'Budget', met: false, value: { pods: { used: 4, limit: 3 }, overLimit: true } },
    ]);
  });
  it('the pod held meanwhile waits for Budget', () => {
    const hold = backReady!.decisions.find((d) => d.target.name === 'later');
    assert.equal(hold?.kind, 'Hold');
    assert.equal(hold?.reason, 'waiting for Budget');
  });
});

describe('a released pod being deleted', () => {
  const [deleting] = passes([
    {
      pods: [released('a', 'n1'), released('going', 'n1').deleting(now - 1000), gated('next')],
      nodes: [up],
      at: now,
    },
  ]);
  it('is recorded once as no longer charged, terminating', () => {
    assert.deepEqual(charges(deleting!), ['Uncharge going']);
    const d = record(deleting!, 'Uncharge', 'going');
    assert.equal(d.reason, "no longer charged to tenant team-a's budget: the pod is being deleted");
    assert.deepEqual(d.inputs, [
      { condition: 'Budget', met: true, value: { freedBy: 'terminating' } },
    ]);
  });
});
