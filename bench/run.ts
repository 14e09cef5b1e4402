/**
 * Release throughput, writes per release and release latency of the real gate-release
 * loop against the API server's own ceiling, side by side on one real control plane.
 *
 *   node bench/run.ts [--pods 10000] [--repeat 3] [--mode strict|async|both|async,strict] [--smoke]
 *
 * Per repeat:
 * - raw ceiling: N gated pods in a fresh namespace; `rawRelease` (bench/lib.ts) removes the
 *   gates with the same JSON patch through tollgate's own write path (createWriteExecutor),
 *   concurrency 16, no policy, audit, guard or queue, and nobody watching.
 * - fair ceiling: the same, with the same watches attached as in tollgate's run: a
 *   ClusterView as the `tollgate` identity (tollgate's informers) and the bench's watcher,
 *   timed like tollgate's run (to the last gate removal the watcher sees). What separates
 *   tollgate from this one is tollgate's own work, not the watches' cost.
 * - tollgate (per audit mode): N gated pods in another fresh namespace of a tenant with no
 *   budget and pacing far above N; the real loop in this process (policy from a real Git
 *   server, live ClusterView as the `tollgate` identity, the priority dispatcher with
 *   concurrency 16, stale-guard, event recorder, GitAuditWriter pushing to a real Git
 *   server). Timed from loop start to the last gate removal seen by an independent
 *   watcher (admin identity, its own informer). The audit commits as shipped: at most 500
 *   decisions, at most 2 s (`--audit-max-delay-ms` to change the wait; the e2e stack's
 *   200 ms and 1,000 decisions commit outcome files five times a second through a wave).
 *   Events at the rate it ships (`defaultEventRate`: 5 a second, bursts of 20; the e2e
 *   stack's 50 a second posted about 0.06 Events per released pod beside the API
 *   server's own). They are written through a dispatcher of their own (concurrency 1),
 *   not through the loop's as in `tollgate run`.
 *
 * Each phase's pods are deleted when it ends (clearPods), so every phase, and every
 * repeat, starts on the same store, and the scheduler is restarted before each phase's
 * pods are created (freshScheduler). The scheduler binds at most 50 pods a second (its
 * client's default rate limit) and keeps a pod it has placed until the binding is sent:
 * without the restart, the bindings and failure status writes of a phase's deleted pods
 * waited in its rate limiter for minutes (2 min 25 s by the second phase, 9 min by the
 * fourth), so each phase met a different leftover (0.136 bindings per pod in the first
 * fair ceiling, none in the second, whose writes went to the first's deleted pods instead).
 *
 * Release latency: every pod's conditions hold from creation, so "last condition became
 * true" is taken as the loop's start; latency = watcher's observation of the gate gone
 * minus loop start. This includes watch delivery to the watcher.
 *
 * Every fair-ceiling and tollgate phase also reports the API server's requests per
 * released pod, by verb and resource, and the CPU seconds each process spent in it: this
 * process (tollgate's loop and the watchers), the control plane's, the Git server with its
 * git-http-backend children (bench/phase-profile.ts). --profile DIR adds CPU
 * profiles of each such phase: this process's (tollgate's loop runs here) as DIR/<phase>.cpuprofile,
 * summarized in the results, and the API server's own as DIR/<phase>-apiserver.pprof.
 *
 * --smoke: 200 pods, 1 repeat, both modes; exits 1 unless writes per release is exactly
 * 1.00 and no pod is left gated.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CoreV1Api, makeInformer, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { startControlPlane } from '../test/support/control-plane.ts';
import { SimulatedKubelet } from '../test/support/kubelet.ts';
import { pushTree, type GitServer } from '../test/support/git-server.ts';
import { startGitServerProcess } from '../test/support/git-server-process.ts';
import type { AuditMode } from '../src/audit/writer.ts';
import { defaultAuditBatch } from '../src/policy/compile.ts';
import { createLogger } from '../src/observe/log.ts';
import type { WriteResult } from '../src/dispatch/types.ts';
import { prepareGateReleaseStack } from '../test/support/gate-release-stack.ts';
import { startPhase, type PhaseCost } from './phase-profile.ts';
import { createClusterView } from '../src/cluster/view.ts';
import { defaultEventRate } from '../src/cluster/events.ts';
import { holdChangesTotal, passSeconds } from '../src/loops/gate-release-metrics.ts';
import {
  benchPolicyFiles,
  createGatedPods,
  clearPods,
  ensureNamespace,
  median,
  passShareOption,
  percentile,
  rawRelease,
} from './lib.ts';

const here = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: {
    pods: { type: 'string', default: '10000' },
    repeat: { type: 'string', default: '3' },
    mode: { type: 'string', default: 'both' },
    smoke: { type: 'boolean', default: false },
    timeout: { type: 'string', default: '300' },
    profile: { type: 'string' },
    /** The share of the event loop gate-release passes may take; absent, the loop's default. */
    'pass-share': { type: 'string' },
    /** The audit's longest wait for a commit, ms; absent, the shipped default (2 s). */
    'audit-max-delay-ms': { type: 'string' },
  },
});
const pods = values.smoke ? 200 : Number(values.pods);
const repeats = values.smoke ? 1 : Number(values.repeat);
const modeArg = values.smoke ? 'both' : values.mode;
if (!Number.isInteger(pods) || pods < 1) throw new Error(`--pods: not a positive integer`);
if (!Number.isInteger(repeats) || repeats < 1) throw new Error(`--repeat: not a positive integer`);
/** `both` is strict then async; a comma list (`async,strict`) runs the modes in its order. */
const modes: AuditMode[] = (modeArg === 'both' ? 'strict,async' : (modeArg ?? ''))
  .split(',')
  .map((mode) => {
    if (mode !== 'strict' && mode !== 'async')
      throw new Error(`--mode: "${mode}" is not strict, async, both or a comma list of them`);
    return mode;
  });
