// A pod queued behind more pods than its tenant's budget has room for waits for the
// budget, whatever limit stopped this pass first (soak seed 3, 30 min: 700 eval pods of a
// tenant with a budget of 9 pods and 8 releases a second were held "queued: tenant release
// rate 8/s" on a pass that began with the budget empty and "waiting for Budget" on the
// next, each flip an Event and a tollgate.io/Released condition write per pod; explain,
// asked between the two, said pacing while the pod's condition said Budget).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RELEASED_ANNOTATION } from '../../../src/decide/lifecycle.ts';
import { snapshotOf } from '../../../src/decide/objects.ts';
import { emptyPlanState, planReleases, type Plan } from '../../../src/decide/release-plan.ts';
import { explainPods } from '../../../src/decide/explain.ts';
import { aNode } from '../../builders/node.ts';
import { aPod, type PodBuilder } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const gate = 'team-a.tollgate.io/ready';
/** Budget 4 pods, 2 releases a second (a bucket of 2): the bucket empties before the budget. */
const policy = aPolicy()
  .tenant(aTenant('team-a').budget({ pods: 4 }).pacing({ releasesPerSecond: 2 }))
  .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' }))
  .obj();
const queued = (n: number): PodBuilder[] =>
  Array.from({ length: n }, (_, i) =>
    aPod(`q${i + 1}`, 'team-a')
      .uid(`uid-q${i + 1}`)
      .gated(gate)
      .createdAt(now - 60_000 + i),
  );
const running = (n: number): PodBuilder[] =>
  Array.from({ length: n }, (_, i) =>
    aPod(`r${i + 1}`, 'team-a')
      .annotate(RELEASED_ANNOTATION, gate)
      .boundTo('n1')
      .running(),
  );
const snapshot = (pods: PodBuilder[]) =>
  snapshotOf(
    pods.map((p) => p.obj()),
    [aNode('n1').obj()],
  );
const reasonOf = (plan: Plan, name: string): string => {
  const change = plan.holdChanges.find((c) => c.target.name === name);
  if (change) return change.reasonKey;
  const released = plan.decisions.some((d) => d.target.name === name && d.kind === 'Release');
  return released ? 'Release' : 'unchanged';
};

describe('the hold reason of a pod queued beyond its budget', () => {
  // Pass 1: nothing runs; the bucket (2) admits q1 and q2; q3 and q4 fit the budget after
  // them and wait for tokens; q5.. cannot fit until pods finish.
  const first = planReleases(policy, snapshot(queued(10)), emptyPlanState, now);
  // Pass 2: the budget is full (4 run), q3.. still queued.
  const second = planReleases(
    policy,
    snapshot([...queued(10).slice(2), ...running(4)]),
    first.nextState,
    now + 1000,
  );
  const table: { pod: string; first: string; second: string }[] = [
    { pod: 'q1', first: 'Release', second: 'gone' },
    { pod: 'q3', first: 'Pacing', second: 'Budget' },
    { pod: 'q4', first: 'Pacing', second: 'Budget' },
    { pod: 'q5', first: 'Budget', second: 'unchanged' },
    { pod: 'q10', first: 'Budget', second: 'unchanged' },
  ];
  for (const row of table)
    it(`${row.pod} is ${row.first} on a pass with budget room, then ${row.second} once the budget is full`, () => {
      assert.equal(reasonOf(first, row.pod), row.first);
      if (row.second !== 'gone') assert.equal(reasonOf(second, row.pod), row.second);
    });
  it('no Event or condition write for the pods beyond the budget when the limit that stopped the pass changes', () => {
    const beyond = second.holdChanges.filter((c) => Number(c.target.name.slice(1)) >= 5);
    assert.deepEqual(
      beyond.map((c) => `${c.target.name} ${c.reasonKey}`),
      [],
    );
  });
  it('explain, asked on the first snapshot, says the same: pacing for q3, budget for q10', () => {
    const explained = explainPods(policy, snapshot(queued(10)), now);
    const waiting = (pod: string) => explained.find((e) => e.pod === `team-a/${pod}`)?.waiting;
    assert.deepEqual(['q1', 'q3', 'q5', 'q10'].map(waiting), [
      'nothing',
      'pacing',
      'budget',
      'budget',
    ]);
  });
});
