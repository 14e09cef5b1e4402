import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCheckpoint, serializeCheckpoint } from '../../../src/audit/checkpoint.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import {
  boundCarried,
  carriedFromRecords,
  carriedInForce,
  noCarried,
  type Carried,
  type CarriedBlock,
  type CarriedRecordLike,
} from '../../../src/decide/release-carried.ts';
import { aDecision, type DecisionBuilder } from '../../builders/decision.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const gate = 'team-a.tollgate.io/ready';
/** The policy in force: team-a's pods gated by `gate`. */
const policyAt = (commit?: string) => {
  const builder = aPolicy()
    .tenant(aTenant('team-a').budget({ pods: 10 }))
    .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' }));
  return (commit === undefined ? builder : builder.commit(commit)).obj();
};
const policy = policyAt();

/** A decision on pod `name` at resourceVersion '5' under the policy in force, as the trail files it. */
function on(builder: DecisionBuilder): CarriedRecordLike {
  const decision: Decision = builder.policyCommit(policy.commit).obj();
  const phase =
    decision.outcome.result === 'pending'
      ? 'intent'
      : decision.outcome.result === 'recorded'
        ? 'record'
        : 'outcome';
  return { ...decision, target: { ...decision.target, resourceVersion: '5' }, phase };
}

const blockedAt = (name: string, at: number) =>
  on(aDecision('Blocked', name).id(`gate-release:Blocked:${name}:${at}`).at(at).recorded());

/** A checkpoint's carried Blocked state of pod `name`, Blocked at `at`. */
function carriedBlock(name: string, at: number): CarriedBlock {
  const { id, target, policy: ref, reason } = blockedAt(name, at);
  return { id, at, target, policy: { commit: ref.commit }, reason };
}

const uids = (carried: Carried) => carried.blocked.map((block) => block.target.uid).sort();

test('the carried state after a checkpoint: its Blocked states, superseded or added to by the records after it', async (t) => {
  const cases: {
    name: string;
    before: Carried;
    /** Newest commit first, as a term start reads them. */
    records: CarriedRecordLike[];
    blocked: string[];
  }[] = [
    {
      name: 'a Blocked state of the checkpoint, nothing after it: still Blocked',
      before: { blocked: [carriedBlock('a', 10)], gangReleases: {} },
      records: [on(aDecision('Hold', 'b').at(20).recorded())],
      blocked: ['uid-team-a-a'],
    },
    {
      name: 'decided again after the checkpoint: no longer Blocked',
      before: { blocked: [carriedBlock('a', 10)], gangReleases: {} },
      records: [on(aDecision('Release', 'a').at(20).intent())],
      blocked: [],
    },
    {
      name: 'an outcome after the checkpoint does not lift it (it closes an earlier intent)',
      before: { blocked: [carriedBlock('a', 10)], gangReleases: {} },
      records: [
        on(aDecision('Release', 'a').at(20).outcome({ result: 'unknown', message: 'pod gone' })),
      ],
      blocked: ['uid-team-a-a'],
    },
    {
      name: 'a decision committed after the checkpoint but decided before the block does not lift it',
      before: { blocked: [carriedBlock('a', 10)], gangReleases: {} },
      records: [on(aDecision('Hold', 'a').at(5).recorded())],
      blocked: ['uid-team-a-a'],
    },
    {
      name: 'a pod Blocked after the checkpoint is added',
      before: { blocked: [carriedBlock('a', 10)], gangReleases: {} },
      records: [blockedAt('b', 20)],
      blocked: ['uid-team-a-a', 'uid-team-a-b'],
    },
    {
      name: 'no checkpoint: the records alone',
      before: noCarried,
      records: [blockedAt('b', 20), on(aDecision('Release', 'b').at(10).intent())],
      blocked: ['uid-team-a-b'],
    },
  ];
  for (const c of cases)
    await t.test(c.name, () =>
      assert.deepEqual(uids(carriedFromRecords(c.records, c.before)), c.blocked),
    );
});

test('gang memory after a checkpoint: the earliest whole-gang release of each member', () => {
  const wholeGang = (name: string, at: number) =>
    on(aDecision('Release', name).at(at).input('GangComplete', true, { expected: 2 }).intent());
  const carried = carriedFromRecords([wholeGang('m1', 30), wholeGang('m2', 30)], {
    blocked: [],
    gangReleases: { 'uid-team-a-m1': 10 },
  });
  assert.deepEqual(carried.gangReleases, { 'uid-team-a-m1': 10, 'uid-team-a-m2': 30 });
});

test('a checkpoint carries only what the loop would still hold the pod by', async (t) => {
  const carried: Carried = {
    blocked: [carriedBlock('a', 10)],
    gangReleases: { 'uid-team-a-a': 10 },
  };
  const gated = (rv: string) => aPod('a', 'team-a').gated(gate).resourceVersion(rv).obj();
  const cases = [
    {
      name: 'the pod unchanged under the same policy: kept',
      pods: [gated('5')],
      policy,
      kept: true,
    },
    { name: 'the pod gone: dropped', pods: [], policy, kept: false },
    { name: 'the pod changed: dropped', pods: [gated('6')], policy, kept: false },
    {
      name: 'a new policy commit: dropped',
      pods: [gated('5')],
      policy: policyAt('b'.repeat(40)),
      kept: false,
    },
  ];
  for (const c of cases)
    await t.test(c.name, () =>
      assert.equal(carriedInForce(carried, c.pods, c.policy).blocked.length, c.kept ? 1 : 0),
    );
  await t.test('gang memory: kept while the pod keeps its gate, dropped once it has none', () => {
    assert.deepEqual(carriedInForce(carried, [gated('9')], policy).gangReleases, {
      'uid-team-a-a': 10,
    });
    const released = aPod('a', 'team-a').resourceVersion('9').obj();
    assert.deepEqual(carriedInForce(carried, [released], policy).gangReleases, {});
  });
});

test('the carried state is capped, the newest kept', () => {
  const carried: Carried = {
    blocked: [carriedBlock('a', 10), carriedBlock('b', 30), carriedBlock('c', 20)],
    gangReleases: { x: 1, y: 3, z: 2 },
  };
  const bounded = boundCarried(carried, 2);
  assert.deepEqual(uids(bounded), ['uid-team-a-b', 'uid-team-a-c']);
  assert.deepEqual(bounded.gangReleases, { y: 3, z: 2 });
});

test('a checkpoint reads back the carried state it was written with; one without it reads without; a malformed one is named', () => {
  const carried: Carried = { blocked: [carriedBlock('a', 10)], gangReleases: { m: 5 } };
  const file = 'audit/prod/x.checkpoint.jsonl';
  assert.deepEqual(
    parseCheckpoint(serializeCheckpoint('prod', [], carried), file).carried,
    carried,
  );
  assert.equal(parseCheckpoint(serializeCheckpoint('prod', []), file).carried, undefined);
  const header = { v: 1, kind: 'tollgate-open-intents', cluster: 'prod', open: 0 };
  const malformed = `${JSON.stringify({ ...header, carried: { blocked: [{ id: 'x' }], gangReleases: {} } })}\n`;
  assert.throws(
    () => parseCheckpoint(malformed, file),
    /carried\.blocked\[0\]: not a Blocked state/,
  );
});
