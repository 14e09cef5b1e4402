// tollgate_budget_charged_pods: per tenant, the pods its budget charges and why (released
// by tollgate, or never gated and charged by the tenant's choice); tollgate_budget_freed_pods:
// released pods no longer charged, and why.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RELEASED_ANNOTATION } from '../../../src/decide/lifecycle.ts';
import { classifyPods } from '../../../src/decide/release-classify.ts';
import { publishSummary } from '../../../src/loops/gate-release-metrics.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { nodeReadiness } from '../../../src/decide/unready-nodes.ts';
import { aNode } from '../../builders/node.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const policy = aPolicy()
  .tenant(aTenant('charge'), aTenant('ignore').neverGatedPods('Ignore'))
  .gatePolicy(aGatePolicy('ready', 'charge'), aGatePolicy('ready', 'ignore'))
  .obj();

const series = async (metric = 'tollgate_budget_charged_pods'): Promise<string[]> =>
  (await registry.getSingleMetricAsString(metric))
    .split('\n')
    .filter((line) => !line.startsWith('#') && line !== '')
    .sort();

const podsOf = (namespace: string) => [
  aPod('released', namespace)
    .annotate(RELEASED_ANNOTATION, `${namespace}.tollgate.io/ready`)
    .boundTo('n1')
    .running()
    .obj(),
  aPod('kueue-admitted-1', namespace).boundTo('n1').running().obj(),
  aPod('kueue-admitted-2', namespace).obj(),
  aPod('kueue-waiting', namespace).gated('kueue.x-k8s.io/admission').obj(),
];

describe('tollgate_budget_charged_pods', () => {
  it('counts released pods for every tenant, never-gated pods only where the tenant charges them', async () => {
    const pods = [...podsOf('charge'), ...podsOf('ignore')];
    publishSummary(policy, classifyPods(policy, pods, new Map()).summary);
    assert.deepEqual(await series(), [
      'tollgate_budget_charged_pods{tenant="charge",reason="neverGated"} 2',
      'tollgate_budget_charged_pods{tenant="charge",reason="released"} 1',
      'tollgate_budget_charged_pods{tenant="ignore",reason="neverGated"} 0',
      'tollgate_budget_charged_pods{tenant="ignore",reason="released"} 1',
    ]);
  });

  it('counts, per tenant, the pods that could run charged but are not (never gated, under Ignore)', async () => {
    const pods = [...podsOf('charge'), ...podsOf('ignore')];
    publishSummary(policy, classifyPods(policy, pods, new Map()).summary);
    assert.deepEqual(await series('tollgate_budget_uncharged_pods'), [
      'tollgate_budget_uncharged_pods{tenant="charge"} 0',
      'tollgate_budget_uncharged_pods{tenant="ignore"} 2',
    ]);
  });
});

describe('tollgate_budget_freed_pods', () => {
  it("counts, per tenant, released pods no longer charged: on a node not ready past the tenant's grace, or being deleted", async () => {
    const now = Date.UTC(2026, 10, 29, 8, 0, 0);
    const released = (name: string, node: string) =>
      aPod(name, 'charge')
        .annotate(RELEASED_ANNOTATION, 'charge.tollgate.io/ready')
        .boundTo(node)
        .running();
    const pods = [
      released('on-dead-node', 'dead').obj(),
      released('on-dead-node-2', 'dead').obj(),
      released('deleting', 'n1').deleting(now).obj(),
      released('fine', 'n1').obj(),
    ];
    const nodes = nodeReadiness(
      [
        aNode('n1').obj(),
        aNode('dead')
          .notReady(now - 6 * 60_000, 'Unknown')
          .obj(),
      ],
      now,
    );
    publishSummary(policy, classifyPods(policy, pods, new Map(), nodes).summary);
    assert.deepEqual(await series('tollgate_budget_freed_pods'), [
      'tollgate_budget_freed_pods{tenant="charge",reason="nodeNotReady"} 2',
      'tollgate_budget_freed_pods{tenant="charge",reason="terminating"} 1',
      'tollgate_budget_freed_pods{tenant="ignore",reason="nodeNotReady"} 0',
      'tollgate_budget_freed_pods{tenant="ignore",reason="terminating"} 0',
    ]);
  });
});
