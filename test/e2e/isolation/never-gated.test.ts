/**
 * Defect 7 of the fault-isolation issue, the per-tenant choice: whether pods tollgate never
 * gated (here: pods another controller, acting as Kueue, admitted and that now run) count
 * toward a tenant's budget is the tenant's `budget.neverGatedPods`.
 * - `Ignore`: only pods tollgate released (marked `tollgate.io/released` in the same patch
 *   that removed the gate) are charged, so tollgate's pods are released at their pace next
 *   to any number of running pods Kueue admitted.
 * - `Charge` (the default): those running pods fill the budget, so tollgate's pods wait.
 * The metric `tollgate_budget_charged_pods{tenant,reason}` says which pods are charged and
 * why. An independent watcher checks each tenant's budget as that tenant counts it.
 *
 * Run: node --test --test-concurrency=1 test/e2e/isolation/never-gated.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { aPod } from '../../builders/pod.ts';
import { eventually } from '../../support/eventually.ts';
import { registry } from '../../../src/observe/metrics.ts';
import type { Finisher } from '../gate-release/harness.ts';
import { startWatchedWorld, stopWatchedWorld, type PolicyState, type World } from './world.ts';
import type { IsolationWatcher } from './watcher.ts';

const kueue = 'kueue.x-k8s.io/admission';
const budget = 3;
const RELEASED = 'tollgate.io/released';

/**
 * Per tenant: the namespace of tollgate's pods, the one of the pods Kueue admitted and how
 * many of those run. `ch` (Charge) gets exactly a budget's worth: its budget is full, and
 * one release of tollgate's would be an overshoot the watcher sees.
 */
const tenants = {
  ig: {
    queued: 'iso-ng-ig',
    admitted: 'iso-ng-ig-run',
    neverGatedPods: 'Ignore',
    running: 2 * budget,
  },
  ch: {
    queued: 'iso-ng-ch',
    admitted: 'iso-ng-ch-run',
    neverGatedPods: undefined,
    running: budget,
  },
} as const;
const gateOf = (tenant: string) => `${tenant}.tollgate.io/ready`;

const policy: PolicyState = {
  tenants: Object.entries(tenants).map(([name, t]) => ({
    name,
    namespaces: [t.queued, t.admitted],
    gatePrefixes: [`${name}.tollgate.io/`],
    budget: { pods: budget, ...(t.neverGatedPods ? { neverGatedPods: t.neverGatedPods } : {}) },
  })),
  gatePolicies: Object.keys(tenants).map((name) => ({
    name: `${name}-ready`,
    tenant: name,
    gate: gateOf(name),
  })),
};

const charged = async (tenant: string, reason: string): Promise<number | undefined> => {
  const metric = registry.getSingleMetric('tollgate_budget_charged_pods');
  const values = (await metric?.get())?.values ?? [];
  return values.find((v) => v.labels.tenant === tenant && v.labels.reason === reason)?.value;
};

describe('pods tollgate never gated, charged or not by the tenant', () => {
  let world: World;
  let watcher: IsolationWatcher;
  let finisher: Finisher;

  before(async () => {
    const all = Object.values(tenants).flatMap((t) => [t.queued, t.admitted]);
    ({ world, watcher, finisher } = await startWatchedWorld('iso-never', policy, {
      namespaces: all,
      budgets: () =>
        Object.fromEntries(
          Object.entries(tenants).map(([name, t]) => [
            name,
            {
              namespaces: [t.queued, t.admitted],
              ourPrefix: `${name}.tollgate.io/`,
              pods: budget,
              chargesNeverGated: t.neverGatedPods !== 'Ignore',
            },
          ]),
        ),
      // Only tollgate's pods finish; the pods Kueue admitted keep running.
      finish: Object.values(tenants).map((t) => t.queued),
      startTollgate: false,
    }));
  });

  after(() => stopWatchedWorld({ world, watcher, finisher }));

  /** Creates pods gated by Kueue, then removes Kueue's gate as Kueue would, and waits until they run. */
  const admitByKueue = async (namespace: string, names: readonly string[]) => {
    await world.createPods(names.map((n) => aPod(n, namespace).gated(kueue).obj()));
    const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
    for (const name of names) {
      watcher.admittedByOther(namespace, name);
      await world.core.patchNamespacedPod(
        { namespace, name, body: [{ op: 'remove', path: '/spec/schedulingGates/0' }] },
        jsonPatch,
      );
    }
    await eventually(`${namespace}: the pods Kueue admitted run`, async () => {
      const pods = await world.core.listNamespacedPod({ namespace });
      return pods.items.every((p) => p.status?.phase === 'Running') || undefined;
    });
  };

  test('Ignore releases at its pace next to running pods Kueue admitted; Charge (default) counts them', async () => {
    const kueueRun = (t: { running: number }) =>
      Array.from({ length: t.running }, (_, i) => `kueue-${i}`);
    for (const t of Object.values(tenants)) await admitByKueue(t.admitted, kueueRun(t));
    await world.startTollgate();
    const ours = Array.from({ length: 6 }, (_, i) => `ours-${i}`);
    for (const [name, t] of Object.entries(tenants))
      await world.createPods(
        // ours-0 has annotations of its own: the mark is added next to them.
        ours.map((n, i) => {
          const pod = aPod(n, t.queued).gated(gateOf(name));
          return (i === 0 ? pod.annotate('team.example/owner', 'batch') : pod).obj();
        }),
      );

    const ig = tenants.ig.queued;
    await eventually(
      "Ignore: every one of tollgate's pods released once",
      async () => ours.every((n) => watcher.releases(ig, n) === 1),
      {
        timeoutMs: 60_000,
        describe: () => ours.map((n) => `${n}:${watcher.releases(ig, n)}`).join(' '),
      },
    );
    await eventually(
      'Charge: the running pods Kueue admitted are charged as never gated',
      async () => ((await charged('ch', 'neverGated')) === budget ? true : undefined),
    );
    for (const n of ours)
      assert.deepEqual(watcher.gates(tenants.ch.queued, n), [gateOf('ch')], `ch ${n} still held`);
    assert.equal(await charged('ig', 'neverGated'), 0);

    for (const n of ours) {
      const pod = await world.core.readNamespacedPod({ namespace: ig, name: n });
      assert.equal(pod.metadata?.annotations?.[RELEASED], gateOf('ig'), `${n} marked released`);
      if (n === 'ours-0') assert.equal(pod.metadata?.annotations?.['team.example/owner'], 'batch');
    }
    for (const t of Object.values(tenants))
      for (const n of kueueRun(t)) {
        const pod = await world.core.readNamespacedPod({ namespace: t.admitted, name: n });
        assert.equal(pod.metadata?.annotations?.[RELEASED], undefined, `${n} never marked`);
      }
    assert.deepEqual(watcher.violations, []);
    for (const name of Object.keys(tenants)) assert.ok((watcher.peak.get(name) ?? 0) <= budget);
  });
});