const timeoutMs = Number(values.timeout) * 1000;
const passShare = passShareOption(values['pass-share']);
const auditBatch = {
  maxDecisions: defaultAuditBatch.maxDecisions,
  maxDelayMs: Number(values['audit-max-delay-ms'] ?? defaultAuditBatch.maxDelayMs),
};
if (!Number.isInteger(auditBatch.maxDelayMs) || auditBatch.maxDelayMs < 1)
  throw new Error(`--audit-max-delay-ms: not a positive integer`);
const profileDir = values.profile;
if (profileDir !== undefined) mkdirSync(profileDir, { recursive: true });

const CONCURRENCY = 16;
const gate = 'bench.tollgate.io/ready';
const runId = Date.now().toString(36);
const log = createLogger({ name: 'bench', level: process.env.TOLLGATE_LOG_LEVEL ?? 'warn' });
/** A progress line on stderr with the time and the 1-minute load average (figures depend on it). */
const say = (line: string): void =>
  void process.stderr.write(
    `# bench ${new Date().toISOString().slice(11, 19)} load ${loadavg()[0]!.toFixed(1)}: ${line}\n`,
  );
const nsOf = (repeat: number, what: string): string => `bench-${runId}-r${repeat}-${what}`;

interface CeilingRun {
  pods: number;
  millis: number;
  podsPerSecond: number;
}
interface FairCeilingRun extends CeilingRun {
  leftGated: number;
  cost: PerPodCost;
}

/** The passes counted so far in this process, and their decide steps' total. */
async function passesSoFar(): Promise<{ count: number; totalMs: number }> {
  const values = (await passSeconds.get()).values;
  const of = (suffix: string) => values.find((v) => v.metricName?.endsWith(suffix))?.value ?? 0;
  return { count: of('_count'), totalMs: of('_sum') * 1000 };
}
/** A phase's API requests per released pod, and its profile summary when profiled. */
type PerPodCost = Omit<PhaseCost, 'requests'> & { requestsPerPod: Record<string, number> };

function perPod(cost: PhaseCost, released: number): PerPodCost {
  const { requests, ...rest } = cost;
  const requestsPerPod = Object.fromEntries(
    Object.entries(requests).map(([key, n]) => [key, Number((n / released).toFixed(3))]),
  );
  return { ...rest, requestsPerPod };
}

/** The CPU seconds of a phase by process, for the progress line. */
const cpuLine = (cost: PerPodCost): string =>
  Object.entries(cost.cpuSeconds)
    .map(([name, seconds]) => `${name} ${seconds.toFixed(1)}`)
    .join(', ');

/** The requests per pod that cost the most, for the progress line. */
const topRequests = (cost: PerPodCost): string =>
  Object.entries(cost.requestsPerPod)
    .filter(([key]) => !key.startsWith('WATCH') && !key.startsWith('LIST'))
    .sort((a, b) => b[1] - a[1])
    .slice(0, 6)
    .map(([key, n]) => `${key} ${n}`)
    .join(', ');
