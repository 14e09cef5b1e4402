/**
 * The gate-release loop says, once per pod, when a pod tollgate released stops being
 * charged because its node has not been Ready for the tenant's grace: a Normal Event
 * `BudgetFreed` on that pod naming the node, since when and the grace. In-memory view,
 * dispatcher and audit; a manual clock; the proof on real parts is
 * test/e2e/isolation/unready-node.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { startGateReleaseLoop } from '../../../src/loops/gate-release.ts';
import type { ClusterView } from '../../../src/cluster/types.ts';
import type { Dispatcher } from '../../../src/dispatch/types.ts';
import type { AuditSink } from '../../../src/audit/types.ts';
import { RELEASED_ANNOTATION } from '../../../src/decide/lifecycle.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { aNode } from '../../builders/node.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const gate = 'team-a.tollgate.io/ready';
const policy = aPolicy()
  .tenant(aTenant('team-a').budget({ pods: 2 }).unreadyNodeGrace(120_000))
  .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' }))
  .obj();
const clock = new ManualClock();
const downSince = clock.now() - 180_000;
const released = (name: string, node: string) =>
  aPod(name, 'team-a')
    .uid(`uid-${name}`)
    .annotate(RELEASED_ANNOTATION, gate)
    .boundTo(node)
    .running()
    .obj();
const pods: V1Pod[] = [
  released('lost-1', 'dead'),
  released('lost-2', 'dead'),
  released('fine', 'n1'),
  aPod('next', 'team-a').gated(gate).obj(),
];
const nodes = [aNode('n1').obj(), aNode('dead').notReady(downSince, 'Unknown').obj()];

const view: ClusterView = {
  synced: true,
  whenSynced: async () => undefined,
  pods: () => pods,
  pod: (ns: string, name: string) =>
    pods.find((p) => p.metadata?.namespace === ns && p.metadata?.name === name),
  nodes: () => nodes,
  object: () => undefined,
  lastResourceVersion: () => undefined,
  onChange: () => () => undefined,
} as unknown as ClusterView;
const dispatcher: Dispatcher = {
  enqueue: () => ({
    accepted: true,
    coalesced: false,
    done: Promise.resolve({ result: 'succeeded', resourceVersion: '9' }),
  }),
  whenNotFull: async () => undefined,
  cancel: () => undefined,
  depth: 0,
  close: async () => undefined,
};
/** Runs `count` passes, each settled before the next. */
async function passes(loop: { pass(): Promise<{ settled: Promise<void> }> }, count: number) {
  for (let i = 0; i < count; i++) await (await loop.pass()).settled;
}
const audit: AuditSink = {
  recordIntents: async () => undefined,
  record: () => undefined,
  flush: async () => undefined,
  backlog: 0,
  close: async () => undefined,
};

test('a BudgetFreed Event once per pod no longer charged because its node is not Ready', async () => {
  const events: string[] = [];
  const loop = startGateReleaseLoop({
    view,
    policy: () => policy,
    dispatcher,
    audit,
    clock,
    autoStart: false,
    events: (pod, e) => {
      events.push(`${pod.metadata?.name} ${e.type} ${e.reason}: ${e.message}`);
    },
  });
  await passes(loop, 2);
  await loop.stop();
  const since = new Date(downSince).toISOString();
  assert.deepEqual(
    events.filter((e) => e.includes('BudgetFreed')).sort(),
    ['lost-1', 'lost-2'].map(
      (n) =>
        `${n} Normal BudgetFreed: no longer charged to tenant team-a's budget: node dead not Ready since ${since}, for longer than the tenant's budget.unreadyNodeGrace (2m)`,
    ),
  );
});

test('Uncharge and Recharge reach the audit trail once, with a BudgetCharged Warning and the metrics, when the node comes back Ready over the budget', async () => {
  const recorded: Decision[] = [];
  const events: string[] = [];
  let nodesNow = nodes;
  const backView = { ...view, nodes: () => nodesNow } as unknown as ClusterView;
  const loop = startGateReleaseLoop({
    view: backView,
    policy: () => policy,
    dispatcher,
    audit: { ...audit, record: (records) => void recorded.push(...records) },
    clock,
    autoStart: false,
    events: (pod, e) => {
      events.push(`${pod.metadata?.name} ${e.type} ${e.reason}`);
    },
  });
  await passes(loop, 2);
  nodesNow = [aNode('n1').obj(), aNode('dead').obj()];
  await passes(loop, 2);
  await loop.stop();
  assert.deepEqual(
    recorded
      .filter((d) => d.kind === 'Uncharge' || d.kind === 'Recharge')
      .map((d) => `${d.kind} ${d.target.name}`),
    ['Uncharge lost-1', 'Uncharge lost-2', 'Recharge lost-1', 'Recharge lost-2'],
  );
  assert.deepEqual(events.filter((e) => e.includes('BudgetCharged')).sort(), [
    'lost-1 Warning BudgetCharged',
    'lost-2 Warning BudgetCharged',
  ]);
  const text = await registry.metrics();
  assert.match(text, /tollgate_budget_charge_changes_total\{tenant="team-a",change="Recharge"\} 2/);
  assert.match(text, /tollgate_budget_over_limit_pods\{tenant="team-a"\} 2/);
});
