// A pod held by its budget or by pacing, planned again on a later pass (release-judge.ts,
// release-units.ts, release-admit.ts): when its object, its GatePolicy, its tenant's
// usage and limit, and the pacing reason are what they were, the pass hands on the
// candidate, the release unit and the Hold it made last time (no new inputs, reason or
// verdict); anything it reads that changed is judged anew. A process holding 10,000 pods
// by their budget passes over them again and again (re-checks, the expiry sweep), and
// making each again was about 26 MB of garbage a pass.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { admitUnits } from '../../../src/decide/release-admit.ts';
import { classifyPods } from '../../../src/decide/release-classify.ts';
import { judgePods } from '../../../src/decide/release-judge.ts';
import { RELEASED_ANNOTATION } from '../../../src/decide/lifecycle.ts';
import { snapshotOf, type PodLike } from '../../../src/decide/objects.ts';
import { emptyPlanState } from '../../../src/decide/release-plan.ts';
import { groupReleaseUnits } from '../../../src/decide/release-units.ts';
import type { Verdict } from '../../../src/decide/release-verdict.ts';
import type { Policy } from '../../../src/policy/model.ts';
import { aNode } from '../../builders/node.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant, type TenantBuilder } from '../../builders/policy.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const gate = 'team-a.tollgate.io/ready';

const policyOf = (tenant: TenantBuilder): Policy =>
  aPolicy()
    .tenant(tenant)
    .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' }))
    .obj();
/** Budget 2 pods: two running pods fill it. */
const fullBudget = () => policyOf(aTenant('team-a').budget({ pods: 2 }));
/** No budget, one release a second: the bucket (1) admits one pod a pass, the rest wait. */
const oneASecond = () => policyOf(aTenant('team-a').pacing({ releasesPerSecond: 1 }));

const gated = (name: string, cpu = '100m') =>
  aPod(name, 'team-a')
    .uid(`uid-${name}`)
    .gated(gate)
    .requests({ cpu })
    .createdAt(now - 60_000)
    .obj();
const running = (name: string) =>
  aPod(name, 'team-a')
    .uid(`uid-${name}`)
    .annotate(RELEASED_ANNOTATION, gate)
    .requests({ cpu: '100m' })
    .boundTo('n1')
    .running()
    .obj();

/** The phases of a pass up to admission, over these pods at this instant. */
function pass(policy: Policy, pods: PodLike[], at = now) {
  const classified = classifyPods(policy, pods, new Map());
  const judged = judgePods(policy, snapshotOf(pods, [aNode('n1').obj()]), classified, at);
  const grouped = groupReleaseUnits(judged.candidates, classified);
  const admitted = admitUnits({
    policy,
    units: grouped.units,
    classified,
    state: emptyPlanState,
    now: at,
    rampMs: 10_000,
  });
  return { judged, grouped, admitted };
}
const verdictOf = (p: ReturnType<typeof pass>, name: string): Verdict => {
  const found = p.admitted.verdicts.find((v) => v.pod.metadata?.name === name);
  assert.ok(found, `a verdict for ${name}`);
  return found;
};
const budgetOf = (v: Verdict) =>
  v.inputs.find((i) => i.condition === 'Budget')?.value as { pods: { used: number } };

describe('a pod held by its budget, planned again', () => {
  it('is the same candidate, in the same release unit, held by the same verdict', () => {
    const policy = fullBudget();
    const pods = [running('r1'), running('r2'), gated('w1'), gated('w2')];
    const first = pass(policy, pods);
    const second = pass(policy, pods, now + 1_000);
    assert.equal(second.judged.candidates[0], first.judged.candidates[0], 'the candidate');
    assert.equal(second.grouped.units[0], first.grouped.units[0], 'its unit');
    const held = verdictOf(second, 'w1');
    assert.equal(held.kind, 'Hold');
    assert.equal(held, verdictOf(first, 'w1'), 'the Hold made last pass, handed on');
    assert.equal(verdictOf(second, 'w2'), verdictOf(first, 'w2'));
  });

  it('pods held alike share one Budget input', () => {
    const policy = fullBudget();
    const held = pass(policy, [running('r1'), running('r2'), gated('w1'), gated('w2', '200m')]);
    const [a, b] = [verdictOf(held, 'w1'), verdictOf(held, 'w2')];
    assert.equal(
      a.inputs.find((i) => i.condition === 'Budget'),
      b.inputs.find((i) => i.condition === 'Budget'),
    );
  });

  it('is held anew, with the usage it now reads, when a charged pod went away', () => {
    const policy = policyOf(aTenant('team-a').budget({ pods: 1 }));
    const first = pass(policy, [running('r1'), running('r2'), gated('w1')]);
    const second = pass(policy, [running('r1'), gated('w1')], now + 1_000);
    assert.notEqual(verdictOf(second, 'w1'), verdictOf(first, 'w1'));
    assert.equal(budgetOf(verdictOf(first, 'w1')).pods.used, 2);
    assert.equal(budgetOf(verdictOf(second, 'w1')).pods.used, 1);
  });

  it('is released, not held, once its budget has room', () => {
    const policy = fullBudget();
    const first = pass(policy, [running('r1'), running('r2'), gated('w1')]);
    assert.equal(verdictOf(first, 'w1').kind, 'Hold');
    assert.equal(verdictOf(pass(policy, [running('r1'), gated('w1')]), 'w1').kind, 'Release');
  });

  it('is judged again under a new policy snapshot, even one that reads the same', () => {
    const pods = [running('r1'), running('r2'), gated('w1')];
    const first = pass(fullBudget(), pods);
    const second = pass(fullBudget(), pods, now + 1_000);
    assert.notEqual(second.judged.candidates[0], first.judged.candidates[0]);
    assert.notEqual(verdictOf(second, 'w1'), verdictOf(first, 'w1'));
    assert.deepEqual(verdictOf(second, 'w1').inputs, verdictOf(first, 'w1').inputs);
  });

  it('is judged again when the view hands a new object for it', () => {
    const policy = fullBudget();
    const first = pass(policy, [running('r1'), running('r2'), gated('w1')]);
    const second = pass(policy, [running('r1'), running('r2'), gated('w1')], now + 1_000);
    assert.notEqual(second.judged.candidates[0], first.judged.candidates[0]);
    assert.notEqual(verdictOf(second, 'w1'), verdictOf(first, 'w1'));
  });
});

describe('a pod queued by pacing, planned again', () => {
  it('is held by the same verdict while the same limit holds it', () => {
    const policy = oneASecond();
    const pods = [gated('w1'), gated('w2'), gated('w3')];
    const first = pass(policy, pods);
    const second = pass(policy, pods, now + 100);
    assert.equal(verdictOf(first, 'w1').kind, 'Release');
    const queued = verdictOf(second, 'w2');
    assert.equal(queued.kind, 'Hold');
    assert.equal(queued, verdictOf(first, 'w2'), 'the Hold made last pass, handed on');
    assert.equal(verdictOf(second, 'w3'), verdictOf(first, 'w3'));
  });
});
