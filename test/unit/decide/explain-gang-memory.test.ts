// `tollgate explain` on the straggler of a gang released in part: its siblings were
// released with it, ran and were deleted; its own gate removal did not land. tollgate run
// remembers that its release was decided with its whole gang (the plan's memory, read
// from the audit trail at a term's start) and releases it; explain, given the same
// memory, must say so instead of "waiting for its gang".
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { explainPods } from '../../../src/decide/explain.ts';
import { snapshotOf } from '../../../src/decide/objects.ts';
import { aNode } from '../../builders/node.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const releasedWithGangAt = now - 60_000;
const ready = aGatePolicy('ready', 'team-a').conditions(
  { type: 'Budget' },
  { type: 'GangComplete', groupLabel: 'gang', sizeAnnotation: 'gang-size' },
);
const policy = aPolicy()
  .tenant(aTenant('team-a').budget({ pods: 10 }))
  .gatePolicy(ready)
  .obj();
const straggler = aPod('m2', 'team-a')
  .uid('uid-m2')
  .gated(ready.gateName)
  .label('gang', 'g1')
  .annotate('gang-size', '3')
  .createdAt(now - 120_000)
  .obj();

const explainStraggler = (memory?: Record<string, number>) => {
  const snapshot = snapshotOf([straggler], [aNode('n1').obj()]);
  const found = explainPods(policy, snapshot, now, memory);
  assert.equal(found.length, 1);
  const gang = found[0]!.conditions.find((c) => c.condition === 'GangComplete');
  return { explanation: found[0]!, gang };
};

describe('explain remembers a gang released in part, as tollgate run does', () => {
  it('without the memory the straggler waits for its gang (one of three present)', () => {
    const { explanation, gang } = explainStraggler();
    assert.equal(gang?.met, false);
    assert.equal(explanation.waiting, 'conditions');
  });

  it('with its release decided with its whole gang, GangComplete is met and says since when', () => {
    const { explanation, gang } = explainStraggler({ 'uid-m2': releasedWithGangAt });
    assert.equal(gang?.met, true);
    assert.equal(
      (gang?.value as { releasedWithGangAt?: string }).releasedWithGangAt,
      new Date(releasedWithGangAt).toISOString(),
    );
    assert.equal(explanation.waiting, 'nothing');
  });

  it("another pod's memory changes nothing", () => {
    const { gang } = explainStraggler({ 'uid-other': releasedWithGangAt });
    assert.equal(gang?.met, false);
  });
});
