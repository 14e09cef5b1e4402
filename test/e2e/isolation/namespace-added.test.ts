/**
 * Defect 2 of the fault-isolation issue: adding a namespace to a tenant whose pods already
 * run there. The same policy commit adds the namespace and lifts the condition that held
 * the tenant's gated pods; no pass may plan before the new namespace's pods are listed
 * (the catch-up barrier), or it would release a full budget next to the running pods it
 * has not seen. tollgate's view is scoped to the tenants' namespaces as `tollgate run`
 * scopes it, and the relist the new namespace starts is held back (held-lists.ts) for
 * longer than a pass waits for the view (`syncWaitMs`, 30 s in `tollgate run`, 300 ms
 * here): the pass is tried again and again, and every try must wait for that relist, not
 * only the first. An independent watcher, which counts both namespaces from the start,
 * sees every overshoot; once the relist is through, freeing one slot releases exactly
 * one pod.
 *
 * Run: node --test --test-concurrency=1 test/e2e/isolation/namespace-added.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { aPod } from '../../builders/pod.ts';
import { eventually } from '../../support/eventually.ts';
import type { Finisher } from '../gate-release/harness.ts';
import type { GateReleaseStack } from '../../support/gate-release-stack.ts';
import { startWatchedWorld, stopWatchedWorld, type PolicyState, type World } from './world.ts';
import type { IsolationWatcher } from './watcher.ts';
import { heldPodLists } from './held-lists.ts';

const queued = 'iso-add-queued';
const added = 'iso-add-running';
const gate = 'ad.tollgate.io/ready';
const budget = 3;

const policy = (namespaces: string[], held: boolean): PolicyState => ({
  tenants: [
    { name: 'ad', namespaces, gatePrefixes: ['ad.tollgate.io/'], budget: { pods: budget } },
  ],
  gatePolicies: [
    {
      name: 'ad-ready',
      tenant: 'ad',
      gate,
      conditions: held
        ? [
            { type: 'Budget' },
            {
              type: 'ObjectCondition',
              object: { apiVersion: 'v1', kind: 'ConfigMap', name: 'never' },
              field: 'data.ready',
              equals: 'true',
            },
          ]
        : [{ type: 'Budget' }],
    },
  ],
});

describe('a namespace added to a tenant with running pods there', () => {
  let world: World;
  let watcher: IsolationWatcher;
  let finisher: Finisher;
  let tollgate: GateReleaseStack;
  const lists = heldPodLists();

  before(async () => {
    ({ world, watcher, finisher } = await startWatchedWorld('iso-add', policy([queued], true), {
      namespaces: [queued, added],
      budgets: () => ({
        ad: { namespaces: [queued, added], ourPrefix: 'ad.tollgate.io/', pods: budget },
      }),
      finish: [],
      startTollgate: false,
    }));
    tollgate = await world.startTollgate('tollgate-1', undefined, undefined, {
      scopeNamespaces: true,
      syncWaitMs: 300,
      wrapSource: (target, source) => lists.wrap(target, source),
    });
  });

  after(() => stopWatchedWorld({ world, watcher, finisher }));

  test('the pass of the new policy plans only once the new namespace is listed: no overshoot', async () => {
    const running = Array.from({ length: budget }, (_, i) => `running-${i}`);
    await world.createPods(running.map((n) => aPod(n, added).obj()));
    await eventually(`${added}: a budget's worth of pods runs`, async () => {
      const pods = await world.core.listNamespacedPod({ namespace: added });
      return pods.items.filter((p) => p.status?.phase === 'Running').length === budget;
    });
    const ours = Array.from({ length: 2 * budget }, (_, i) => `ours-${i}`);
    await world.createPods(ours.map((n) => aPod(n, queued).gated(gate).obj()));
    await eventually('tollgate holds its pods', async () =>
      ours.every((n) => watcher.gates(queued, n)?.join() === gate),
    );

    lists.hold();
    const commit = await world.pushPolicy(
      policy([queued, added], false),
      'add the namespace, lift the hold',
    );
    await eventually('the new policy is in force', async () => {
      return tollgate.policies.current()?.commit === commit;
    });
    void tollgate.loop.pass();
    await eventually('the relist for the new namespace is under way', async () => lists.waited > 0);
    // Passes keep being tried while the relist is held. How long it is held only bounds how
    // soon a pass that does not wait for it would show its overshoot; nothing is asserted on time.
    await eventually(
      'a pass that did not wait for the relist released (or the hold ends)',
      async () => ours.some((n) => watcher.releases(queued, n) > 0),
      { timeoutMs: 5_000 },
    ).catch(() => undefined);
    assert.deepEqual(watcher.violations, [], 'nothing released into the full budget');
    lists.release();
    // One slot frees: exactly one of tollgate's pods may go, and only after that.
    await world.core.patchNamespacedPodStatus(
      { namespace: added, name: 'running-0', body: { status: { phase: 'Succeeded' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const released = () => ours.filter((n) => watcher.releases(queued, n) === 1);
    await eventually('one pod released into the freed slot', async () => released().length >= 1, {
      timeoutMs: 30_000,
    });
    assert.deepEqual(watcher.violations, []);
    assert.equal(released().length, 1);
    assert.ok((watcher.peak.get('ad') ?? 0) <= budget);
  });
});
