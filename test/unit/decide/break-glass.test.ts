// Break-glass releases found at term start: a governed gate removed outside tollgate is
// recorded once (a BreakGlass record with what the pod shows: evidence, since when it was
// held, its managedFields), and only such pods: one still gated, one tollgate released
// (its mark), one already recorded, one of another namespace or being deleted are not.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  breakGlassCondition,
  breakGlassDecision,
  findBreakGlass,
} from '../../../src/decide/break-glass.ts';
import { RELEASED_ANNOTATION } from '../../../src/decide/lifecycle.ts';
import type { PodLike } from '../../../src/decide/objects.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const heldAt = now - 3_600_000;
const released = 'tollgate.io/Released';
const gatePolicy = aGatePolicy('ready', 'team-a');
const policy = aPolicy()
  .tenant(aTenant('team-a'))
  .tenant(aTenant('team-b'))
  .gatePolicy(gatePolicy)
  .gatePolicy(aGatePolicy('other', 'team-b'))
  .obj();

const pod = (name: string, namespace = 'team-a') =>
  aPod(name, namespace).uid(`uid-${name}`).resourceVersion('7');
const held = (name: string, namespace = 'team-a') =>
  pod(name, namespace).condition(released, 'False', 'Budget', heldAt);
const withManagers = (built: PodLike): PodLike => ({
  ...built,
  metadata: {
    ...built.metadata,
    managedFields: [
      { manager: 'kubectl-create', operation: 'Update', time: new Date(heldAt - 60_000) },
      { manager: 'tollgate', operation: 'Update', subresource: 'status', time: new Date(heldAt) },
    ],
  } as PodLike['metadata'],
});

describe('which pods are break-glass releases', () => {
  const cases: { name: string; pod: PodLike; evidence?: 'held' | 'opt-in' }[] = [
    { name: 'held, then its gate gone without tollgate', pod: held('a').obj(), evidence: 'held' },
    {
      name: 'opted in by label, no gate, never seen held',
      pod: pod('b').label('tollgate.io/gate-policy', 'ready').obj(),
      evidence: 'opt-in',
    },
    {
      name: "held, with only another controller's gate left",
      pod: held('c').gated('kueue.x-k8s.io/admission').obj(),
      evidence: 'held',
    },
    { name: 'held and still gated', pod: held('d').gated(gatePolicy.gateName).obj() },
    {
      name: 'released by tollgate (its mark)',
      pod: pod('e')
        .annotate(RELEASED_ANNOTATION, '{}')
        .condition(released, 'True', 'GateRemoved')
        .obj(),
    },
    {
      name: 'already recorded',
      pod: pod('f').condition(released, 'True', 'RemovedOutsideTollgate').obj(),
    },
    { name: 'in no tenant namespace', pod: held('g', 'elsewhere').obj() },
    { name: 'being deleted', pod: held('h').deleting(now).obj() },
    {
      name: "opted in to another tenant's policy",
      pod: pod('i').label('tollgate.io/gate-policy', 'other').obj(),
    },
    { name: 'a plain pod of the tenant never gated', pod: pod('j').obj() },
  ];
  for (const c of cases)
    it(`${c.name}: ${c.evidence ?? 'not one'}`, () => {
      const found = findBreakGlass([c.pod], policy);
      assert.deepEqual(
        found.map((f) => f.evidence),
        c.evidence ? [c.evidence] : [],
      );
    });
});

describe('the record of a break-glass release', () => {
  const [finding] = findBreakGlass([withManagers(held('a').obj())], policy);
  const decision = breakGlassDecision(finding!, policy, now);

  it('is a BreakGlass record without a write, for the pod and its tenant', () => {
    assert.deepEqual(
      [decision.kind, decision.loop, decision.outcome.result, decision.tenant, decision.target],
      [
        'BreakGlass',
        'gate-release',
        'recorded',
        'team-a',
        { namespace: 'team-a', name: 'a', uid: 'uid-a', resourceVersion: '7' },
      ],
    );
  });

  it('keeps what the pod shows: evidence, held since, its field managers, when noticed', () => {
    assert.deepEqual(decision.inputs[0]?.value, {
      evidence: 'held',
      heldSince: new Date(heldAt).toISOString(),
      heldReason: 'Budget',
      noticedAt: new Date(now).toISOString(),
      fieldManagers: [
        {
          manager: 'kubectl-create',
          operation: 'Update',
          time: new Date(heldAt - 60_000).toISOString(),
        },
        {
          manager: 'tollgate',
          operation: 'Update',
          time: new Date(heldAt).toISOString(),
          subresource: 'status',
        },
      ],
    });
  });

  it('says the window the removal lies in and where the user is found', () => {
    assert.match(
      decision.reason,
      /^governed gate removed outside tollgate \(break-glass\) between 2026-11-29T07:00:00.000Z and 2026-11-29T08:00:00.000Z: tollgate held it \(Budget since 2026-11-29T07:00:00.000Z\)/,
    );
    assert.match(decision.reason, /API server's audit log for uid uid-a$/);
  });

  it('turns the condition True with reason RemovedOutsideTollgate, so it is recorded once', () => {
    const condition = breakGlassCondition(decision, now);
    assert.deepEqual(
      [condition.type, condition.status, condition.reason],
      [released, 'True', 'RemovedOutsideTollgate'],
    );
    const recorded = pod('a').condition(released, 'True', condition.reason).obj();
    assert.deepEqual(findBreakGlass([recorded], policy), []);
  });
});
