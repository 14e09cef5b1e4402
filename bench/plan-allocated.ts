/**
 * Bytes one planning pass allocates, for this checkout and a baseline: a figure the
 * machine's load does not move (bench/plan.ts's times do). The same snapshots as
 * bench/plan.ts (50,000 pods by default, plain and gangs of 8, one tenant, first pass),
 * and a steady pass: the same pods planned again with the state of the pass before, after
 * twenty such passes 100 ms apart (V8 has optimised the pass, as in a long-running
 * process), over 10,000 pods held by their budget and 10,000 waiting for their images.
 *
 *   node --expose-gc --max-semi-space-size=512 --min-semi-space-size=512 \
 *     bench/plan-allocated.ts [--pods 50000] [--repeat 3] [--baseline DIR]
 *
 * How: the young generation is made large enough that no garbage collection runs during
 * a pass, so the heap used after a pass minus before it is what the pass allocated. A
 * pass during which a collection ran anyway (seen by a `gc` performance observer) is
 * reported as null, never as a number. Each figure is in MB; the median of --repeat
 * passes, after one warm-up pass per planner.
 */
import { PerformanceObserver } from 'node:perf_hooks';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { getHeapStatistics } from 'node:v8';
import * as current from '../src/decide/release-plan.ts';
import type { Policy } from '../src/policy/model.ts';
import { median } from './lib.ts';
import type { ClusterSnapshot } from '../src/decide/objects.ts';
import {
  budgetHeldPolicy,
  budgetHeldWorld,
  planNow as now,
  planPolicy as policy,
  planSnapshot,
  steadyPolicy,
  steadyWorld,
} from './plan-world.ts';

const { values } = parseArgs({
  options: {
    pods: { type: 'string', default: '50000' },
    repeat: { type: 'string', default: '3' },
    baseline: { type: 'string' },
  },
});
const pods = Number(values.pods);
const repeats = Number(values.repeat);

type Planner = Pick<typeof current, 'planReleases' | 'emptyPlanState'>;

const collectGarbage = (globalThis as { gc?: () => void }).gc;
if (!collectGarbage) throw new Error('run with node --expose-gc (see the header)');
let collections = 0;
new PerformanceObserver((list) => {
  collections += list.getEntries().length;
}).observe({ entryTypes: ['gc'] });
/** Lets the gc observer report the collections of the step before. */
const settle = () => new Promise((done) => setTimeout(done, 10));

/**
 * MB one call of `pass` allocates: the median of --repeat calls, each on a collected heap;
 * null when a collection ran during one (the difference would mean nothing).
 */
async function medianAllocatedMb(pass: () => void, digits: number): Promise<number | null> {
  const sizes: number[] = [];
  for (let i = 0; i < repeats; i++) {
    collectGarbage?.();
    await settle();
    collections = 0;
    const before = getHeapStatistics().used_heap_size;
    pass();
    const after = getHeapStatistics().used_heap_size;
    await settle();
    if (collections > 0) return null;
    sizes.push((after - before) / 1e6);
  }
  return Number(median(sizes).toFixed(digits));
}

/** MB a first pass allocates (after one warm-up pass). */
async function allocatedMb(planner: Planner, p: Policy, snap: ReturnType<typeof planSnapshot>) {
  planner.planReleases(p, snap, planner.emptyPlanState, now); // warm-up
  return medianAllocatedMb(() => {
    const plan = planner.planReleases(p, snap, planner.emptyPlanState, now);
    if (plan.decisions.length === 0) throw new Error('no decision');
  }, 1);
}

/** MB one steady pass allocates: the median of --repeat passes after twenty warm ones. */
async function steadyMb(
  planner: Planner,
  p: Policy,
  snapshotAt: (pass: number) => ClusterSnapshot,
): Promise<number | null> {
  let state = planner.emptyPlanState;
  let pass = 0;
  const plan = () => {
    const planned = planner.planReleases(p, snapshotAt(pass), state, now + pass * 100);
    state = planned.nextState;
    pass += 1;
    return planned;
  };
  while (pass < 20) plan();
  return medianAllocatedMb(() => {
    if (plan().held === 0) throw new Error('nothing held');
  }, 2);
}

const baseline: Planner | undefined =
  values.baseline === undefined
    ? undefined
    : ((await import(
        pathToFileURL(resolve(values.baseline, 'src/decide/release-plan.ts')).href
      )) as Planner);
const result: Record<string, unknown> = { pods, repeats };
/** This checkout's figure and, with --baseline, the baseline's and their ratio. */
async function row(measure: (planner: Planner) => Promise<number | null>) {
  const mine = await measure(current);
  if (!baseline) return { allocatedMb: mine };
  const theirs = await measure(baseline);
  return {
    allocatedMb: mine,
    baselineMb: theirs,
    thisOverBaseline: mine !== null && theirs ? Number((mine / theirs).toFixed(2)) : null,
  };
}
for (const gangs of [false, true]) {
  const p = policy(gangs);
  const snap = planSnapshot(pods, gangs);
  result[gangs ? `gang ${pods}` : `plain ${pods}`] = await row((planner) =>
    allocatedMb(planner, p, snap),
  );
}
const steadyPods = 10_000;
for (const [name, p, world] of [
  [`steady held by budget ${steadyPods}`, budgetHeldPolicy(), budgetHeldWorld(steadyPods)],
  [`steady waiting for images ${steadyPods}`, steadyPolicy(), steadyWorld(steadyPods)],
] as const) {
  result[name] = await row((planner) => steadyMb(planner, p, world.snapshotAt));
}
process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