interface TollgateRun {
  mode: AuditMode;
  pods: number;
  released: number;
  millis: number;
  podsPerSecond: number;
  ratioToCeiling: number;
  ratioToFairCeiling: number;
  successfulWrites: number;
  writesPerRelease: number;
  sends: number;
  conflictsPer1000: number;
  retriesPer1000: number;
  results: Record<WriteResult['result'], number>;
  /** `first`: loop start to the first release (debounce, decide, and in strict mode the intent push). */
  latencyMs: { first: number; p50: number; p99: number; max: number };
  leftGated: number;
  cost: PerPodCost;
  /** Gate-release passes during the run, and their decide steps' total (tollgate_gate_release_pass_seconds). */
  passes: { count: number; totalMs: number };
  /** Held pods whose hold reason changed during the run, by reason (tollgate_hold_changes_total). */
  holdChanges: Record<string, number>;
}

/** Own informer on one namespace: when each pod was first seen without the gate. */
async function watchReleases(
  kc: KubeConfig,
  namespace: string,
): Promise<{ released: Map<string, number>; stop: () => Promise<void> }> {
  const core = kc.makeApiClient(CoreV1Api);
  const released = new Map<string, number>();
  const informer = makeInformer<V1Pod>(kc, `/api/v1/namespaces/${namespace}/pods`, () =>
    core.listNamespacedPod({ namespace }),
  );
  const seen = (pod: V1Pod): void => {
    const name = pod.metadata?.name ?? '';
    if (released.has(name)) return;
    if (!(pod.spec?.schedulingGates ?? []).some((g) => g.name === gate))
      released.set(name, performance.now());
  };
  informer.on('add', seen);
  informer.on('update', seen);
  let stopped = false;
  // An error ends the informer's watch; restart it, or releases after it go unseen.
  informer.on('error', (error: unknown) => {
    if (stopped) return;
    say(`watcher error ${String(error)}; restarting`);
    setTimeout(() => void informer.start(), 200);
  });
  await informer.start();
  return {
    released,
    stop: async () => {
      stopped = true;
      await informer.stop();
    },
  };
}

async function countGated(kc: KubeConfig, namespace: string): Promise<number> {
  const list = await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace });
  return list.items.filter((p) => (p.spec?.schedulingGates ?? []).some((g) => g.name === gate))
    .length;
}

async function runTollgate(
  mode: AuditMode,
  namespace: string,
  tollgateKc: KubeConfig,
  adminKc: KubeConfig,
  git: GitServer,
  policyUrl: string,
  ceilings: { raw: number; fair: number },
): Promise<TollgateRun> {
  const stack = await prepareGateReleaseStack({
    kubeConfig: tollgateKc,
    policyUrl,
    auditUrl: git.createRepo(`audit-${namespace}`),
    token: git.token,
    cacheDir: mkdtempSync(join(tmpdir(), `tollgate-bench-${mode}-`)),
    controller: `bench-${mode}`,
    cluster: 'bench',
    auditMode: mode,
    log,
    policyIntervalMs: 5000,
    dispatcher: { capacity: pods * 2, concurrency: CONCURRENCY, qps: 100_000, burst: 100_000 },
    auditBatch,
    // Events at the rate `tollgate run` ships (the e2e stack's is ten times that).
    eventRate: defaultEventRate,
    ...(passShare === undefined ? {} : { passShare }),
  });
  const { counters } = stack;

  const watcher = await watchReleases(adminKc, namespace);
  const phase = await startPhase(adminKc, namespace, {
    profileDir,
    apiServerSeconds: (pods / ceilings.fair) * 1.25,
    processes: machineProcesses,
  });
  const passesBefore = await passesSoFar();
  const holdsBefore = await holdChangesSoFar();
  const started = performance.now();
  stack.startLoop();
  const deadline = started + timeoutMs;
  while (watcher.released.size < pods && performance.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 20));
  const times = [...watcher.released.values()].map((t) => t - started);
  const millis = times.length === pods ? Math.max(...times) : performance.now() - started;
  if (times.length < pods) say(`${mode}: only ${times.length}/${pods} released in ${timeoutMs} ms`);
  const cost = perPod(await phase.end(), times.length);
  const passesAfter = await passesSoFar();
  const holdChanges = holdChangesSince(holdsBefore, await holdChangesSoFar());

  await stack.stop();
  await watcher.stop();
  const leftGated = await countGated(adminKc, namespace);

  const released = times.length;
  const podsPerSecond = (released / millis) * 1000;
  return {
    mode,
    pods,
    released,
    millis,
    podsPerSecond,
    ratioToCeiling: podsPerSecond / ceilings.raw,
    ratioToFairCeiling: podsPerSecond / ceilings.fair,
    successfulWrites: counters.succeeded,
    writesPerRelease: released > 0 ? counters.succeeded / released : Number.NaN,
    sends: counters.sends,
    conflictsPer1000: released > 0 ? (counters.results.conflict / released) * 1000 : Number.NaN,
    retriesPer1000:
      released > 0 ? ((counters.sends - counters.accepted) / released) * 1000 : Number.NaN,
    results: { ...counters.results },
    latencyMs: {
      first: Math.min(...times),
      p50: percentile(times, 50),
      p99: percentile(times, 99),
      max: Math.max(...times),
    },
    leftGated,
    cost,
    passes: {
      count: passesAfter.count - passesBefore.count,
      totalMs: passesAfter.totalMs - passesBefore.totalMs,
    },
    holdChanges,
  };
}

