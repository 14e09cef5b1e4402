// The gauge behind the "oldest gated pod" alert: per tenant, when its oldest gated pod got
// its gate, so the alert's age (time() minus it) grows while nothing is released.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { classifyPods } from '../../../src/decide/release-classify.ts';
import { publishSummary } from '../../../src/loops/gate-release-metrics.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const at = (minute: number) => Date.UTC(2026, 10, 29, 8, minute, 0);
const a = aGatePolicy('a', 'team-a');
const b = aGatePolicy('b', 'team-b');
const policy = aPolicy().tenant(aTenant('team-a'), aTenant('team-b')).gatePolicy(a, b).obj();

const series = async (): Promise<string[]> =>
  (await registry.getSingleMetricAsString('tollgate_oldest_gated_pod_timestamp_seconds'))
    .split('\n')
    .filter((line) => !line.startsWith('#') && line !== '');

describe('tollgate_oldest_gated_pod_timestamp_seconds', () => {
  it("is each tenant's oldest gated pod, not its oldest released pod", async () => {
    const pods = [
      aPod('released-long-ago', 'team-a').createdAt(at(0)).boundTo('n1').running().obj(),
      aPod('newer', 'team-a').gated(a.gateName).createdAt(at(20)).obj(),
      aPod('older', 'team-a').gated(a.gateName).createdAt(at(10)).obj(),
    ];
    publishSummary(policy, classifyPods(policy, pods, new Map()).summary);
    assert.deepEqual(await series(), [
      `tollgate_oldest_gated_pod_timestamp_seconds{tenant="team-a"} ${at(10) / 1000}`,
    ]);
  });

  it('drops the series of a tenant once nothing of it is gated', async () => {
    publishSummary(
      policy,
      classifyPods(
        policy,
        [aPod('b1', 'team-b').gated(b.gateName).createdAt(at(5)).obj()],
        new Map(),
      ).summary,
    );
    assert.deepEqual(await series(), [
      `tollgate_oldest_gated_pod_timestamp_seconds{tenant="team-b"} ${at(5) / 1000}`,
    ]);
    publishSummary(policy, classifyPods(policy, [], new Map()).summary);
    assert.deepEqual(await series(), []);
  });
});
