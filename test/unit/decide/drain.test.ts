// GatePolicy `drain`: a reviewed commit stops admitting and cancels what waits. Every pod
// the policy still gates is cancelled (deleted, one Cancel record each, with the reason),
// whatever its conditions, expiry or review say and even while the policy is suspended;
// pods it already released run on untouched; nothing is released while it is set.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { explainPods } from '../../../src/decide/explain.ts';
import { snapshotOf, type PodLike } from '../../../src/decide/objects.ts';
import { REVIEW_ANNOTATION } from '../../../src/decide/lifecycle.ts';
import { emptyPlanState, planReleases } from '../../../src/decide/release-plan.ts';
import { aNode } from '../../builders/node.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const hourAgo = now - 3_600_000;
const gate = 'team-a.tollgate.io/ready';
const drainReason = 'GatePolicy ready is drained (spec.drain): cancelled while waiting';

const waiting = (name: string) =>
  aPod(name, 'team-a').uid(`uid-${name}`).gated(gate).createdAt(hourAgo);

function passOf(gatePolicy: ReturnType<typeof aGatePolicy>, pods: readonly PodLike[]) {
  const built = aPolicy().tenant(aTenant('team-a')).gatePolicy(gatePolicy);
  const snapshot = snapshotOf([...pods], [aNode('n1').obj()]);
  return { plan: planReleases(built.obj(), snapshot, emptyPlanState, now), snapshot, built };
}

describe('a drained GatePolicy cancels what waits', () => {
  const cases = [
    { name: 'a pod whose conditions hold', policy: aGatePolicy('ready', 'team-a'), pod: waiting },
    {
      name: 'a pod waiting for an Approval',
      policy: aGatePolicy('ready', 'team-a').conditions({ type: 'Approved' }),
      pod: waiting,
    },
    {
      name: 'a pod whose expiry (action Release) is past',
      policy: aGatePolicy('ready', 'team-a')
        .conditions({ type: 'Approved' })
        .expiry(60_000, 'Release'),
      pod: waiting,
    },
    {
      name: 'a pod in review',
      policy: aGatePolicy('ready', 'team-a')
        .conditions({ type: 'Approved' })
        .expiry(60_000, 'Review'),
      pod: (name: string) => waiting(name).annotate(REVIEW_ANNOTATION, '{}'),
    },
    {
      name: 'a pod of a policy also suspended',
      policy: aGatePolicy('ready', 'team-a').suspended(),
      pod: waiting,
    },
  ];
  for (const c of cases)
    it(`${c.name}: Cancel with the drain's reason, one delete`, () => {
      const { plan } = passOf(c.policy.drained(), [c.pod('p').obj()]);
      assert.deepEqual(
        plan.decisions.map((d) => [d.kind, d.reason]),
        [['Cancel', drainReason]],
      );
      assert.deepEqual(
        plan.writes.map((w) => [w.op.type, w.target.name]),
        [['delete', 'p']],
      );
    });

  it('a pod it already released runs on: no decision, no write', () => {
    const released = aPod('done', 'team-a').uid('uid-done').boundTo('n1').running().obj();
    const { plan } = passOf(aGatePolicy('ready', 'team-a').drained(), [released]);
    assert.deepEqual([plan.decisions.length, plan.writes.length], [0, 0]);
  });

  it('another policy of the tenant is not drained', () => {
    const other = aGatePolicy('other', 'team-a');
    const built = aPolicy()
      .tenant(aTenant('team-a'))
      .gatePolicy(aGatePolicy('ready', 'team-a').drained())
      .gatePolicy(other);
    const pods = [waiting('p').obj(), aPod('q', 'team-a').uid('uid-q').gated(other.gateName).obj()];
    const plan = planReleases(
      built.obj(),
      snapshotOf(pods, [aNode('n1').obj()]),
      emptyPlanState,
      now,
    );
    assert.deepEqual(plan.decisions.map((d) => [d.kind, d.target.name]).sort(), [
      ['Cancel', 'p'],
      ['Release', 'q'],
    ]);
  });

  it('explain and queue say it is about to be cancelled', () => {
    const { snapshot, built } = passOf(aGatePolicy('ready', 'team-a').drained(), [
      waiting('p').obj(),
    ]);
    const [explained] = explainPods(built.obj(), snapshot, now);
    assert.deepEqual([explained?.waiting, explained?.estimate.releaseAt], ['cancel', null]);
  });
});
