/**
 * What one gate-release planning pass costs as the pod count grows, with and without
 * gangs: `planReleases` (the pure decision of a pass) over a synthetic snapshot, no API
 * server. A pass must be linear in pods: a gang pass costs a small multiple of a plain
 * pass of the same size, and ten times the pods cost about ten times the time.
 *
 *   node bench/plan.ts [--pods 5000] [--large 50000] [--repeat 5] [--smoke] [--baseline DIR]
 *
 * Reports the median pass time of: plain pods and gang pods (gangs of 8) at --pods, gang
 * pods at --large; the ratios gang/plain and large/pods (10x pods: about 10 when linear,
 * about 100 when quadratic). --smoke: 5,000 and 20,000 pods, 3 repeats; exits 1 when a
 * gang pass costs more than 4x a plain pass of the same size or 4x the pods cost more than
 * 8x the time (linear gives about 4, quadratic about 16). Ratios, measured in one run, so
 * the verdict does not depend on the machine's speed.
 *
 * --baseline DIR: another checkout of tollgate (say `git worktree add DIR main`, or `git
 * archive main src | tar -x -C DIR` with DIR/node_modules linked to this checkout's):
 * each pass of this checkout's `planReleases` alternates with a pass of DIR's over the
 * same snapshot, in this process, and the report adds DIR's medians and the ratio
 * this/baseline per configuration: a before/after ratio that holds on a loaded machine.
 * Run it with `node --expose-gc` so each pass starts on a collected heap (else one
 * planner's garbage is collected during the other's pass). Before timing, it checks that both plan the same decisions, writes, hold changes,
 * wake-up and summary (an optimisation must never change a decision): exit 1 if not.
 */
import { cpus, loadavg } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import * as current from '../src/decide/release-plan.ts';
import type { Policy } from '../src/policy/model.ts';
import { median } from './lib.ts';
import {
  planNow as now,
  planPolicy as policy,
  planSnapshot,
  steadyPolicy,
  steadyWorld,
} from './plan-world.ts';

const { values } = parseArgs({
  options: {
    pods: { type: 'string', default: '5000' },
    large: { type: 'string', default: '50000' },
    repeat: { type: 'string', default: '5' },
    smoke: { type: 'boolean', default: false },
    baseline: { type: 'string' },
  },
});
const pods = values.smoke ? 5000 : Number(values.pods);
const large = values.smoke ? 20000 : Number(values.large);
const repeats = values.smoke ? 3 : Number(values.repeat);

/** With `node --expose-gc`, each timed pass starts on a collected heap: one planner's garbage is not collected during the other's pass. */
const collectGarbage = (globalThis as { gc?: () => void }).gc;

type Planner = Pick<typeof current, 'planReleases' | 'emptyPlanState'>;

const baseline: Planner | undefined =
  values.baseline === undefined
    ? undefined
    : ((await import(
        pathToFileURL(resolve(values.baseline, 'src/decide/release-plan.ts')).href
      )) as Planner);

function pass(planner: Planner, p: Policy, snap: ReturnType<typeof planSnapshot>) {
  return planner.planReleases(p, snap, planner.emptyPlanState, now);
}

/** What two plans must agree on: everything a pass hands the loop but its next state's maps. */
function planText(plan: ReturnType<typeof pass>): string {
  const { decisions, writes, holdChanges, requeueAfterMs, summary } = plan;
  return JSON.stringify({ decisions, writes, holdChanges, requeueAfterMs, summary });
}

interface PassCost {
  /** Median wall milliseconds of a pass. */
  readonly ms: number;
  /** Median CPU milliseconds of a pass (the process's, GC threads included): less moved by a loaded machine. */
  readonly cpuMs: number;
}

function costOf(wall: number[], cpu: number[]): PassCost {
  return { ms: median(wall), cpuMs: median(cpu) };
}

/** One planning pass over this many pods, per planner (alternating), and whether both planned alike. */
function passCost(count: number, gangs: boolean): { current: PassCost; baseline?: PassCost } {
  const p = policy(gangs);
  const snap = planSnapshot(count, gangs);
  const planners = baseline ? [current, baseline] : [current];
  const plans = planners.map((planner) => planText(pass(planner, p, snap))); // warm-up
  if (plans.some((text) => text !== plans[0])) {
    process.stderr.write(`bench plan: this checkout and the baseline plan ${count} pods apart\n`);
    process.exit(1);
  }
  const wall: number[][] = planners.map(() => []);
  const cpu: number[][] = planners.map(() => []);
  for (let i = 0; i < repeats; i++) {
    planners.forEach((planner, k) => {
      const plan = timed(wall[k] as number[], cpu[k] as number[], () => pass(planner, p, snap));
      if (plan.decisions.length === 0) throw new Error(`no decision for ${count} pods`);
    });
  }
  return costs(wall, cpu);
}

