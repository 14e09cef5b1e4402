/**
 * The gang members whose release tollgate decided with their whole gang, read from
 * decisions or from the audit trail's records at a term's start, kept while the member
 * keeps its gate.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gangReleasesOf, nextGangReleases } from '../../../src/decide/release-gang-memory.ts';
import { aDecision } from '../../builders/decision.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const at = Date.UTC(2026, 10, 29, 7, 0, 0);
const gang = (met: boolean, expected: number) => ({
  group: 'g1',
  expected,
  present: met ? expected : 1,
});

test('which decisions remember a gang release', async (t) => {
  const cases = [
    {
      name: 'a Release of a gang of three, GangComplete met, is remembered',
      decision: aDecision('Release', 'm2')
        .at(at)
        .input('GangComplete', true, gang(true, 3))
        .intent(),
      want: { 'uid-team-a-m2': at },
    },
    {
      name: 'a Release of a gang of one is not (a pod alone needs no gang)',
      decision: aDecision('Release', 'm2')
        .at(at)
        .input('GangComplete', true, gang(true, 1))
        .intent(),
      want: {},
    },
    {
      name: 'a Hold waiting for its gang is not',
      decision: aDecision('Hold', 'm2').at(at).input('GangComplete', false, gang(false, 3)),
      want: {},
    },
    {
      name: 'a Release without GangComplete is not',
      decision: aDecision('Release', 'p').at(at).input('Budget', true, {}).intent(),
      want: {},
    },
  ];
  for (const c of cases)
    await t.test(c.name, () => assert.deepEqual(gangReleasesOf([c.decision.obj()]), c.want));
  await t.test(
    "the earliest of a member's gang releases is kept (intent, then outcome, then a retry)",
    () => {
      const release = (ms: number) =>
        aDecision('Release', 'm2').at(ms).input('GangComplete', true, gang(true, 3)).obj();
      assert.deepEqual(gangReleasesOf([release(at + 5000), release(at), release(at + 60_000)]), {
        'uid-team-a-m2': at,
      });
    },
  );
});

test("the memory keeps only members still in the view with a gate of tollgate's", () => {
  const policy = aPolicy()
    .tenant(aTenant('team-a'))
    .gatePolicy(aGatePolicy('ready', 'team-a'))
    .obj();
  const gate = policy.gatePolicies[0]!.gate;
  const pods = [aPod('straggler', 'team-a').gated(gate).obj(), aPod('released', 'team-a').obj()];
  const next = nextGangReleases(
    policy,
    pods,
    { 'uid-team-a-straggler': at, 'uid-team-a-gone': at },
    { 'uid-team-a-released': at + 1000, 'uid-team-a-straggler': at + 1000 },
  );
  assert.deepEqual(next, { 'uid-team-a-straggler': at });
});