/** Hold changes so far in this process, by reason (tollgate_hold_changes_total). */
async function holdChangesSoFar(): Promise<Map<string, number>> {
  const { values } = await holdChangesTotal.get();
  return new Map(values.map((v) => [String(v.labels.reason), v.value]));
}

/** The hold changes between two readings, by reason; reasons with none left out. */
function holdChangesSince(
  before: Map<string, number>,
  after: Map<string, number>,
): Record<string, number> {
  const since: Record<string, number> = {};
  for (const [reason, value] of after) {
    const changes = value - (before.get(reason) ?? 0);
    if (changes > 0) since[reason] = changes;
  }
  return since;
}

/**
 * The raw release with tollgate's watches attached: a ClusterView as the tollgate
 * identity and the bench's watcher, both synced before the first patch; timed to the last
 * gate removal the watcher sees, as tollgate's run is.
 */
async function fairCeiling(
  namespace: string,
  tollgateKc: KubeConfig,
  adminKc: KubeConfig,
  rawPodsPerSecond: number,
): Promise<FairCeilingRun> {
  const view = createClusterView({ kubeConfig: tollgateKc, logger: log });
  view.start();
  await view.whenSynced();
  const watcher = await watchReleases(adminKc, namespace);
  const phase = await startPhase(adminKc, namespace, {
    profileDir,
    apiServerSeconds: (pods / rawPodsPerSecond) * 1.25,
    processes: machineProcesses,
  });
  const started = performance.now();
  const raw = await rawRelease(adminKc, namespace, gate, CONCURRENCY);
  const deadline = started + timeoutMs;
  while (watcher.released.size < raw.pods && performance.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 20));
  const millis = Math.max(...[...watcher.released.values()].map((t) => t - started));
  const cost = perPod(await phase.end(), watcher.released.size);
  await watcher.stop();
  await view.stop();
  return {
    pods: raw.pods,
    millis,
    podsPerSecond: (watcher.released.size / millis) * 1000,
    leftGated: await countGated(adminKc, namespace),
    cost,
  };
}

// ---- the run

const machine = {
  cores: (await import('node:os')).cpus().length,
  memGiB: (await import('node:os')).totalmem() / 2 ** 30,
};
say(
  `pods ${pods}, repeats ${repeats}, modes ${modes.join('+')}, ` +
    (passShare === undefined ? '' : `pass share ${passShare}, `) +
    `audit commits of at most ${auditBatch.maxDecisions} decisions or ${auditBatch.maxDelayMs} ms, ` +
    `${machine.cores} cores`,
);
// --profile takes the API server's CPU profile too (/debug/pprof, off in the test plane).
const cp = await startControlPlane({
  name: 'bench',
  ...(profileDir !== undefined ? { apiServerArgs: ['--profiling=true'] } : {}),
});
const adminKc = cp.kubeConfig('admin');
const tollgateKc = cp.kubeConfig('tollgate');
// In its own process: its spawns of git-http-backend must not block tollgate's loop.
const git = await startGitServerProcess();
/** A scheduler with nothing carried over from an earlier phase (see the header). */
async function freshScheduler(): Promise<void> {
  log.debug({ ms: await cp.restartScheduler() }, 'kube-scheduler restarted');
}

/** The processes on the shared cores besides this one, whose CPU seconds each phase reports. */
function machineProcesses(): Record<string, number | undefined> {
  return { ...cp.pids(), 'git server': git.pid };
}
const kubelet = new SimulatedKubelet(adminKc, { concurrency: 16 });
// Every released pod is scheduled and "run"; room for all of them across all repeats.
const totalPods = pods * repeats * (2 + modes.length);
const perNode = 1000;
const nodes = Math.ceil(totalPods / perNode) + 1;
for (let i = 1; i <= nodes; i++)
  await kubelet.addNode(`bench-node-${i}`, { cpu: '64', memory: '256Gi', pods: perNode });
