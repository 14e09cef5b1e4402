/**
 * Defect 1 of the fault-isolation issue (view side): a reference nobody can read stalls
 * only the pods that depend on it.
 *
 * Tenant A's policy is changed to reference a kind the API server does not serve
 * (`Widget.example.io/v1`) and a kind tollgate's RBAC may not list (`Secret`), while
 * tenant B keeps releasing its pods at its own pace within its budget. A's pods hold,
 * and the audit Hold says why; A's policy is then reverted and A's pods release without
 * a restart; stopping the stack completes. An ObjectCondition on a cluster-scoped
 * object (a Node), which the docs promise, is judged like any other.
 *
 * Tenant B's load is scaled to ISO_B_PODS (default 60, budget 10) so the file runs in a
 * minute or two on a loaded 2-core machine; the 500 is ISO_B_PODS=500.
 *
 * Run: node --test --test-concurrency=1 test/e2e/isolation/unreadable-reference.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { aPod } from '../../builders/pod.ts';
import { eventually } from '../../support/eventually.ts';
import { Finisher } from '../gate-release/harness.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import type { GateReleaseStack } from '../../support/gate-release-stack.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { startWorld, type GatePolicySpec, type PolicyState, type World } from './world.ts';
import { IsolationWatcher } from './watcher.ts';

const nsA = 'iso-a';
const nsB = 'iso-b';
const gates = {
  ready: 'a.tollgate.io/ready',
  secret: 'a.tollgate.io/secret',
  node: 'a.tollgate.io/node',
  b: 'b.tollgate.io/ready',
};
const budgetB = 10;
const B_PODS = Number(process.env.ISO_B_PODS ?? 60);

const tenants: PolicyState['tenants'] = [
  { name: 'a', namespaces: [nsA], gatePrefixes: ['a.tollgate.io/'] },
  {
    name: 'b',
    namespaces: [nsB],
    gatePrefixes: ['b.tollgate.io/'],
    budget: { pods: budgetB },
    pacing: { maxInFlight: 10, releasesPerSecond: 20, batchSize: 20 },
  },
];
const configMapReady = {
  type: 'ObjectCondition',
  object: { apiVersion: 'v1', kind: 'ConfigMap', name: 'go' },
  field: 'data.ready',
  equals: 'true',
};
const good: GatePolicySpec[] = [
  { name: 'a-ready', tenant: 'a', gate: gates.ready, conditions: [configMapReady] },
  {
    name: 'a-node',
    tenant: 'a',
    gate: gates.node,
    conditions: [
      {
        type: 'ObjectCondition',
        object: { apiVersion: 'v1', kind: 'Node', name: 'iso-node-1' },
        conditionType: 'Ready',
      },
    ],
  },
  { name: 'b-ready', tenant: 'b', gate: gates.b },
];
/**
 * A's held pods are re-checked only after 10 minutes: what releases them after the revert
 * is the pass a new policy starts (as in `tollgate run`), never a re-check timer racing
 * the test's timeout (the ISO_B_PODS=500 variant once waited 47 s for one at load 10).
 */
const slowRecheck = { initial: '10m', max: '10m' };
const broken: GatePolicySpec[] = [
  {
    name: 'a-ready',
    tenant: 'a',
    gate: gates.ready,
    recheck: slowRecheck,
    conditions: [
      {
        type: 'ObjectCondition',
        object: { apiVersion: 'example.io/v1', kind: 'Widget', name: 'w' },
        conditionType: 'Ready',
      },
    ],
  },
  {
    name: 'a-secret',
    tenant: 'a',
    gate: gates.secret,
    recheck: slowRecheck,
    conditions: [
      {
        type: 'ObjectCondition',
        object: { apiVersion: 'v1', kind: 'Secret', name: 'token' },
        field: 'type',
        equals: 'Opaque',
      },
    ],
  },
  ...good.slice(1),
];

