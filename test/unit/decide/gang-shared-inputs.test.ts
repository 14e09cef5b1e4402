/**
 * A pass judges GangComplete once per gang and shares the input (and, when it is the
 * policy's only condition besides Budget, the inputs list) among members judged alike
 * (release-judge.ts `gangJudgement`). Held here equal to judging each member alone
 * (`evaluateGangComplete` over its own present members) on generated gangs: mixed size
 * texts, missing labels and sizes, two namespaces, finished members released by tollgate
 * before and after a member was created, and a second pass with the gang memory.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { evaluateGangComplete } from '../../../src/decide/conditions.ts';
import type { ConditionInput, Decision } from '../../../src/decide/decision.ts';
import { RELEASED_ANNOTATION } from '../../../src/decide/lifecycle.ts';
import { snapshotOf, type PodLike } from '../../../src/decide/objects.ts';
import { classifyPods, gangMembersPresent } from '../../../src/decide/release-classify.ts';
import { gangCompleteRemembered } from '../../../src/decide/release-gang-memory.ts';
import { emptyPlanState, planReleases, type PlanState } from '../../../src/decide/release-plan.ts';
import type { GatePolicy, Policy } from '../../../src/policy/model.ts';
import { aNode } from '../../builders/node.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const now = Date.UTC(2026, 11, 2, 8, 0, 0);
const gate = 'team-a.tollgate.io/ready';
const gang = { type: 'GangComplete', groupLabel: 'gang', sizeAnnotation: 'gang-size' } as const;

/** A small deterministic generator (no dependence on Math.random or the date). */
function generator(seed: number): (n: number) => number {
  let s = seed;
  return (n) => {
    s = (s * 1103515245 + 12345) % 2147483648;
    // The high bits: the low bits of this generator repeat with a short period.
    return Math.floor(s / 65536) % n;
  };
}

function world(seed: number): PodLike[] {
  const pick = generator(seed);
  const sizes = ['2', '3', '03', '4', 'x', undefined];
  return Array.from({ length: 60 }, (_, i) => {
    const namespace = pick(2) === 0 ? 'team-a' : 'team-b';
    const pod = aPod(`p${i}`, namespace)
      .uid(`uid-${seed}-${i}`)
      .createdAt(now - 60_000 + pick(3) * 10_000);
    if (pick(8) !== 0) pod.label('gang', `g${pick(4)}`);
    const size = sizes[pick(sizes.length)];
    if (size !== undefined) pod.annotate('gang-size', size);
    if (pick(5) === 0)
      pod
        .annotate(RELEASED_ANNOTATION, gate)
        .boundTo('n1')
        .condition('PodScheduled', 'True', undefined, now - 60_000 + (pick(5) - 2) * 10_000)
        .phase('Succeeded');
    else if (pick(6) === 0) pod.boundTo('n1').running();
    else pod.gated(gate);
    return pod.obj();
  });
}

function policyWith(conditions: GatePolicy['conditions']): Policy {
  return aPolicy()
    .tenant(aTenant('team-a').namespaces('team-a', 'team-b'))
    .gatePolicy(aGatePolicy('ready', 'team-a').conditions(...conditions))
    .obj();
}

/** Each decision's GangComplete input as judging its pod alone gives it. */
function aloneInput(
  policy: Policy,
  pods: readonly PodLike[],
  state: PlanState,
  decision: Decision,
): ConditionInput {
  const classified = classifyPods(policy, pods, new Map());
  const pod = pods.find((p) => p.metadata?.uid === decision.target.uid) as PodLike;
  const judged = evaluateGangComplete(pod, gang, gangMembersPresent(pod, 'gang', classified));
  return gangCompleteRemembered(judged, state.gangReleases?.[decision.target.uid]);
}

function assertAsAlone(policy: Policy, pods: PodLike[], state: PlanState, at: number): number {
  const plan = planReleases(policy, snapshotOf(pods, [aNode('n1').obj()]), state, at);
  let checked = 0;
  for (const d of plan.decisions) {
    const input = d.inputs.find((i) => i.condition === 'GangComplete');
    if (input === undefined) continue;
    assert.deepEqual(input, aloneInput(policy, pods, state, d), `${d.kind} ${d.target.name}`);
    checked += 1;
  }
  return checked;
}

test('a gang member shares its gang GangComplete input only when judging it alone gives the same', async (t) => {
  const policies = {
    'GangComplete alone': policyWith([gang]),
    'Budget and GangComplete': policyWith([{ type: 'Budget' }, gang]),
    'GangComplete and Approved (inputs listed per pod)': policyWith([gang, { type: 'Approved' }]),
  };
  for (const [name, policy] of Object.entries(policies))
    await t.test(name, () => {
      let checked = 0;
      for (let seed = 1; seed <= 40; seed++) {
        const pods = world(seed);
        checked += assertAsAlone(policy, pods, emptyPlanState, now);
        // A second pass with the gang memory: the released members' writes conflicted
        // (settled, not acting), and half the pods are gone from the view.
        const first = planReleases(
          policy,
          snapshotOf(pods, [aNode('n1').obj()]),
          emptyPlanState,
          now,
        );
        const again = { ...first.nextState, acting: new Map() };
        checked += assertAsAlone(
          policy,
          pods.filter((_, i) => i % 2 === 0),
          again,
          now + 60_000,
        );
      }
      assert.ok(checked > 1000, `only ${checked} GangComplete inputs checked`);
    });
});