await kubelet.start();

const tollgateNamespaces: string[] = [];
for (let r = 1; r <= repeats; r++) for (const m of modes) tollgateNamespaces.push(nsOf(r, m));
const policyUrl = git.createRepo('policy');
await pushTree(
  git,
  policyUrl,
  benchPolicyFiles({
    namespaces: tollgateNamespaces,
    pods,
    gate,
    gatePolicy: 'bench-ready',
    conditions: [{ type: 'Budget' }],
  }),
  { message: 'bench policy' },
);

const ceilings: CeilingRun[] = [];
const fairCeilings: FairCeilingRun[] = [];
const tollgates: TollgateRun[] = [];
let ceilingLeftGated = 0;
try {
  for (let r = 1; r <= repeats; r++) {
    const ceilingNs = nsOf(r, 'ceiling');
    await freshScheduler();
    await ensureNamespace(adminKc, ceilingNs);
    const createMs = await createGatedPods(adminKc, ceilingNs, pods, gate, { concurrency: 32 });
    const raw = await rawRelease(adminKc, ceilingNs, gate, CONCURRENCY);
    const ceiling = {
      pods: raw.pods,
      millis: raw.millis,
      podsPerSecond: (raw.pods / raw.millis) * 1000,
    };
    ceilingLeftGated += await countGated(adminKc, ceilingNs);
    await clearPods(adminKc, ceilingNs);
    ceilings.push(ceiling);
    say(
      `repeat ${r} ceiling: ${ceiling.podsPerSecond.toFixed(0)} pods/s (created in ${createMs.toFixed(0)} ms)`,
    );
    const fairNs = nsOf(r, 'fair');
    await freshScheduler();
    await ensureNamespace(adminKc, fairNs);
    await createGatedPods(adminKc, fairNs, pods, gate, { concurrency: 32 });
    const fair = await fairCeiling(fairNs, tollgateKc, adminKc, ceiling.podsPerSecond);
    ceilingLeftGated += fair.leftGated;
    await clearPods(adminKc, fairNs);
    fairCeilings.push(fair);
    say(
      `repeat ${r} fair ceiling (tollgate's watches attached): ${fair.podsPerSecond.toFixed(0)} pods/s; requests per pod: ${topRequests(fair.cost)}; CPU s: ${cpuLine(fair.cost)}`,
    );
    for (const mode of modes) {
      const namespace = nsOf(r, mode);
      await freshScheduler();
      await ensureNamespace(adminKc, namespace);
      await createGatedPods(adminKc, namespace, pods, gate, { concurrency: 32 });
      const run = await runTollgate(mode, namespace, tollgateKc, adminKc, git, policyUrl, {
        raw: ceiling.podsPerSecond,
        fair: fair.podsPerSecond,
      });
      await clearPods(adminKc, namespace);
      tollgates.push(run);
      say(
        `repeat ${r} ${mode}: ${run.podsPerSecond.toFixed(0)} pods/s (${run.ratioToCeiling.toFixed(2)} of ceiling, ${run.ratioToFairCeiling.toFixed(2)} of fair ceiling), ` +
          `writes/release ${run.writesPerRelease.toFixed(2)}, ${run.passes.count} passes (${run.passes.totalMs.toFixed(0)} ms deciding), hold changes ${JSON.stringify(run.holdChanges)}, p50 ${run.latencyMs.p50.toFixed(0)} ms, p99 ${run.latencyMs.p99.toFixed(0)} ms; requests per pod: ${topRequests(run.cost)}; CPU s: ${cpuLine(run.cost)}`,
      );
    }
  }
} finally {
  await kubelet.stop();
  await git.close();
  await cp.stop();
}

// ---- report

const range = (xs: number[], digits = 0): string =>
  `${median(xs).toFixed(digits)} [${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}]`;
