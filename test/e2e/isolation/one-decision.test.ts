/**
 * Defect 6 of the fault-isolation issue: one pending decision per pod. Pods expire into
 * Review while tollgate's writes drain slowly (a dispatcher limited to 1 write/s, as a
 * throttled API server would); each pod must be decided once (one Expire, one Review in
 * the audit trail), not again on every pass while its first write is still queued.
 *
 * Run: node --test --test-concurrency=1 test/e2e/isolation/one-decision.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { aPod } from '../../builders/pod.ts';
import { eventually } from '../../support/eventually.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { startWorld, type PolicyState, type World } from './world.ts';

const namespace = 'iso-once';
const gate = 'on.tollgate.io/hold';
const PODS = 8;

const policy: PolicyState = {
  tenants: [{ name: 'on', namespaces: [namespace], gatePrefixes: ['on.tollgate.io/'] }],
  gatePolicies: [
    {
      name: 'on-hold',
      tenant: 'on',
      gate,
      conditions: [
        {
          type: 'ObjectCondition',
          object: { apiVersion: 'v1', kind: 'ConfigMap', name: 'never' },
          field: 'data.ready',
          equals: 'true',
        },
      ],
      expiry: { after: '1s', action: 'Review' },
      recheck: { initial: '200ms', max: '500ms', maxAttempts: 100 },
    },
  ],
};

describe('one pending decision per pod', () => {
  let world: World;

  before(async () => {
    world = await startWorld('iso-once', policy);
    await world.createNamespaces(namespace);
    await world.startTollgate('tollgate-1', { capacity: 1000, concurrency: 1, qps: 1, burst: 1 });
  });

  after(async () => {
    await world?.stop();
  });

  test('pods expiring into Review while writes drain slowly are decided once each', async () => {
    const names = Array.from({ length: PODS }, (_, i) => `once-${i}`);
    await world.createPods(names.map((n) => aPod(n, namespace).gated(gate).obj()));
    const inReview = async (name: string) =>
      (await world.core.readNamespacedPod({ namespace, name })).metadata?.annotations?.[
        'tollgate.io/review'
      ] !== undefined;
    await eventually(
      'every pod in review',
      async () => (await Promise.all(names.map(inReview))).every(Boolean),
      { timeoutMs: 60_000 },
    );
    const counts = await eventually('the audit trail of every Review', async () => {
      const source = await openAuditSource(world.auditUrl, 'tollgate/audit', {
        token: world.git.token,
      });
      try {
        const records = (await readAuditHistory(source)).flatMap((c) => c.records);
        const reviews = records.filter(
          (r) => r.kind === 'Review' && r.outcome.result !== 'pending',
        );
        if (new Set(reviews.map((r) => r.target.name)).size < PODS) return undefined;
        const perPod = new Map<string, number>();
        for (const r of records.filter((r) => r.kind === 'Review' || r.kind === 'Expire'))
          if (r.phase !== 'outcome')
            perPod.set(
              `${r.kind} ${r.target.name}`,
              (perPod.get(`${r.kind} ${r.target.name}`) ?? 0) + 1,
            );
        return perPod;
      } finally {
        source.close();
      }
    });
    const repeated = [...counts].filter(([, n]) => n > 1);
    assert.deepEqual(repeated, [], 'each pod is decided once: one Expire and one Review');
  });
});
