/**
 * Defect 7 of the fault-isolation issue: two controllers' gates side by side. Pods that
 * carry only another controller's gate (Kueue's `kueue.x-k8s.io/admission`) cannot be
 * scheduled, so they are never charged to the tenant's budget and never touched; pods
 * carrying both gates lose only tollgate's; tollgate's own pods are released at their
 * pace within the budget. An independent watcher checks the budget after every event.
 *
 * Run: node --test --test-concurrency=1 test/e2e/isolation/foreign-gates.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { aPod } from '../../builders/pod.ts';
import { eventually } from '../../support/eventually.ts';
import type { Finisher } from '../gate-release/harness.ts';
import { startWatchedWorld, stopWatchedWorld, type PolicyState, type World } from './world.ts';
import type { IsolationWatcher } from './watcher.ts';

const namespace = 'iso-kueue';
const ours = 'kq.tollgate.io/ready';
const kueue = 'kueue.x-k8s.io/admission';
const budget = 3;

const policy: PolicyState = {
  tenants: [
    {
      name: 'kq',
      namespaces: [namespace],
      gatePrefixes: ['kq.tollgate.io/'],
      budget: { pods: budget },
    },
  ],
  gatePolicies: [{ name: 'kq-ready', tenant: 'kq', gate: ours }],
};

describe("another controller's gates next to tollgate's", () => {
  let world: World;
  let watcher: IsolationWatcher;
  let finisher: Finisher;

  before(async () => {
    ({ world, watcher, finisher } = await startWatchedWorld('iso-kueue', policy, {
      namespaces: [namespace],
      budgets: () => ({
        kq: { namespaces: [namespace], ourPrefix: 'kq.tollgate.io/', pods: budget },
      }),
      finish: [namespace],
      startTollgate: false,
    }));
  });

  after(() => stopWatchedWorld({ world, watcher, finisher }));

  test("pods gated only by Kueue are neither touched nor charged; tollgate's are released within budget", async () => {
    const kueueOnly = Array.from({ length: 2 * budget }, (_, i) => `kueue-only-${i}`);
    const both = ['both-0', 'both-1'];
    const tollgates = Array.from({ length: 6 }, (_, i) => `ours-${i}`);
    await world.createPods(
      kueueOnly.map((n) => aPod(n, namespace).gated(kueue).requests({ cpu: '100m' }).obj()),
    );
    await world.startTollgate();
    await world.createPods([
      ...both.map((n) => aPod(n, namespace).gated(kueue, ours).requests({ cpu: '100m' }).obj()),
      ...tollgates.map((n) => aPod(n, namespace).gated(ours).requests({ cpu: '100m' }).obj()),
    ]);
    await eventually(
      "every pod carrying tollgate's gate released once",
      async () => [...both, ...tollgates].every((n) => watcher.releases(namespace, n) === 1),
      {
        timeoutMs: 60_000,
        describe: () =>
          [...both, ...tollgates].map((n) => `${n}:${watcher.releases(namespace, n)}`).join(' '),
      },
    );
    for (const n of kueueOnly) assert.deepEqual(watcher.gates(namespace, n), [kueue], n);
    for (const n of both) assert.deepEqual(watcher.gates(namespace, n), [kueue], n);
    assert.deepEqual(watcher.violations, []);
    assert.ok((watcher.peak.get('kq') ?? 0) <= budget);
  });
});