const rows: string[][] = [
  ['figure (median [min–max])', 'ceiling', 'fair ceiling', ...modes.map((m) => `tollgate ${m}`)],
  [
    'pods/s',
    range(ceilings.map((c) => c.podsPerSecond)),
    range(fairCeilings.map((c) => c.podsPerSecond)),
    ...modes.map((m) => range(tollgates.filter((t) => t.mode === m).map((t) => t.podsPerSecond))),
  ],
  [
    'ratio to ceiling',
    '1.00',
    range(
      fairCeilings.map((f, i) => f.podsPerSecond / ceilings[i]!.podsPerSecond),
      2,
    ),
    ...modes.map((m) =>
      range(
        tollgates.filter((t) => t.mode === m).map((t) => t.ratioToCeiling),
        2,
      ),
    ),
  ],
  [
    'ratio to fair ceiling',
    '-',
    '1.00',
    ...modes.map((m) =>
      range(
        tollgates.filter((t) => t.mode === m).map((t) => t.ratioToFairCeiling),
        2,
      ),
    ),
  ],
  [
    'wall ms',
    range(ceilings.map((c) => c.millis)),
    range(fairCeilings.map((c) => c.millis)),
    ...modes.map((m) => range(tollgates.filter((t) => t.mode === m).map((t) => t.millis))),
  ],
  [
    'writes per release',
    '1.00',
    '-',
    ...modes.map((m) =>
      range(
        tollgates.filter((t) => t.mode === m).map((t) => t.writesPerRelease),
        2,
      ),
    ),
  ],
  [
    'conflicts / 1000',
    '-',
    '-',
    ...modes.map((m) =>
      range(
        tollgates.filter((t) => t.mode === m).map((t) => t.conflictsPer1000),
        1,
      ),
    ),
  ],
  [
    'retries / 1000',
    '-',
    '-',
    ...modes.map((m) =>
      range(
        tollgates.filter((t) => t.mode === m).map((t) => t.retriesPer1000),
        1,
      ),
    ),
  ],
  [
    'gate-release passes',
    '-',
    '-',
    ...modes.map((m) => range(tollgates.filter((t) => t.mode === m).map((t) => t.passes.count))),
  ],
  [
    'ms deciding (all passes)',
    '-',
    '-',
    ...modes.map((m) => range(tollgates.filter((t) => t.mode === m).map((t) => t.passes.totalMs))),
  ],
  [
    'first release ms',
    '-',
    '-',
    ...modes.map((m) => range(tollgates.filter((t) => t.mode === m).map((t) => t.latencyMs.first))),
  ],
  [
    'latency p50 ms',
    '-',
    '-',
    ...modes.map((m) => range(tollgates.filter((t) => t.mode === m).map((t) => t.latencyMs.p50))),
  ],
  [
    'latency p99 ms',
    '-',
    '-',
    ...modes.map((m) => range(tollgates.filter((t) => t.mode === m).map((t) => t.latencyMs.p99))),
  ],
];
// CPU seconds of each process in the phases that have the same watches attached: what the
// shared cores spent besides the wall time (the Git server's only in tollgate's phases).
const cpuNames = [
  ...new Set([...fairCeilings, ...tollgates].flatMap((run) => Object.keys(run.cost.cpuSeconds))),
];
for (const name of cpuNames)
  rows.push([
    `CPU s, ${name}`,
    '-',
    range(
      fairCeilings.map((f) => f.cost.cpuSeconds[name] ?? 0),
      1,
    ),
    ...modes.map((m) =>
      range(
        tollgates.filter((t) => t.mode === m).map((t) => t.cost.cpuSeconds[name] ?? 0),
        1,
      ),
    ),
  ]);
const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
for (const row of rows) console.log(row.map((cell, i) => cell.padEnd(widths[i]!)).join('  '));

const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const outDir = join(here, 'results');
mkdirSync(outDir, { recursive: true });
const outFile = join(outDir, `${stamp}.json`);
writeFileSync(
  outFile,
  `${JSON.stringify({ at: new Date().toISOString(), machine, pods, repeats, modes, concurrency: CONCURRENCY, passShare: passShare ?? 'default', auditBatch, ceilings, fairCeilings, tollgates }, null, 2)}\n`,
);
console.log(`results: ${outFile}`);

const problems: string[] = [];
for (const t of tollgates) {
  if (t.successfulWrites !== t.released)
    problems.push(`${t.mode}: ${t.successfulWrites} successful writes for ${t.released} releases`);
  if (t.released !== t.pods || t.leftGated !== 0)
    problems.push(`${t.mode}: ${t.leftGated} pods left gated`);
}
if (ceilingLeftGated !== 0) problems.push(`ceiling: ${ceilingLeftGated} pods left gated`);
for (const p of problems) console.error(`bench: ${p}`);
process.exit(values.smoke && problems.length > 0 ? 1 : 0);
