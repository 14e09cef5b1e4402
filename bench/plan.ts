/**
 * What one gate-release planning pass costs as the pod count grows, with and without
 * gangs: `planReleases` (the pure decision of a pass) over a synthetic snapshot, no API
 * server. A pass must be linear in pods: a gang pass costs a small multiple of a plain
 * pass of the same size, and ten times the pods cost about ten times the time.
 *
 *   node bench/plan.ts [--pods 5000] [--large 50000] [--repeat 5] [--smoke]
 *
 * Reports the median pass time of: plain pods and gang pods (gangs of 8) at --pods, gang
 * pods at --large; the ratios gang/plain and large/pods (10x pods: about 10 when linear,
 * about 100 when quadratic). --smoke: 5,000 and 20,000 pods, 3 repeats; exits 1 when a
 * gang pass costs more than 4x a plain pass of the same size or 4x the pods cost more than
 * 8x the time (linear gives about 4, quadratic about 16). Ratios, measured in one run, so
 * the verdict does not depend on the machine's speed.
 */
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { emptyPlanState, planReleases } from '../src/decide/release-plan.ts';
import { snapshotOf } from '../src/decide/objects.ts';
import type { Policy } from '../src/policy/model.ts';
import { aNode } from '../test/builders/node.ts';
import { aPod } from '../test/builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../test/builders/policy.ts';
import { median } from './lib.ts';

const { values } = parseArgs({
  options: {
    pods: { type: 'string', default: '5000' },
    large: { type: 'string', default: '50000' },
    repeat: { type: 'string', default: '5' },
    smoke: { type: 'boolean', default: false },
  },
});
const pods = values.smoke ? 5000 : Number(values.pods);
const large = values.smoke ? 20000 : Number(values.large);
const repeats = values.smoke ? 3 : Number(values.repeat);
const gangOf = 8;
const now = Date.UTC(2030, 0, 1);
const gate = 'batch.tollgate.io/ready';

function policy(gangs: boolean): Policy {
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

function snapshot(count: number, gangs: boolean) {
  const objs = Array.from({ length: count }, (_, i) => {
    const pod = aPod(`p${i}`, i % 2 === 0 ? 'batch-a' : 'batch-b')
      .uid(`uid-${i}`)
      .gated(gate)
      .requests({ cpu: '100m' })
      .createdAt(now - 60_000 + i);
    if (gangs) pod.label('gang', `g${Math.floor(i / (2 * gangOf))}`).annotate('gang-size', '8');
    return pod.obj();
  });
  return snapshotOf(objs, [aNode('n1').obj()]);
}

/** Median milliseconds of one planning pass over this many pods. */
function passMs(count: number, gangs: boolean): number {
  const p = policy(gangs);
  const snap = snapshot(count, gangs);
  const times: number[] = [];
  planReleases(p, snap, emptyPlanState, now); // warm-up
  for (let i = 0; i < repeats; i++) {
    const start = performance.now();
    const plan = planReleases(p, snap, emptyPlanState, now);
    times.push(performance.now() - start);
    if (plan.decisions.length === 0) throw new Error(`no decision for ${count} pods`);
  }
  return median(times);
}

const plain = passMs(pods, false);
const gang = passMs(pods, true);
const gangLarge = passMs(large, true);
const result = {
  machine: { cpus: cpus().length, load: loadavg().map((l) => Number(l.toFixed(2))) },
  repeats,
  medianMs: { [`plain ${pods}`]: plain, [`gang ${pods}`]: gang, [`gang ${large}`]: gangLarge },
  gangOverPlain: gang / plain,
  largeOverPods: gangLarge / gang,
  podsRatio: large / pods,
};
process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);

if (values.smoke) {
  const problems = [
    ...(result.gangOverPlain > 4
      ? [`a gang pass costs ${result.gangOverPlain.toFixed(1)}x a plain pass (limit 4x)`]
      : []),
    ...(result.largeOverPods > 8
      ? [`${result.podsRatio}x the pods cost ${result.largeOverPods.toFixed(1)}x (limit 8x)`]
      : []),
  ];
  for (const problem of problems) process.stderr.write(`bench plan smoke: ${problem}\n`);
  process.exit(problems.length > 0 ? 1 : 0);
}