/** Runs one pass on a collected heap, adding its wall and CPU milliseconds to the lists. */
function timed<T>(wall: number[], cpu: number[], run: () => T): T {
  collectGarbage?.();
  const start = performance.now();
  const startCpu = process.cpuUsage();
  const result = run();
  const used = process.cpuUsage(startCpu);
  wall.push(performance.now() - start);
  cpu.push((used.user + used.system) / 1000);
  return result;
}

/** Each planner's median cost: this checkout's, and the baseline's when there is one. */
function costs(wall: number[][], cpu: number[][]): { current: PassCost; baseline?: PassCost } {
  const [mine, theirs] = wall.map((_, k) => costOf(wall[k] ?? [], cpu[k] ?? []));
  return theirs === undefined
    ? { current: mine as PassCost }
    : { current: mine as PassCost, baseline: theirs };
}

/**
 * A steady pass over a backlog of this many held pods (plan-world.ts `steadyWorld`), per
 * planner, each carrying its own state from pass to pass as the loop does: the first
 * pass (every pod held for the first time) is not timed; each timed pass sees one node
 * object replaced. Both planners must plan every pass alike.
 */
function steadyCost(count: number): { current: PassCost; baseline?: PassCost } {
  const p = steadyPolicy();
  const world = steadyWorld(count);
  const planners = baseline ? [current, baseline] : [current];
  const first = world.snapshotAt(0);
  const states = planners.map(
    (planner) => planner.planReleases(p, first, planner.emptyPlanState, now).nextState,
  );
  const wall: number[][] = planners.map(() => []);
  const cpu: number[][] = planners.map(() => []);
  for (let i = 1; i <= repeats; i++) {
    const snap = world.snapshotAt(i);
    const at = now + i * 1_000;
    const texts = planners.map((planner, k) => {
      const state = states[k] as typeof planner.emptyPlanState;
      const plan = timed(wall[k] as number[], cpu[k] as number[], () =>
        planner.planReleases(p, snap, state, at),
      );
      states[k] = plan.nextState;
      if (plan.held !== count) throw new Error(`a steady pass held ${plan.held} of ${count} pods`);
      return planText(plan);
    });
    if (texts.some((text) => text !== texts[0])) {
      process.stderr.write(
        `bench plan: this checkout and the baseline plan a steady pass of ${count} pods apart\n`,
      );
      process.exit(1);
    }
  }
  return costs(wall, cpu);
}

const runs = {
  [`plain ${pods}`]: passCost(pods, false),
  [`gang ${pods}`]: passCost(pods, true),
  [`gang ${large} (large)`]: passCost(large, true),
  [`steady ${pods}`]: steadyCost(pods),
};
const ms = (name: string): number => (runs[name]?.current as PassCost).ms;
const gangOverPlain = ms(`gang ${pods}`) / ms(`plain ${pods}`);
const largeOverPods = ms(`gang ${large} (large)`) / ms(`gang ${pods}`);
const result = {
  machine: { cpus: cpus().length, load: loadavg().map((l) => Number(l.toFixed(2))) },
  repeats,
  medianMs: Object.fromEntries(Object.entries(runs).map(([name, run]) => [name, run.current.ms])),
  medianCpuMs: Object.fromEntries(
    Object.entries(runs).map(([name, run]) => [name, run.current.cpuMs]),
  ),
  gangOverPlain,
  largeOverPods,
  podsRatio: large / pods,
  ...(baseline ? { baseline: baselineReport() } : {}),
};
process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);

/** The baseline's medians and this checkout's over the baseline's, wall and CPU. */
function baselineReport() {
  const each = (f: (run: { current: PassCost; baseline?: PassCost }) => number) =>
    Object.fromEntries(Object.entries(runs).map(([name, run]) => [name, f(run)]));
  const theirs = (run: { baseline?: PassCost }) => run.baseline as PassCost;
  return {
    dir: values.baseline,
    medianMs: each((run) => theirs(run).ms),
    medianCpuMs: each((run) => theirs(run).cpuMs),
    thisOverBaseline: each((run) => run.current.ms / theirs(run).ms),
    thisOverBaselineCpu: each((run) => run.current.cpuMs / theirs(run).cpuMs),
  };
}

if (values.smoke) {
  const problems = [
    ...(gangOverPlain > 4
      ? [`a gang pass costs ${gangOverPlain.toFixed(1)}x a plain pass (limit 4x)`]
      : []),
    ...(largeOverPods > 8
      ? [`${result.podsRatio}x the pods cost ${largeOverPods.toFixed(1)}x (limit 8x)`]
      : []),
  ];
  for (const problem of problems) process.stderr.write(`bench plan smoke: ${problem}\n`);
  process.exit(problems.length > 0 ? 1 : 0);
}
