import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  diffPlans,
  formatMarkdown,
  formatText,
  hasDifferences,
} from '../../../src/decide/plan-diff.ts';
import { snapshotOf } from '../../../src/decide/objects.ts';
import type { Policy } from '../../../src/policy/model.ts';
import { aNode } from '../../builders/node.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const gateA = 'team-a.tollgate.io/ready';

function policy(commit: string, pods: number | undefined, expiryMs?: number): Policy {
  // Expiry applies to pods waiting on a condition other than Budget: the node has no images.
  const gp = aGatePolicy('ready', 'team-a').conditions(
    expiryMs === undefined ? { type: 'Budget' } : { type: 'ImagePresent', minNodes: 1 },
  );
  if (expiryMs !== undefined) gp.expiry(expiryMs, 'Review');
  return aPolicy()
    .commit(commit)
    .tenant(aTenant('team-a').budget(pods === undefined ? {} : { pods }))
    .gatePolicy(gp)
    .obj();
}

// Created in reverse name order so the output order must come from sorting, not input.
function cluster(n: number) {
  const pods = Array.from({ length: n }, (_, i) =>
    aPod(`p${String(n - 1 - i).padStart(2, '0')}`, 'team-a')
      .gated(gateA)
      .requests({ cpu: '1' })
      .createdAt(now - 600_000 + (n - 1 - i))
      .obj(),
  );
  return snapshotOf(pods, [aNode('n1').obj()]);
}

test('plan diff', async (t) => {
  await t.test('a budget increase lists exactly the pods newly released, in name order', () => {
    const diff = diffPlans(policy('base', 2), policy('prop', 4), cluster(6), now);
    assert.deepEqual(
      diff.pods.map((c) => [c.pod, c.base?.action, c.proposed?.action]),
      [
        ['team-a/p02', 'Hold', 'Release'],
        ['team-a/p03', 'Hold', 'Release'],
      ],
    );
    assert.deepEqual(diff.pods[0]?.base?.unmet, ['Budget']);
    assert.equal(diff.tenants.length, 1);
    assert.equal(diff.tenants[0]?.budget, 'freed');
    assert.equal(diff.tenants[0]?.releasedProposed, 4);
    assert.equal(hasDifferences(diff), true);
  });

  await t.test('a budget decrease reports the tenant budget as exceeded', () => {
    const diff = diffPlans(policy('base', 4), policy('prop', 1), cluster(6), now);
    assert.equal(diff.tenants[0]?.budget, 'exceeded');
    assert.equal(diff.pods.length, 3);
  });

  await t.test('the same policy under another commit is no difference', () => {
    const diff = diffPlans(policy('base', 3), policy('prop', 3), cluster(6), now);
    assert.equal(hasDifferences(diff), false);
    assert.match(formatText(diff), /No changes/);
  });

  await t.test('a shorter expiry lists the gates that would expire', () => {
    const diff = diffPlans(
      policy('base', 0, 3_600_000),
      policy('prop', 0, 60_000),
      cluster(2),
      now,
    );
    assert.deepEqual(diff.newExpiries, ['team-a/p00', 'team-a/p01']);
    assert.ok(diff.pods.every((c) => c.proposed?.expired === true));
  });

  await t.test('a gate policy that no gated pod falls under is named', () => {
    const proposed = aPolicy()
      .commit('prop')
      .tenant(aTenant('team-a'))
      .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' }))
      .gatePolicy(
        aGatePolicy('nothing', 'team-a')
          .gate('team-a.tollgate.io/never')
          .conditions({ type: 'Budget' }),
      )
      .obj();
    const diff = diffPlans(policy('base', undefined), proposed, cluster(1), now);
    assert.deepEqual(diff.unmatchedPolicies, ['nothing']);
  });

  await t.test('output is byte-identical across runs and input orders', () => {
    const a = diffPlans(policy('base', 2), policy('prop', 4), cluster(6), now);
    const b = diffPlans(policy('base', 2), policy('prop', 4), cluster(6), now);
    assert.equal(formatText(a), formatText(b));
    assert.equal(formatMarkdown(a), formatMarkdown(b));
    assert.equal(JSON.stringify(a), JSON.stringify(b));
    assert.match(
      formatMarkdown(a),
      /\| `team-a\/p02` \| Hold \(waiting on Budget\) \[ready\] \| Release \[ready\] \|/,
    );
  });
});
