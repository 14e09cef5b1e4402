/**
 * The CPU a pod's trim costs the view (src/cluster/trim.ts `trimPod`), with its spec and
 * status shared through the parts table (`SharedParts`) and without it, in one process.
 *
 *   node bench/trim.ts [--pods 10000] [--repeat 7]
 *
 * Job pods as the API server serves them (test/builders/served-pod.ts, half gated, half
 * running), each parsed from its own JSON text as a list or watch delivers it. Each
 * repeat times, in turn: the parse alone, parse and trim with a parts table of capacity 0
 * (it shares nothing), parse and trim with a fresh parts table. Reports the median of each and the
 * table's cost per pod (with minus without).
 */
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type { KubernetesObject } from '@kubernetes/client-node';
import { SharedParts, SharedValues, trimPod } from '../src/cluster/trim.ts';
import { servedJobPod } from '../test/builders/served-pod.ts';
import { median } from './lib.ts';

const { values } = parseArgs({
  options: { pods: { type: 'string', default: '10000' }, repeat: { type: 'string', default: '7' } },
});
const pods = Number(values.pods);
const repeats = Number(values.repeat);
if (!Number.isInteger(pods) || pods < 1) throw new Error('--pods: not a positive integer');
if (!Number.isInteger(repeats) || repeats < 1) throw new Error('--repeat: not a positive integer');

const texts = Array.from({ length: pods }, (_, i) =>
  JSON.stringify(servedJobPod(i, { running: i % 2 === 1 })),
);
const sharedValues = new SharedValues();

function timed(step: (text: string) => unknown): number {
  const start = performance.now();
  for (const text of texts) step(text);
  return performance.now() - start;
}

const parse: number[] = [];
const without: number[] = [];
const withTable: number[] = [];
for (let i = 0; i < repeats; i++) {
  parse.push(timed((text) => JSON.parse(text)));
  const none = new SharedParts(0);
  without.push(timed((text) => trimPod(JSON.parse(text) as KubernetesObject, sharedValues, none)));
  const parts = new SharedParts();
  withTable.push(
    timed((text) => trimPod(JSON.parse(text) as KubernetesObject, sharedValues, parts)),
  );
}

const perPodUs = (ms: number): string => ((ms * 1000) / pods).toFixed(1);
const result = {
  machine: { cpus: cpus().length, load: loadavg().map((l) => Number(l.toFixed(2))) },
  pods,
  repeats,
  parseMs: median(parse),
  trimWithoutPartsMs: median(without),
  trimWithPartsMs: median(withTable),
  partsCostPerPodUs: Number(perPodUs(median(withTable) - median(without))),
};
console.log(`parse alone                ${median(parse).toFixed(1)} ms per ${pods} pods`);
console.log(`parse and trim, no table   ${median(without).toFixed(1)} ms`);
console.log(`parse and trim, the table  ${median(withTable).toFixed(1)} ms`);
console.log(
  `the table's cost           ${perPodUs(median(withTable) - median(without))} µs per pod`,
);
console.log(JSON.stringify(result));
