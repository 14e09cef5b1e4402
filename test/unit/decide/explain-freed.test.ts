// `tollgate explain` says why budget freed: pods tollgate released that no longer take from
// the budget because their node has not been Ready for the tenant's grace, or because
// they are being deleted. Injected time only.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { explainPods } from '../../../src/decide/explain.ts';
import { RELEASED_ANNOTATION } from '../../../src/decide/lifecycle.ts';
import { snapshotOf } from '../../../src/decide/objects.ts';
import { formatExplanation } from '../../../src/cli/explain.ts';
import { aNode } from '../../builders/node.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const gate = 'team-a.tollgate.io/ready';
const policy = aPolicy()
  .tenant(aTenant('team-a').budget({ pods: 2 }))
  .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' }))
  .obj();
const released = (name: string, node: string) =>
  aPod(name, 'team-a').annotate(RELEASED_ANNOTATION, gate).boundTo(node).running();

const cases = [
  {
    name: 'a pod on a node not Ready past the grace and one being deleted are named as not charged',
    pods: [released('lost', 'dead'), released('going', 'n1').deleting(now), released('ok', 'n1')],
    json: { nodeNotReady: 1, terminating: 1 },
    line: 'Budget:     pods 1/2 (not charged: 1 on nodes not Ready for 5m or more, 1 being deleted)',
  },
  {
    name: 'a tenant above its limit (pods charged again when their node came back Ready) says so',
    pods: [released('a', 'n1'), released('b', 'n1'), released('c', 'n1')],
    json: { nodeNotReady: 0, terminating: 0 },
    line: 'Budget:     pods 3/2 (over its limit by 1: no pod of the tenant is released until it is under it)',
  },
  {
    name: 'nothing freed, nothing more said',
    pods: [released('ok', 'n1')],
    json: { nodeNotReady: 0, terminating: 0 },
    line: 'Budget:     pods 1/2',
  },
];

describe('explain: budget freed by a node not ready or a pod being deleted', () => {
  for (const c of cases)
    it(c.name, () => {
      const nodes = [
        aNode('n1').obj(),
        aNode('dead')
          .notReady(now - 6 * 60_000, 'Unknown')
          .obj(),
      ];
      const pods = [...c.pods.map((p) => p.obj()), aPod('next', 'team-a').gated(gate).obj()];
      const [explained] = explainPods(policy, snapshotOf(pods, nodes), now);
      assert.deepEqual(explained?.budget.notCharged, c.json);
      const text = formatExplanation(explained!, 'https://git.example/policy.git').split('\n');
      assert.ok(text.includes(c.line), text.join('\n'));
    });
});
