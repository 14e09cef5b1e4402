/**
 * Defect 4 of the fault-isolation issue: a GatePolicy renamed (its gate changed) while
 * pods carry the old gate. Nobody else may remove that gate, so tollgate gives it an
 * explicit, recorded state: Review by default (kept gated, marked for review, a Review
 * record in the audit trail), never charged to the budget; a tenant that sets
 * `orphanedGates: Release` gets those pods released, within its budget.
 *
 * Run: node --test --test-concurrency=1 test/e2e/isolation/orphaned-gates.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { aPod } from '../../builders/pod.ts';
import { eventually } from '../../support/eventually.ts';
import type { Finisher } from '../gate-release/harness.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { startWatchedWorld, stopWatchedWorld, type PolicyState, type World } from './world.ts';
import type { IsolationWatcher } from './watcher.ts';

const namespace = 'iso-orphan';
const oldGate = 'or.tollgate.io/old';
const newGate = 'or.tollgate.io/new';
const budget = 2;
const PODS = 4;

const policy = (gate: string, orphanedGates?: string): PolicyState => ({
  tenants: [
    {
      name: 'or',
      namespaces: [namespace],
      gatePrefixes: ['or.tollgate.io/'],
      budget: { pods: budget },
      ...(orphanedGates ? { orphanedGates } : {}),
    },
  ],
  gatePolicies: [
    {
      name: 'or-ready',
      tenant: 'or',
      gate,
      conditions: [
        { type: 'Budget' },
        {
          type: 'ObjectCondition',
          object: { apiVersion: 'v1', kind: 'ConfigMap', name: 'never' },
          field: 'data.ready',
          equals: 'true',
        },
      ],
    },
  ],
});

describe('gates whose GatePolicy was renamed', () => {
  let world: World;
  let watcher: IsolationWatcher;
  let finisher: Finisher;

  before(async () => {
    ({ world, watcher, finisher } = await startWatchedWorld('iso-orphan', policy(oldGate), {
      namespaces: [namespace],
      budgets: () => ({
        or: { namespaces: [namespace], ourPrefix: 'or.tollgate.io/', pods: budget },
      }),
      finish: [namespace],
    }));
  });

  after(() => stopWatchedWorld({ world, watcher, finisher }));

  const names = Array.from({ length: PODS }, (_, i) => `orphan-${i}`);
  const reviewed = async (name: string) =>
    (await world.core.readNamespacedPod({ namespace, name })).metadata?.annotations?.[
      'tollgate.io/review'
    ] !== undefined;

  test('are marked for review and recorded by default, then released when the tenant says Release', async () => {
    await world.createPods(names.map((n) => aPod(n, namespace).gated(oldGate).obj()));
    await world.pushPolicy(policy(newGate), 'rename the gate of or-ready');
    await eventually(
      'every orphaned pod marked for review',
      async () => (await Promise.all(names.map(reviewed))).every(Boolean),
      { timeoutMs: 30_000 },
    );
    const records = await eventually('a Review record per orphaned pod', async () => {
      const source = await openAuditSource(world.auditUrl, 'tollgate/audit', {
        token: world.git.token,
      });
      try {
        const all = (await readAuditHistory(source)).flatMap((c) => c.records);
        const reviews = all.filter((r) => r.kind === 'Review' && /orphaned/.test(r.reason));
        return new Set(reviews.map((r) => r.target.name)).size === PODS ? reviews : undefined;
      } finally {
        source.close();
      }
    });
    assert.match(records[0]!.reason, /no GatePolicy names gate or\.tollgate\.io\/old/);
    for (const n of names) assert.equal(watcher.releases(namespace, n), 0, `${n} stays gated`);

    await world.pushPolicy(policy(newGate, 'Release'), 'or: release orphaned gates');
    await eventually(
      'every orphaned pod released within the budget',
      async () => names.every((n) => watcher.releases(namespace, n) === 1),
      {
        timeoutMs: 60_000,
        describe: () => names.map((n) => `${n}:[${watcher.gates(namespace, n)}]`).join(' '),
      },
    );
    assert.deepEqual(watcher.violations, []);
    assert.ok((watcher.peak.get('or') ?? 0) <= budget);
  });
});