describe("one tenant's unreadable reference", () => {
  let world: World;
  let watcher: IsolationWatcher;
  let finisher: Finisher;
  let stack: GateReleaseStack | undefined;

  before(async () => {
    world = await startWorld('iso-unreadable', { tenants, gatePolicies: good });
    await world.createNamespaces(nsA, nsB);
    watcher = new IsolationWatcher(world.kc, () => ({
      a: { namespaces: [nsA], ourPrefix: 'a.tollgate.io/' },
      b: { namespaces: [nsB], ourPrefix: 'b.tollgate.io/', pods: budgetB },
    }));
    await watcher.start();
    finisher = new Finisher(world.kc, [nsA, nsB], 800);
    await finisher.start();
    stack = await world.startTollgate();
  });

  after(async () => {
    await finisher?.stop();
    await watcher?.stop();
    await world?.stop();
  });

  test('an ObjectCondition on a cluster-scoped object (a Node) is judged and releases', async () => {
    await world.createPods([aPod('on-node', nsA).gated(gates.node).obj()]);
    await eventually(
      'the pod waiting on a Ready node released',
      async () => watcher.releases(nsA, 'on-node') === 1,
      { timeoutMs: 30_000 },
    );
  });

  test("holds only tenant A's dependent pods while B releases at its pace; A recovers after a revert; stop completes", async () => {
    await world.pushPolicy({ tenants, gatePolicies: broken }, 'a: reference Widget and Secret');
    await eventually('the broken policy in force', async () =>
      stack!.policies.current()?.gatePolicies.some((g) => g.name === 'a-secret'),
    );
    // The view says, per reference, why it cannot read it (a Hold is recorded when its
    // reason changes, so the pods come once the view knows).
    const widgetRef = { apiVersion: 'example.io/v1', kind: 'Widget', namespace: nsA, name: 'w' };
    const secretRef = { apiVersion: 'v1', kind: 'Secret', namespace: nsA, name: 'token' };
    await eventually(
      'the view explains both unreadable references',
      async () =>
        /does not serve/.test(stack!.view.objectProblem?.(widgetRef) ?? '') &&
        /may not list/.test(stack!.view.objectProblem?.(secretRef) ?? ''),
      {
        describe: () =>
          `${stack!.view.objectProblem?.(widgetRef)} | ${stack!.view.objectProblem?.(secretRef)}`,
      },
    );
    const metrics = await registry.metrics();
    assert.match(metrics, /tollgate_view_unreadable_references\{reason="unserved"\} 1\n/);
    assert.match(metrics, /tollgate_view_unreadable_references\{reason="forbidden"\} 1\n/);
    const aPods = ['widget-0', 'widget-1', 'secret-0', 'secret-1'];
    await world.createPods([
      aPod('widget-0', nsA).gated(gates.ready).obj(),
      aPod('widget-1', nsA).gated(gates.ready).obj(),
      aPod('secret-0', nsA).gated(gates.secret).obj(),
      aPod('secret-1', nsA).gated(gates.secret).obj(),
    ]);
    const bNames = Array.from({ length: B_PODS }, (_, i) => `b-${i}`);
    await world.createPods(
      bNames.map((n) => aPod(n, nsB).gated(gates.b).requests({ cpu: '10m' }).obj()),
    );
    await eventually(
      `all ${B_PODS} of tenant B's pods released`,
      async () => bNames.every((n) => watcher.releases(nsB, n) === 1),
      {
        timeoutMs: 120_000,
        describe: () => `${bNames.filter((n) => watcher.releases(nsB, n) === 1).length} released`,
      },
    );
    for (const n of aPods) assert.equal(watcher.releases(nsA, n), 0, `${n} must still be held`);

    // The audit says why A's pods hold: the reference cannot be read, not "absent".
    const holds = await eventually('Hold records naming the unreadable references', async () => {
      const source = await openAuditSource(world.auditUrl, 'tollgate/audit', {
        token: world.git.token,
      });
      try {
        const records = (await readAuditHistory(source)).flatMap((c) => c.records);
        const why = (name: string) =>
          records
            .filter((r) => r.kind === 'Hold' && r.target.name === name)
            .flatMap((r) => r.inputs)
            .map((i) => JSON.stringify(i.value))
            .find((v) => v.includes('unreadable'));
        const widget = why('widget-0');
        const secret = why('secret-0');
        return widget && secret ? { widget, secret } : undefined;
      } finally {
        source.close();
      }
    });
    assert.match(holds.widget, /does not serve/);
    assert.match(holds.secret, /may not list/);

    // The cluster goes quiet (every B pod finished), so no pod change starts a pass.
    await eventually(
      'every pod tollgate released has finished',
      async () => finisher.finished >= B_PODS + 1,
      { timeoutMs: 120_000, describe: () => `${finisher.finished} finished` },
    );
    // Revert A's policy and provide the ConfigMap: A's pods release, no restart.
    await world.core.createNamespacedConfigMap({
      namespace: nsA,
      body: { metadata: { name: 'go' }, data: { ready: 'true' } },
    });
    await world.pushPolicy(
      {
        tenants,
        gatePolicies: [
          { ...good[0]!, recheck: slowRecheck },
          ...good.slice(1),
          { ...broken[1]!, conditions: [configMapReady] },
        ],
      },
      'a: revert to readable references',
    );
    // The revert keeps the slow re-check: only the pass on the new policy can release them.
    await eventually(
      "tenant A's pods released after the revert",
      async () => aPods.every((n) => watcher.releases(nsA, n) === 1),
      {
        timeoutMs: 60_000,
        describe: () => aPods.map((n) => `${n}:${watcher.releases(nsA, n)}`).join(' '),
      },
    );
    assert.deepEqual(watcher.violations, []);
    assert.ok((watcher.peak.get('b') ?? 0) <= budgetB);

    // Stopping completes (a hang here is the defect; the bound only turns a hang into a failure).
    const stopped = await Promise.race([
      stack!.stop().then(() => 'stopped'),
      new Promise((resolve) => setTimeout(() => resolve('hung'), 20_000).unref()),
    ]);
    stack = undefined;
    assert.equal(stopped, 'stopped');
  });
});
