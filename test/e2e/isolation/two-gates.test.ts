/**
 * Defect 3 of the fault-isolation issue: a pod carrying two gates tollgate owns (two
 * GatePolicies of its tenant). Each gate is judged by its own policy: the first goes when
 * its Budget fits, the second when its ObjectCondition holds; the pod is charged to the
 * budget once, from the moment it can be scheduled. An independent watcher checks the
 * budget after every event.
 *
 * Run: node --test --test-concurrency=1 test/e2e/isolation/two-gates.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { aPod } from '../../builders/pod.ts';
import { eventually } from '../../support/eventually.ts';
import type { Finisher } from '../gate-release/harness.ts';
import { startWatchedWorld, stopWatchedWorld, type PolicyState, type World } from './world.ts';
import type { IsolationWatcher } from './watcher.ts';

const namespace = 'iso-two';
const first = 'tw.tollgate.io/first';
const second = 'tw.tollgate.io/second';
const budget = 2;
const PODS = 4;

const policy: PolicyState = {
  tenants: [
    {
      name: 'tw',
      namespaces: [namespace],
      gatePrefixes: ['tw.tollgate.io/'],
      budget: { pods: budget },
    },
  ],
  gatePolicies: [
    { name: 'tw-first', tenant: 'tw', gate: first },
    {
      name: 'tw-second',
      tenant: 'tw',
      gate: second,
      conditions: [
        { type: 'Budget' },
        {
          type: 'ObjectCondition',
          object: { apiVersion: 'v1', kind: 'ConfigMap', name: 'second-ok' },
          field: 'data.ready',
          equals: 'true',
        },
      ],
    },
  ],
};

describe('a pod with two gates tollgate owns', () => {
  let world: World;
  let watcher: IsolationWatcher;
  let finisher: Finisher;

  before(async () => {
    ({ world, watcher, finisher } = await startWatchedWorld('iso-two', policy, {
      namespaces: [namespace],
      budgets: () => ({
        tw: { namespaces: [namespace], ourPrefix: 'tw.tollgate.io/', pods: budget },
      }),
      finish: [namespace],
    }));
  });

  after(() => stopWatchedWorld({ world, watcher, finisher }));

  test('each gate is judged by its own policy, and the pod is charged once', async () => {
    const names = Array.from({ length: PODS }, (_, i) => `two-${i}`);
    await world.createPods(
      names.map((n) => aPod(n, namespace).gated(first, second).requests({ cpu: '10m' }).obj()),
    );
    const gatesNow = () => names.map((n) => `${n}:[${watcher.gates(namespace, n)}]`).join(' ');
    await eventually(
      'every first gate removed by its policy, the second still on',
      async () => names.every((n) => watcher.gates(namespace, n)?.join() === second),
      { timeoutMs: 30_000, describe: gatesNow },
    );
    await world.core.createNamespacedConfigMap({
      namespace,
      body: { metadata: { name: 'second-ok' }, data: { ready: 'true' } },
    });
    await eventually(
      'every second gate removed once its condition holds, within budget',
      async () => names.every((n) => watcher.releases(namespace, n) === 1),
      { timeoutMs: 60_000, describe: gatesNow },
    );
    assert.deepEqual(watcher.violations, []);
    assert.ok((watcher.peak.get('tw') ?? 0) <= budget);
  });
});
