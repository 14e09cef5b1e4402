/**
 * A node that fails must not stop its tenant (issue 16; finding (a) of the 30-minute soak:
 * pods released onto a node that went NotReady and never came back were charged to their
 * tenant's budget forever, and 1,124 pods waited behind them).
 *
 * Tenant `nr` (budget 3 pods) has its 3 released pods running on iso-node-2; its next 2
 * pods wait on Budget. iso-node-2's kubelet then dies without a word: no lease renewals.
 * The real node lifecycle controller (on in this file's control plane, with a short
 * monitor grace) marks the node Ready=Unknown; once the tenant's `unreadyNodeGrace` (2s
 * here) has passed since then, those pods no longer take from the budget and the next 2
 * are released, with tollgate_budget_freed_pods{reason="nodeNotReady"} 3, one
 * BudgetFreed Event on each of the 3 pods and one Uncharge audit record each. Tenant `ok`,
 * on iso-node-1, releases its 6 pods within its budget meanwhile. Every wait is on the
 * condition that proves the step, with generous timeouts; an independent watcher holds
 * both tenants to their budgets, reading nodes live when a count is over.
 *
 * Run: node --test --test-concurrency=1 test/e2e/isolation/unready-node.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { EventsV1Api, type V1Pod } from '@kubernetes/client-node';
import { aPod } from '../../builders/pod.ts';
import { auditRecords } from '../../support/audit-records.ts';
import { eventually } from '../../support/eventually.ts';
import { registry } from '../../../src/observe/metrics.ts';
import type { Finisher } from '../gate-release/harness.ts';
import { startWatchedWorld, stopWatchedWorld, type PolicyState, type World } from './world.ts';
import type { IsolationWatcher } from './watcher.ts';

const budget = 3;
const graceMs = 2000;
const doomed = 'iso-node-2';
const healthy = 'iso-node-1';
const ns = { nr: 'iso-nr', ok: 'iso-ok' } as const;
const gateOf = (tenant: string) => `${tenant}.tollgate.io/ready`;

const policy: PolicyState = {
  tenants: [
    {
      name: 'nr',
      namespaces: [ns.nr],
      gatePrefixes: ['nr.tollgate.io/'],
      budget: { pods: budget, unreadyNodeGrace: `${graceMs}ms` },
    },
    {
      name: 'ok',
      namespaces: [ns.ok],
      gatePrefixes: ['ok.tollgate.io/'],
      budget: { pods: budget },
    },
  ],
  gatePolicies: ['nr', 'ok'].map((t) => ({ name: `${t}-ready`, tenant: t, gate: gateOf(t) })),
};

const metric = async (name: string, labels: Record<string, string>) => {
  const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  return values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value;
};

describe('a node that fails while pods tollgate released run on it', () => {
  let world: World;
  let watcher: IsolationWatcher;
  let finisher: Finisher;

  before(async () => {
    ({ world, watcher, finisher } = await startWatchedWorld('iso-node', policy, {
      namespaces: Object.values(ns),
      budgets: () => ({
        nr: {
          namespaces: [ns.nr],
          ourPrefix: 'nr.tollgate.io/',
          pods: budget,
          unreadyNodeGraceMs: graceMs,
        },
        ok: { namespaces: [ns.ok], ourPrefix: 'ok.tollgate.io/', pods: budget },
      }),
      // Only `ok`'s pods finish: `nr`'s keep running, so its budget stays full.
      finish: [ns.ok],
      cluster: {
        // The real node lifecycle controller; a silent node is Unknown after 20 s. Leases
        // are renewed every second, so a healthy node never comes near that on a loaded machine.
        controllerManagerArgs: [
          '--controllers=*',
          '--node-monitor-period=1s',
          '--node-monitor-grace-period=20s',
        ],
        leaseRenewMs: 1000,
      },
    }));
  });

  after(() => stopWatchedWorld({ world, watcher, finisher }));

  const pod = (tenant: 'nr' | 'ok', name: string, node: string): V1Pod =>
    aPod(name, ns[tenant])
      .gated(gateOf(tenant))
      .nodeSelector({ 'kubernetes.io/hostname': node })
      .obj();
  const read = (tenant: 'nr' | 'ok', name: string) =>
    world.core.readNamespacedPod({ namespace: ns[tenant], name });
  const released = async (tenant: 'nr' | 'ok', name: string) =>
    ((await read(tenant, name)).spec?.schedulingGates ?? []).length === 0;
  const nodeReady = async () =>
    (await world.core.readNode({ name: doomed })).status?.conditions?.find(
      (c) => c.type === 'Ready',
    );

  test('the tenant whose pods ran on the node is released again after its grace; the other never stops', async () => {
    const first = ['run-1', 'run-2', 'run-3'];
    const next = ['next-1', 'next-2'];
    await world.createPods(first.map((n) => pod('nr', n, doomed)));
    await eventually(
      `nr's first ${budget} pods running on ${doomed}`,
      async () => {
        for (const n of first) if ((await read('nr', n)).status?.phase !== 'Running') return false;
        return true;
      },
      { timeoutMs: 120_000, intervalMs: 300 },
    );
    await world.createPods(next.map((n) => pod('nr', n, healthy)));
    await eventually(
      "nr's next pods held on Budget",
      async () =>
        ((await metric('tollgate_hold_changes_total', { tenant: 'nr', reason: 'Budget' })) ?? 0) >=
        next.length,
      { timeoutMs: 120_000, intervalMs: 300 },
    );
    for (const n of next)
      assert.equal(await released('nr', n), false, `${n} held while the node is Ready`);

    world.kubelet.silenceNode(doomed);
    const okPods = Array.from({ length: 2 * budget }, (_, i) => `ok-${i + 1}`);
    await world.createPods(okPods.map((n) => pod('ok', n, healthy)));

    const unknown = await eventually(
      `${doomed} marked Ready=Unknown by the node lifecycle controller`,
      async () => {
        const ready = await nodeReady();
        return ready?.status === 'Unknown' ? ready : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 500 },
    );
    await eventually(
      `nr's next pods released once ${doomed} has been not Ready for ${graceMs} ms`,
      async () => {
        for (const n of next) if (!(await released('nr', n))) return false;
        return true;
      },
      { timeoutMs: 120_000, intervalMs: 300 },
    );
    assert.equal(
      await metric('tollgate_budget_freed_pods', { tenant: 'nr', reason: 'nodeNotReady' }),
      first.length,
    );
    // Each pod no longer charged says so, once: a BudgetFreed Event naming its node.
    const freedEvents = await eventually(
      'a BudgetFreed Event on each pod of the failed node',
      async () => {
        const events = (
          await world.kc.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace: ns.nr })
        ).items.filter((e) => e.reason === 'BudgetFreed');
        return first.every((n) => events.some((e) => e.regarding?.name === n)) ? events : false;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    for (const n of first) {
      const mine = freedEvents.filter((e) => e.regarding?.name === n);
      assert.equal(mine.length, 1, n);
      assert.match(mine[0]?.note ?? '', new RegExp(`node ${doomed} not Ready since`));
    }
    // And one Uncharge record each in the audit trail, naming the node (issue 16).
    const uncharged = await eventually(
      'an Uncharge audit record for each pod of the failed node',
      async () => {
        const records = (await auditRecords(world.auditUrl, world.git.token)).filter(
          (r) => r.kind === 'Uncharge' && r.target.namespace === ns.nr,
        );
        return first.every((n) => records.some((r) => r.target.name === n)) ? records : false;
      },
      { timeoutMs: 60_000, intervalMs: 1000 },
    );
    assert.deepEqual(uncharged.map((r) => r.target.name).sort(), first);
    for (const r of uncharged) {
      assert.deepEqual(r.inputs, [
        { condition: 'Budget', met: true, value: { freedBy: 'nodeNotReady', node: doomed } },
      ]);
      assert.match(r.reason, new RegExp(`node ${doomed} not Ready since`));
    }
    // Released after the grace, counted from the condition's change (one clock: this machine's).
    const since = new Date(unknown.lastTransitionTime as unknown as string).getTime();
    assert.ok(Date.now() - since >= graceMs);

    await eventually(
      `all ${okPods.length} of ok's pods released within its budget`,
      async () => {
        for (const n of okPods) if (!(await released('ok', n))) return false;
        return true;
      },
      { timeoutMs: 120_000, intervalMs: 300 },
    );
    for (const n of [...first, ...next]) assert.equal(watcher.releases(ns.nr, n), 1, n);
    for (const n of okPods) assert.equal(watcher.releases(ns.ok, n), 1, n);
    assert.deepEqual(watcher.violations, []);
  });
});
