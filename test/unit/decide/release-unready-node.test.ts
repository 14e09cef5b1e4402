/**
 * A released pod stops taking from its tenant's budget when it can no longer run: it is
 * being deleted, or it is bound to a node whose Ready condition has not been True for the
 * tenant's `budget.unreadyNodeGrace` (default 5m; the node lifecycle controller evicts
 * such pods about then, and their replacements must be releasable). A node that failed
 * must not stop its tenant: the next gated pod is released once the grace is over.
 * Time comes from the injected `now` and the node's lastTransitionTime, never the clock.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { emptyPlanState, planReleases } from '../../../src/decide/release-plan.ts';
import { RELEASED_ANNOTATION } from '../../../src/decide/lifecycle.ts';
import { snapshotOf, type NodeLike, type PodLike } from '../../../src/decide/objects.ts';
import { aNode } from '../../builders/node.ts';
import { aPod, type PodBuilder } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const gate = 'team-a.tollgate.io/ready';
const s = 1000;
const m = 60 * s;

/** A pod tollgate released that runs on `node`. */
const released = (node: string): PodBuilder =>
  aPod('running', 'team-a').annotate(RELEASED_ANNOTATION, gate).boundTo(node).running();

const cases: {
  name: string;
  nodes: NodeLike[];
  pod: PodBuilder;
  graceMs?: number;
  next: 'Release' | 'Hold';
  freed?: { nodeNotReady: number; terminating: number };
}[] = [
  {
    name: 'a pod on a Ready node keeps its charge: the next pod waits for budget',
    nodes: [aNode('n1').obj()],
    pod: released('n1'),
    next: 'Hold',
  },
  {
    name: 'a node NotReady for less than the default grace (5m) keeps the charge',
    nodes: [
      aNode('n1')
        .notReady(now - 5 * m + 1)
        .obj(),
    ],
    pod: released('n1'),
    next: 'Hold',
  },
  {
    name: 'a node NotReady for the default grace (5m) frees the budget',
    nodes: [
      aNode('n1')
        .notReady(now - 5 * m)
        .obj(),
    ],
    pod: released('n1'),
    next: 'Release',
    freed: { nodeNotReady: 1, terminating: 0 },
  },
  {
    name: 'a node whose kubelet stopped reporting (Ready Unknown) for 10m frees the budget',
    nodes: [
      aNode('n1')
        .notReady(now - 10 * m, 'Unknown')
        .obj(),
    ],
    pod: released('n1'),
    next: 'Release',
    freed: { nodeNotReady: 1, terminating: 0 },
  },
  {
    name: "the tenant's own grace (30s) applies",
    nodes: [
      aNode('n1')
        .notReady(now - 30 * s, 'Unknown')
        .obj(),
    ],
    pod: released('n1'),
    graceMs: 30 * s,
    next: 'Release',
    freed: { nodeNotReady: 1, terminating: 0 },
  },
  {
    name: 'another node being NotReady changes nothing for a pod on a Ready node',
    nodes: [
      aNode('n1').obj(),
      aNode('n2')
        .notReady(now - 10 * m)
        .obj(),
    ],
    pod: released('n1'),
    next: 'Hold',
  },
  {
    name: 'a pod being deleted frees the budget at once (its replacement may be released)',
    nodes: [aNode('n1').obj()],
    pod: released('n1').deleting(now - s),
    next: 'Release',
    freed: { nodeNotReady: 0, terminating: 1 },
  },
  {
    name: 'a pod that failed takes nothing, as before',
    nodes: [
      aNode('n1')
        .notReady(now - 10 * m)
        .obj(),
    ],
    pod: released('n1').phase('Failed'),
    next: 'Release',
    freed: { nodeNotReady: 0, terminating: 0 },
  },
];

describe('budget of pods on a node that is not ready, or being deleted', () => {
  for (const c of cases)
    it(c.name, () => {
      const tenant = aTenant('team-a').budget({ pods: 1 });
      if (c.graceMs !== undefined) tenant.unreadyNodeGrace(c.graceMs);
      const policy = aPolicy()
        .tenant(tenant)
        .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' }))
        .obj();
      const waiting = aPod('next', 'team-a').gated(gate).obj();
      const plan = planReleases(
        policy,
        snapshotOf([c.pod.obj() as PodLike, waiting], c.nodes),
        emptyPlanState,
        now,
      );
      const verdict = plan.decisions.find((d) => d.target.name === 'next');
      assert.equal(verdict?.kind, c.next);
      assert.deepEqual(
        plan.summary.freed['team-a'],
        c.freed ?? { nodeNotReady: 0, terminating: 0 },
      );
    });
});
