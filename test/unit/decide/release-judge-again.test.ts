// A held pod judged again on a later pass (src/decide/release-judge.ts): when its object,
// its GatePolicy and what its conditions read are what they were, the pass hands on the
// same Hold it made last time (no new verdict, reason or inputs); anything it reads that
// changed is judged anew.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { classifyPods } from '../../../src/decide/release-classify.ts';
import { judgePods, type Judgement } from '../../../src/decide/release-judge.ts';
import { snapshotOf, type NodeLike, type PodLike } from '../../../src/decide/objects.ts';
import type { Policy } from '../../../src/policy/model.ts';
import { aNode } from '../../builders/node.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant, type GatePolicyBuilder } from '../../builders/policy.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const gate = 'team-a.tollgate.io/ready';
const image = 'registry.example/train:1';

function policyOf(gatePolicy: GatePolicyBuilder): Policy {
  return aPolicy().tenant(aTenant('team-a')).gatePolicy(gatePolicy).obj();
}
const imagePolicy = (minNodes = 1) =>
  policyOf(aGatePolicy('ready', 'team-a').conditions({ type: 'ImagePresent', minNodes }));
const heldPod = (name = 'train-0') =>
  aPod(name, 'team-a')
    .gated(gate)
    .image(image)
    .createdAt(now - 60_000)
    .obj();
const nodeWith = (...images: string[]) =>
  aNode('n1')
    .images(...images)
    .obj();

function judge(policy: Policy, pods: PodLike[], nodes: NodeLike[], at = now): Judgement {
  return judgePods(policy, snapshotOf(pods, nodes), classifyPods(policy, pods, new Map()), at);
}
/** A pod held for an image no node has, under a GatePolicy that cancels it 5 minutes after its gate was set. */
function expiringIn5Minutes() {
  const policy = policyOf(
    aGatePolicy('ready', 'team-a')
      .conditions({ type: 'ImagePresent', minNodes: 1 })
      .expiry(5 * 60_000, 'Cancel'),
  );
  return { policy, pod: heldPod(), nodes: [nodeWith('registry.example/other:1')] };
}
const onlyVerdict = (judged: Judgement) => {
  assert.equal(judged.verdicts.length, 1);
  return judged.verdicts[0]!;
};

describe('a held pod judged again', () => {
  it('is held by the same verdict when its object, policy and inputs are unchanged, though a node changed', () => {
    const policy = imagePolicy();
    const pod = heldPod();
    const first = onlyVerdict(judge(policy, [pod], [nodeWith('registry.example/other:1')]));
    const second = onlyVerdict(
      judge(
        policy,
        [pod],
        [nodeWith('registry.example/other:1', 'registry.example/more:2')],
        now + 1_000,
      ),
    );
    assert.equal(second.kind, 'Hold');
    assert.equal(second, first, 'the Hold made last pass, handed on');
    assert.equal(second.inputs, first.inputs);
  });

  it('is a candidate once a node has its image', () => {
    const policy = imagePolicy();
    const pod = heldPod();
    assert.equal(
      onlyVerdict(judge(policy, [pod], [nodeWith('registry.example/other:1')])).kind,
      'Hold',
    );
    const judged = judge(policy, [pod], [nodeWith(image)], now + 1_000);
    assert.deepEqual(judged.verdicts, []);
    assert.equal(judged.candidates.length, 1);
  });

  it('is held anew, with what it now reads, when its inputs changed and it is still held', () => {
    const policy = imagePolicy(2);
    const pod = heldPod();
    const first = onlyVerdict(judge(policy, [pod], [nodeWith('registry.example/other:1')]));
    const second = onlyVerdict(judge(policy, [pod], [nodeWith(image)], now + 1_000));
    assert.notEqual(second, first);
    const value = (v: typeof first) =>
      (v.inputs[0]?.value as { images: { nodes: number }[] }).images[0]?.nodes;
    assert.equal(value(first), 0);
    assert.equal(value(second), 1);
  });

  it('is judged again under a new policy snapshot, even one that reads the same', () => {
    const pod = heldPod();
    const nodes = [nodeWith('registry.example/other:1')];
    const first = onlyVerdict(judge(imagePolicy(), [pod], nodes));
    const second = onlyVerdict(judge(imagePolicy(), [pod], nodes, now + 1_000));
    assert.notEqual(second, first);
    assert.deepEqual(second.inputs, first.inputs);
  });

  it('is judged again when the view hands a new object for it', () => {
    const policy = imagePolicy();
    const nodes = [nodeWith('registry.example/other:1')];
    const first = onlyVerdict(judge(policy, [heldPod()], nodes));
    const second = onlyVerdict(judge(policy, [heldPod()], nodes, now + 1_000));
    assert.notEqual(second, first);
  });

  it('expires on the pass at its expiry, though nothing it reads changed', () => {
    const { policy, pod, nodes } = expiringIn5Minutes();
    const held = judge(policy, [pod], nodes);
    assert.equal(onlyVerdict(held).kind, 'Hold');
    assert.equal(held.wakeups[0], now - 60_000 + 5 * 60_000, 'woken at its expiry');
    assert.equal(onlyVerdict(judge(policy, [pod], nodes, now + 60_000)).kind, 'Hold');
    assert.equal(onlyVerdict(judge(policy, [pod], nodes, now + 4 * 60_000)).kind, 'Cancel');
  });

  it('hands on its wake-up with the Hold it hands on', () => {
    const { policy, pod, nodes } = expiringIn5Minutes();
    const first = judge(policy, [pod], nodes);
    const second = judge(policy, [pod], nodes, now + 1_000);
    assert.equal(onlyVerdict(second), onlyVerdict(first));
    assert.deepEqual(second.wakeups, first.wakeups);
  });

  it('is a candidate when a Schedule window it waits for opens', () => {
    const policy = policyOf(
      aGatePolicy('ready', 'team-a').conditions({
        type: 'Schedule',
        windows: [{ cron: '* 9 * * *', timeZone: 'UTC' }],
      }),
    );
    const pod = heldPod();
    const nodes = [nodeWith()];
    assert.equal(onlyVerdict(judge(policy, [pod], nodes)).kind, 'Hold');
    assert.equal(onlyVerdict(judge(policy, [pod], nodes, now + 30 * 60_000)).kind, 'Hold');
    assert.equal(judge(policy, [pod], nodes, now + 61 * 60_000).candidates.length, 1);
  });
});
