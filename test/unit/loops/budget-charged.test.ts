// tollgate_budget_charged_pods: per tenant, the pods its budget charges and why (released
// by tollgate, or never gated and charged by the tenant's choice).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RELEASED_ANNOTATION } from '../../../src/decide/lifecycle.ts';
import { classifyPods } from '../../../src/decide/release-classify.ts';
import { publishSummary } from '../../../src/loops/gate-release-metrics.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const policy = aPolicy()
  .tenant(aTenant('charge'), aTenant('ignore').neverGatedPods('Ignore'))
  .gatePolicy(aGatePolicy('ready', 'charge'), aGatePolicy('ready', 'ignore'))
  .obj();

const series = async (): Promise<string[]> =>
  (await registry.getSingleMetricAsString('tollgate_budget_charged_pods'))
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
    publishSummary(policy, classifyPods(policy, pods, {}).summary);
    assert.deepEqual(await series(), [
      'tollgate_budget_charged_pods{tenant="charge",reason="neverGated"} 2',
      'tollgate_budget_charged_pods{tenant="charge",reason="released"} 1',
      'tollgate_budget_charged_pods{tenant="ignore",reason="neverGated"} 0',
      'tollgate_budget_charged_pods{tenant="ignore",reason="released"} 1',
    ]);
  });

  it('counts, per tenant, the pods that could run charged but are not (never gated, under Ignore)', async () => {
    const pods = [...podsOf('charge'), ...podsOf('ignore')];
    publishSummary(policy, classifyPods(policy, pods, {}).summary);
    const uncharged = (await registry.getSingleMetricAsString('tollgate_budget_uncharged_pods'))
      .split('\n')
      .filter((line) => !line.startsWith('#') && line !== '')
      .sort();
    assert.deepEqual(uncharged, [
      'tollgate_budget_uncharged_pods{tenant="charge"} 0',
      'tollgate_budget_uncharged_pods{tenant="ignore"} 2',
    ]);
  });
});
