/**
 * The synthetic world both planning benches plan over (bench/plan.ts, bench/plan-allocated.ts):
 * one tenant over two namespaces, `count` gated pods of 100m CPU, in gangs of 8 (two gangs'
 * worth of pods share a label, so half of each gang is missing: GangComplete judges every
 * pod) or under a plain Budget condition, on one node, at a fixed instant.
 */
import { snapshotOf } from '../src/decide/objects.ts';
import type { Policy } from '../src/policy/model.ts';
import { aNode } from '../test/builders/node.ts';
import { aPod } from '../test/builders/pod.ts';
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
