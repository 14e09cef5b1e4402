// GatePolicy `suspend`: a reviewed commit holds every pod the policy gates, with the
// Hold reason Suspended; nothing is released, not even by an expiry whose action is
// Release or Cancel; a Cancel approval still applies; setting it back releases again.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { explainPods } from '../../../src/decide/explain.ts';
import { snapshotOf } from '../../../src/decide/objects.ts';
import { emptyPlanState, planReleases } from '../../../src/decide/release-plan.ts';
import { aNode } from '../../builders/node.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const hourAgo = now - 3_600_000;

function passOf(policy: ReturnType<typeof aGatePolicy>, approveCancel = false) {
  const built = aPolicy().tenant(aTenant('team-a')).gatePolicy(policy);
  if (approveCancel) built.approve('Cancel', 'team-a', 'p');
  const pod = aPod('p', 'team-a').uid('uid-p').gated(policy.gateName).createdAt(hourAgo).obj();
  const snapshot = snapshotOf([pod], [aNode('n1').obj()]);
  return { plan: planReleases(built.obj(), snapshot, emptyPlanState, now), snapshot, built };
}

describe('a suspended GatePolicy holds everything', () => {
  const cases = [
    { name: 'a pod whose conditions hold', policy: aGatePolicy('ready', 'team-a') },
    {
      name: 'a pod whose expiry (action Release) is past',
      policy: aGatePolicy('ready', 'team-a')
        .conditions({ type: 'Approved' })
        .expiry(60_000, 'Release'),
    },
    {
      name: 'a pod whose expiry (action Cancel) is past',
      policy: aGatePolicy('ready', 'team-a')
        .conditions({ type: 'Approved' })
        .expiry(60_000, 'Cancel'),
    },
  ];
  for (const c of cases)
    it(`${c.name}: Hold, reason Suspended, no write`, () => {
      const { plan } = passOf(c.policy.suspended());
      assert.deepEqual(
        plan.decisions.map((d) => [d.kind, d.reason]),
        [['Hold', 'GatePolicy ready is suspended (spec.suspend)']],
      );
      assert.equal(plan.writes.length, 0);
    });

  it('a Cancel approval still cancels', () => {
    const { plan } = passOf(aGatePolicy('ready', 'team-a').suspended(), true);
    assert.deepEqual(
      plan.decisions.map((d) => d.kind),
      ['Cancel'],
    );
  });

  it('the same pod is released once the policy is no longer suspended', () => {
    const { plan } = passOf(aGatePolicy('ready', 'team-a'));
    assert.deepEqual(
      plan.decisions.map((d) => d.kind),
      ['Release'],
    );
  });

  it('explain and queue say it waits because its policy is suspended', () => {
    const { snapshot, built } = passOf(aGatePolicy('ready', 'team-a').suspended());
    const [explained] = explainPods(built.obj(), snapshot, now);
    assert.deepEqual([explained?.waiting, explained?.estimate.releaseAt], ['suspended', null]);
  });
});
