/**
 * The synthetic world both planning benches plan over (bench/plan.ts, bench/plan-allocated.ts):
 * one tenant over two namespaces, `count` gated pods of 100m CPU, in gangs of 8 (two gangs'
 * worth of pods share a label, so half of each gang is missing: GangComplete judges every
 * pod) or under a plain Budget condition, on one node, at a fixed instant.
 */
import { snapshotOf } from '../src/decide/objects.ts';
import type { Policy } from '../src/policy/model.ts';
import { aNode } from '../test/builders/node.ts';
import { aPod, type PodBuilder } from '../test/builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../test/builders/policy.ts';

export const planNow = Date.UTC(2030, 0, 1);
const gate = 'batch.tollgate.io/ready';
const gangOf = 8;

export function planPolicy(gangs: boolean): Policy {
  return aPolicy()
    .tenant(aTenant('batch').namespaces('batch-a', 'batch-b'))
    .gatePolicy(
      aGatePolicy('ready', 'batch').conditions(
        gangs
          ? { type: 'GangComplete', groupLabel: 'gang', sizeAnnotation: 'gang-size' }
          : { type: 'Budget' },
      ),
    )
    .obj();
}

export function planSnapshot(count: number, gangs: boolean) {
  const objs = Array.from({ length: count }, (_, i) => {
    const pod = aPod(`p${i}`, i % 2 === 0 ? 'batch-a' : 'batch-b')
      .uid(`uid-${i}`)
      .gated(gate)
      .requests({ cpu: '100m' })
      .createdAt(planNow - 60_000 + i);
    if (gangs)
      pod.label('gang', `g${Math.floor(i / (2 * gangOf))}`).annotate('gang-size', String(gangOf));
    return pod.obj();
  });
  return snapshotOf(objs, [aNode('n1').obj()]);
}

/**
 * A steady backlog, as `tollgate run` plans it pass after pass: `count` held pods of one
 * tenant under ImagePresent, each waiting for an image of its own that no node has, in
 * the form the view hands them (parsed from the API's JSON: text timestamps), on 10 nodes
 * of 20 images each. `nodesAt(pass)` replaces one node's object each pass (a kubelet's
 * status update), so what the pods read is built again while what they read stays equal.
 */
export function steadyPolicy(): Policy {
  return aPolicy()
    .tenant(aTenant('batch').namespaces('batch-a', 'batch-b'))
    .gatePolicy(
      aGatePolicy('ready', 'batch').conditions(
        { type: 'Budget' },
        { type: 'ImagePresent', minNodes: 1 },
      ),
    )
    .obj();
}

export function steadyWorld(count: number) {
  const pods = viewedBacklog(count, (pod, i) => pod.image(`registry.example/wait-${i}:1`));
  const baseImages = (n: number) =>
    Array.from({ length: 20 }, (_, k) => `registry.example/base-${n}-${k}:1`);
  const nodes = Array.from({ length: 10 }, (_, n) =>
    asViewed(
      aNode(`n${n}`)
        .images(...baseImages(n))
        .obj(),
    ),
  );
  return {
    snapshotAt(pass: number) {
      const changed = pass % nodes.length;
      nodes[changed] = asViewed(nodes[changed] as (typeof nodes)[number]);
      return snapshotOf(pods, nodes);
    },
  };
}

/**
 * A backlog its budget holds, as the memory bench's `tollgate run` holds it: `count` pods
 * of one tenant whose budget is 0 pods, under Budget alone, in the form the view hands
 * them, on one node. Nothing changes from pass to pass.
 */
export function budgetHeldPolicy(): Policy {
  return aPolicy()
    .tenant(aTenant('batch').namespaces('batch-a', 'batch-b').budget({ pods: 0 }))
    .gatePolicy(aGatePolicy('ready', 'batch').conditions({ type: 'Budget' }))
    .obj();
}

export function budgetHeldWorld(count: number) {
  const pods = viewedBacklog(count, (pod) => pod);
  const nodes = [asViewed(aNode('n1').obj())];
  return { snapshotAt: (_pass: number) => snapshotOf(pods, nodes) };
}

/** Parsed from the API's JSON, as the view hands objects over (text timestamps). */
function asViewed<T>(object: T): T {
  return JSON.parse(JSON.stringify(object)) as T;
}

/**
 * `count` gated pods of 100m CPU over the tenant's two namespaces, created a millisecond
 * apart a minute before `planNow`, each dressed by `dress`, as the view hands them.
 */
function viewedBacklog(count: number, dress: (pod: PodBuilder, i: number) => PodBuilder) {
  return Array.from({ length: count }, (_, i) =>
    asViewed(
      dress(
        aPod(`p${i}`, i % 2 === 0 ? 'batch-a' : 'batch-b')
          .uid(`uid-${i}`)
          .gated(gate)
          .requests({ cpu: '100m' })
          .createdAt(planNow - 60_000 + i),
        i,
      ).obj(),
    ),
  );
}
