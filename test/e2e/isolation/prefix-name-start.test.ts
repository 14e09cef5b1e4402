/**
 * Defect 8 of the fault-isolation issue: a tenant prefix that ends in the start of a name
 * (`pt.example.io/team-`) is accepted by the schema and by compile, so the policy for
 * `pt.example.io/team-a` must also be honoured at run time: its pods are released at the
 * tenant's pace, within budget, while a gate of the same domain outside the prefix
 * (`pt.example.io/other`) is never touched.
 *
 * Run: node --test --test-concurrency=1 test/e2e/isolation/prefix-name-start.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { aPod } from '../../builders/pod.ts';
import { eventually } from '../../support/eventually.ts';
import type { Finisher } from '../gate-release/harness.ts';
import { startWatchedWorld, stopWatchedWorld, type PolicyState, type World } from './world.ts';
import type { IsolationWatcher } from './watcher.ts';

const namespace = 'iso-prefix';
const gate = 'pt.example.io/team-a';
const outside = 'pt.example.io/other';
const budget = 2;
const PODS = 6;

const policy: PolicyState = {
  tenants: [
    {
      name: 'pt',
      namespaces: [namespace],
      gatePrefixes: ['pt.example.io/team-'],
      budget: { pods: budget },
    },
  ],
  gatePolicies: [{ name: 'team-a', tenant: 'pt', gate }],
};

describe('a tenant prefix ending in the start of a name', () => {
  let world: World;
  let watcher: IsolationWatcher;
  let finisher: Finisher;

  before(async () => {
    ({ world, watcher, finisher } = await startWatchedWorld('iso-prefix', policy, {
      namespaces: [namespace],
      budgets: () => ({
        pt: { namespaces: [namespace], ourPrefix: gate, pods: budget },
      }),
      finish: [namespace],
    }));
  });

  after(() => stopWatchedWorld({ world, watcher, finisher }));

  test('releases the pods of a gate under that prefix, within budget, and leaves the others alone', async () => {
    const names = Array.from({ length: PODS }, (_, i) => `team-a-${i}`);
    await world.createPods([
      ...names.map((n) => aPod(n, namespace).gated(gate).requests({ cpu: '100m' }).obj()),
      aPod('not-ours', namespace).gated(outside).obj(),
    ]);
    await eventually(
      `all ${PODS} pods under ${gate} released`,
      async () => names.every((n) => watcher.releases(namespace, n) === 1),
      {
        timeoutMs: 60_000,
        describe: () =>
          names.map((n) => `${n}:${watcher.releases(namespace, n)}`).join(' ') +
          ` peak=${watcher.peak.get('pt')}`,
      },
    );
    assert.deepEqual(watcher.gates(namespace, 'not-ours'), [outside]);
    assert.deepEqual(watcher.violations, []);
    assert.ok((watcher.peak.get('pt') ?? 0) <= budget);
  });
});
