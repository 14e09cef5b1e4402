/**
 * Release latency one pod at a time: from the moment a pod's last condition becomes true
 * to its gate being removed, with 10,000 gated pods watched by the real gate-release loop.
 *
 *   node bench/latency.ts [--pods 10000] [--flips 1000] [--rate 20] [--mode strict|async|both]
 *                         [--nodes 10] [--timeout 120] [--git-delay-ms 0]
 *
 * On one real control plane (test/support/control-plane.ts), one namespace of gated pods
 * under GatePolicy conditions [Budget, ImagePresent(minNodes 1)] with no budget (Budget
 * always holds): `--pods` + `--flips` per further mode. Each mode has its own `--flips`
 * pods, disjoint and spread evenly over the namespace, each running an image of its own
 * (`registry.example/lat-<i>:1`); the rest run an image no node ever has, so they stay
 * held and are planned in every pass, as a real backlog is. Each mode starts with at
 * least `--pods` gated (the earlier modes' flipped pods are released by then). Per mode:
 * - The real stack (test/support/gate-release-stack.ts) as the `tollgate` identity:
 *   policy from a real Git server, live ClusterView, dispatcher, stale-guard, events,
 *   GitAuditWriter (strict or async) pushing to a real Git server. It starts, plans the
 *   backlog (one Hold per pod), and the bench waits for that to settle before any flip.
 * - Flips: the simulated kubelet (test/support/kubelet.ts `setImages`) adds one flipped
 *   pod's image to one node's `status.images` at a steady `--rate` per second, round-robin
 *   over `--nodes` nodes. Each node keeps 10 base images plus a window of recent ones;
 *   images of pods already released are dropped once the window passes 10, so a node's
 *   status stays small (a real kubelet reports at most 50 images).
 * - An independent watcher (admin identity, its own informers on nodes and on the
 *   namespace's pods, this process's clock) stamps t_true = first sight of a node status
 *   containing the pod's image, and t_released = first sight of the pod without its gate.
 *   latency = t_released - t_true: it includes the watch delivery of the node update to
 *   tollgate and of the pod update back to the watcher, as a user would see it.
 *
 * Where the time goes, per released pod on the same clock (the stack's trace hooks):
 * toPass (watch delivery to tollgate, pass debounce, a running pass, planning), intents
 * (strict: commit + push), queue (dispatcher), write (the API server), back (watch
 * delivery to the watcher). toPass is split in three: delivery (the watcher's sight ->
 * tollgate's view hands the node change to its listeners), wait (-> the pass that decides
 * the pod begins: debounce, spacing, a late timer) and plan (-> its intents are handed
 * to the audit). A pass log (pino, debug) goes to bench/results/latency-<stamp>-<mode>.log:
 * each pass that sent writes logs planMs and intentsMs; each pass logs its pacing (how
 * long its first change waited, how late its timer fired, its length as the pass share
 * counts it).
 *
 * --git-delay-ms N: tollgate reaches the Git server (policy and audit) through a proxy that
 * adds N ms of round trip (bench/delay-proxy.ts: each chunk either way N/2 ms later, a new
 * connection one round trip more), as a hosted Git service far from the cluster would.
 *
 * Exits 1 when a flipped pod is not released, or a pod is released before its flip.
 */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import {
  CoreV1Api,
  makeInformer,
  type KubeConfig,
  type V1Node,
  type V1Pod,
} from '@kubernetes/client-node';
import { startControlPlane } from '../test/support/control-plane.ts';
import { SimulatedKubelet } from '../test/support/kubelet.ts';
import { pushTree, type GitServer } from '../test/support/git-server.ts';
import { startGitServerProcess } from '../test/support/git-server-process.ts';
import { prepareGateReleaseStack } from '../test/support/gate-release-stack.ts';
import type { AuditMode } from '../src/audit/writer.ts';
import { auditPushSeconds } from '../src/audit/metrics.ts';
import { startDelayProxy, type DelayProxy } from './delay-proxy.ts';
import {
  benchPolicyFiles,
  ensureNamespace,
  gatedPod,
  inPool,
  passShareOption,
  percentile,
} from './lib.ts';

const here = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: {
    pods: { type: 'string', default: '10000' },
    flips: { type: 'string', default: '1000' },
    rate: { type: 'string', default: '20' },
    mode: { type: 'string', default: 'both' },
    nodes: { type: 'string', default: '10' },
    timeout: { type: 'string', default: '120' },
    'git-delay-ms': { type: 'string', default: '0' },
    /** The share of the event loop gate-release passes may take; absent, the loop's default. */
    'pass-share': { type: 'string' },
  },
});
const positive = (name: string, raw: string | undefined): number => {
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name}: not a positive number: ${raw}`);
  return n;
};
const pods = positive('pods', values.pods);
const flips = positive('flips', values.flips);
const rate = positive('rate', values.rate);
const nodeCount = positive('nodes', values.nodes);
const timeoutMs = positive('timeout', values.timeout) * 1000;
const gitDelayMs = Number(values['git-delay-ms']);
if (!Number.isFinite(gitDelayMs) || gitDelayMs < 0)
  throw new Error(`--git-delay-ms: not a number of milliseconds: ${values['git-delay-ms']}`);
if (!Number.isInteger(pods) || !Number.isInteger(flips) || flips > pods)
  throw new Error(`--pods and --flips: whole numbers with flips <= pods (got ${pods}, ${flips})`);
if (!['strict', 'async', 'both'].includes(values.mode ?? ''))
  throw new Error(`--mode: must be strict, async or both, got ${values.mode}`);
const modes: AuditMode[] =
  values.mode === 'both' ? ['strict', 'async'] : [values.mode as AuditMode];
const passShare = passShareOption(values['pass-share']);

const gate = 'bench.tollgate.io/ready';
const runId = Date.now().toString(36);
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const outDir = join(here, 'results');
mkdirSync(outDir, { recursive: true });
const say = (line: string): void => void process.stderr.write(`# latency: ${line}\n`);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const BASE_IMAGES = Array.from({ length: 10 }, (_, i) => `registry.example/base-${i}:1`);
const WINDOW = 10;
const HELD_IMAGE = 'registry.example/never-present:1';
const nodeNames = Array.from({ length: nodeCount }, (_, i) => `lat-node-${i + 1}`);

/**
 * One namespace serves every mode: `pods` gated pods plus `flips` more per further mode,
 * so each mode starts with at least `pods` gated (the earlier modes' flipped pods are
 * released by then). The flipped sets are disjoint and spread evenly over the namespace.
 */
const totalPods = pods + flips * (modes.length - 1);
function flippedIndexes(mode: number): number[] {
  const step = totalPods / (flips * modes.length);
  return Array.from({ length: flips }, (_, k) => Math.floor((k * modes.length + mode) * step));
}
const imageOf = (index: number): string => `registry.example/lat-${index}:1`;
const podName = (index: number): string => `p-${String(index).padStart(5, '0')}`;

interface Watcher {
  readonly trueAt: Map<string, number>; // pod name -> first sight of its image on a node
  readonly releasedAt: Map<string, number>; // pod name -> first sight without the gate
  readonly podsSeen: () => number;
  stop(): Promise<void>;
}

/** The independent observer: admin identity, its own informers, this process's clock. */
async function watch(
  kc: KubeConfig,
  namespace: string,
  podOfImage: ReadonlyMap<string, string>,
  /** Pods released by an earlier mode. */
  ignore: ReadonlySet<string>,
): Promise<Watcher> {
  const core = kc.makeApiClient(CoreV1Api);
  const trueAt = new Map<string, number>();
  const releasedAt = new Map<string, number>();
  const names = new Set<string>();
  const nodeInformer = makeInformer<V1Node>(kc, '/api/v1/nodes', () => core.listNode());
  const onNode = (node: V1Node): void => {
    const now = performance.now();
    for (const image of node.status?.images ?? [])
      for (const name of image.names ?? []) {
        const pod = podOfImage.get(name);
        if (pod !== undefined && !trueAt.has(pod)) trueAt.set(pod, now);
      }
  };
  nodeInformer.on('add', onNode);
  nodeInformer.on('update', onNode);
  const podInformer = makeInformer<V1Pod>(kc, `/api/v1/namespaces/${namespace}/pods`, () =>
    core.listNamespacedPod({ namespace }),
  );
  const onPod = (pod: V1Pod): void => {
    const name = pod.metadata?.name ?? '';
    names.add(name);
    if (releasedAt.has(name) || ignore.has(name)) return;
    if (!(pod.spec?.schedulingGates ?? []).some((g) => g.name === gate))
      releasedAt.set(name, performance.now());
  };
  podInformer.on('add', onPod);
  podInformer.on('update', onPod);
  let stopped = false;
  for (const informer of [nodeInformer, podInformer] as const) {
    // An error ends an informer's watch; restart it, or what follows goes unseen.
    informer.on('error', (error: unknown) => {
      if (stopped) return;
      say(`watcher error ${String(error)}; restarting`);
      setTimeout(() => void informer.start(), 200);
    });
  }
  await nodeInformer.start();
  await podInformer.start();
  return {
    trueAt,
    releasedAt,
    podsSeen: () => names.size,
    stop: async () => {
      stopped = true;
      await nodeInformer.stop();
      await podInformer.stop();
    },
  };
}

async function createPods(kc: KubeConfig, namespace: string): Promise<number> {
  const core = kc.makeApiClient(CoreV1Api);
  const flipped = new Set(modes.flatMap((_, m) => flippedIndexes(m)));
  const indexes = Array.from({ length: totalPods }, (_, i) => i);
  const started = performance.now();
  await inPool(indexes, 32, async (i) => {
    const body = gatedPod(podName(i), namespace, gate);
    body.spec!.containers[0]!.image = flipped.has(i) ? imageOf(i) : HELD_IMAGE;
    await core.createNamespacedPod({ namespace, body });
  });
  return performance.now() - started;
}

/** Pushes so far and their total seconds, from the audit writer's own histogram (this process). */
async function pushTotals(): Promise<{ count: number; seconds: number }> {
  const { values } = await auditPushSeconds.get();
  const of = (suffix: string): number =>
    values
      .filter((v) => v.metricName === `tollgate_audit_push_seconds_${suffix}`)
      .reduce((sum, v) => sum + v.value, 0);
  return { count: of('count'), seconds: of('sum') };
}

interface PassLine {
  time: string;
  writes: number;
  planMs: number;
  intentsMs: number;
}

function passLines(file: string): PassLine[] {
  const out: PassLine[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.includes('"gate-release pass"')) continue;
    const row = JSON.parse(line) as PassLine;
    out.push(row);
  }
  return out;
}

/** Each pass's pacing (src/loops/gate-release.ts `#logPacing`); none from a checkout without it. */
interface PacingLine {
  waitedMs?: number;
  lateMs?: number;
  decideMs?: number;
  passMs: number;
  writes?: number;
}

function pacingLines(file: string): PacingLine[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.includes('"gate-release pass pacing"'))
    .map((line) => JSON.parse(line) as PacingLine);
}

const quantiles = (xs: readonly number[]): { p50: number; p99: number } => ({
  p50: percentile([...xs], 50),
  p99: percentile([...xs], 99),
});

/** The last pass start at or before `at` (starts ascending); undefined = none. */
function passStartBefore(starts: readonly number[], at: number): number | undefined {
  let lo = 0;
  let hi = starts.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (starts[mid]! <= at) lo = mid + 1;
    else hi = mid;
  }
  return lo === 0 ? undefined : starts[lo - 1];
}

/**
 * toPass: image seen by the watcher -> the loop hands the pod's intent to the audit
 *   (watch delivery to tollgate, pass debounce, waiting for a running pass, planning);
 * intents: the audit call (strict: commit + push; async: at once);
 * queue: intent recorded -> the executor sends the write (dispatcher);
 * write: the API server's answer to the patch;
 * back: the answer -> the watcher sees the gate gone (watch delivery).
 */
const stageNames = ['toPass', 'intents', 'queue', 'write', 'back'] as const;
type Stage = (typeof stageNames)[number];
/** toPass, split: see the header. */
const toPassParts = ['delivery', 'wait', 'plan'] as const;
type ToPassPart = (typeof toPassParts)[number];

interface ModeRun {
  mode: AuditMode;
  podsWatched: number;
  /** Gated when the loop started. */
  podsGated: number;
  flips: number;
  flipsPerSecond: number;
  released: number;
  releasedBeforeFlip: number;
  neverTrue: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  setImagesMs: { p50: number; p99: number };
  /** Where each released pod's latency went (see the header). */
  stagesMs: Record<Stage, { p50: number; p99: number }>;
  toPassMs: Record<ToPassPart, { p50: number; p99: number }>;
  /** Every pass's pacing: all passes, not only those with writes. */
  pacing: {
    passes: number;
    passMs: { p50: number; p99: number };
    waitedMs: { p50: number; p99: number };
    lateMs: { p50: number; p99: number };
  };
  passes: {
    count: number;
    planMsP50: number;
    planMsMax: number;
    intentsMsP50: number;
    intentsMsP99: number;
  };
  load: { before: number[]; after: number[] };
  /** Audit pushes during the mode (intents, outcomes, records) and their mean duration. */
  pushes: { count: number; meanMs: number };
  passLog: string;
}

async function runMode(
  mode: AuditMode,
  modeIndex: number,
  namespace: string,
  adminKc: KubeConfig,
  tollgateKc: KubeConfig,
  kubelet: SimulatedKubelet,
  git: GitServer,
  policyUrl: string,
  gitRoute: (url: string) => string,
): Promise<ModeRun> {
  const indexes = flippedIndexes(modeIndex);
  const podOfImage = new Map(indexes.map((i) => [imageOf(i), podName(i)]));
  const earlier = new Set(
    modes.slice(0, modeIndex).flatMap((_, m) => flippedIndexes(m).map(podName)),
  );
  const watcher = await watch(adminKc, namespace, podOfImage, earlier);

  const passLog = join(outDir, `latency-${stamp}-${mode}.log`);
  const log = pino(
    { name: `latency-${mode}`, level: 'debug' },
    pino.destination({ dest: passLog, sync: false }),
  );
  // Per pod, the loop's stages on the same clock as the watcher.
  const stages = new Map<
    string,
    { called?: number; returned?: number; sent?: number; answered?: number }
  >();
  const stageOf = (key: string) => {
    const name = key.slice(key.indexOf('/') + 1);
    let entry = stages.get(name);
    if (!entry) stages.set(name, (entry = {}));
    return entry;
  };
  const passStarts: number[] = [];
  const stack = await prepareGateReleaseStack({
    ...(passShare === undefined ? {} : { passShare }),
    trace: {
      passBegan(at) {
        passStarts.push(at);
      },
      intents(keys, calledAt, returnedAt) {
        for (const key of keys) {
          const entry = stageOf(key);
          entry.called ??= calledAt;
          entry.returned ??= returnedAt;
        }
      },
      write(key, sentAt, answeredAt) {
        const entry = stageOf(key);
        entry.sent ??= sentAt;
        entry.answered ??= answeredAt;
      },
    },
    kubeConfig: tollgateKc,
    policyUrl: gitRoute(policyUrl),
    auditUrl: gitRoute(git.createRepo(`audit-${mode}`)),
    token: git.token,
    cacheDir: mkdtempSync(join(tmpdir(), `tollgate-latency-${mode}-`)),
    controller: `latency-${mode}`,
    cluster: 'bench',
    auditMode: mode,
    log,
    policyIntervalMs: 5000,
    dispatcher: { capacity: pods * 2, concurrency: 16, qps: 100_000, burst: 100_000 },
  });
  const inNamespace = [...stack.view.pods()].filter((p) => p.metadata?.namespace === namespace);
  const podsWatched = inNamespace.length;
  const podsGated = inNamespace.filter((p) =>
    (p.spec?.schedulingGates ?? []).some((g) => g.name === gate),
  ).length;
  // When tollgate's own view hands it the node change that shows a pod's image.
  const seenAt = new Map<string, number>();
  const unsubscribeSeen = stack.view.onChange((change) => {
    if (change.resource !== 'nodes') return;
    const now = performance.now();
    for (const image of (change.object as V1Node).status?.images ?? [])
      for (const name of image.names ?? []) {
        const pod = podOfImage.get(name);
        if (pod !== undefined && !seenAt.has(pod)) seenAt.set(pod, now);
      }
  });
  const pushesBefore = await pushTotals();
  stack.startLoop();
  // The first pass plans the whole backlog (one Hold each); let it and its audit settle.
  await sleep(5000);
  await stack.audit.flush();
  await sleep(1000);
  const early = [...watcher.releasedAt.keys()];
  if (early.length > 0) say(`${mode}: ${early.length} pods released before any flip`);

  // Flips at a steady rate, round-robin over the nodes; each node's patches in order.
  const window = new Map<string, string[]>(nodeNames.map((n) => [n, []]));
  const chains = new Map<string, Promise<void>>(nodeNames.map((n) => [n, Promise.resolve()]));
  const setImagesMs: number[] = [];
  let retracted = 0;
  const load = { before: loadavg(), after: [] as number[] };
  const flipStart = performance.now();
  for (let k = 0; k < indexes.length; k++) {
    const due = flipStart + (k * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    const node = nodeNames[k % nodeNames.length]!;
    const recent = window.get(node)!;
    recent.push(imageOf(indexes[k]!));
    // Drop images of released pods once the window is full; an unreleased pod's image
    // is dropped only past the status cap of 50, and counted (it would never release).
    for (let j = 0; recent.length > WINDOW && j < recent.length;) {
      if (watcher.releasedAt.has(podOfImage.get(recent[j]!)!)) recent.splice(j, 1);
      else j++;
    }
    while (BASE_IMAGES.length + recent.length > 50) {
      recent.shift();
      retracted += 1;
    }
    const images = [...BASE_IMAGES, ...recent];
    chains.set(
      node,
      chains.get(node)!.then(async () => {
        const sent = performance.now();
        await kubelet.setImages(node, images);
        setImagesMs.push(performance.now() - sent);
      }),
    );
  }
  await Promise.all(chains.values());
  const flipSeconds = (performance.now() - flipStart) / 1000;
  const deadline = performance.now() + timeoutMs;
  const flippedNames = indexes.map(podName);
  while (flippedNames.some((n) => !watcher.releasedAt.has(n)) && performance.now() < deadline)
    await sleep(100);
  load.after = loadavg();
  const pushesAfter = await pushTotals();
  unsubscribeSeen();
  await stack.stop();
  await watcher.stop();
  log.flush();
  await sleep(200);

  const latencies: number[] = [];
  const breakdown: Record<Stage, number[]> = {
    toPass: [],
    intents: [],
    queue: [],
    write: [],
    back: [],
  };
  const split: Record<ToPassPart, number[]> = { delivery: [], wait: [], plan: [] };
  let neverTrue = 0;
  for (const name of flippedNames) {
    const t = watcher.trueAt.get(name);
    const r = watcher.releasedAt.get(name);
    if (t === undefined) neverTrue += 1;
    else if (r !== undefined) {
      latencies.push(r - t);
      const e = stages.get(name);
      if (
        e?.called !== undefined &&
        e.returned !== undefined &&
        e.sent !== undefined &&
        e.answered !== undefined
      ) {
        breakdown.toPass.push(e.called - t);
        breakdown.intents.push(e.returned - e.called);
        breakdown.queue.push(e.sent - e.returned);
        breakdown.write.push(e.answered - e.sent);
        breakdown.back.push(r - e.answered);
        const seen = seenAt.get(name);
        const began = passStartBefore(passStarts, e.called);
        if (seen !== undefined && began !== undefined && began >= seen) {
          split.delivery.push(seen - t);
          split.wait.push(began - seen);
          split.plan.push(e.called - began);
        }
      }
    }
  }
  // Released before their flip, or never flipped at all: both would be wrong releases.
  const flippedSet = new Set(flippedNames);
  const releasedBeforeFlip =
    early.length +
    latencies.filter((l) => l < 0).length +
    [...watcher.releasedAt.keys()].filter((n) => !flippedSet.has(n) && !early.includes(n)).length;
  if (retracted > 0) say(`${mode}: ${retracted} images dropped before their pod was released`);
  const passes = passLines(passLog);
  const pacing = pacingLines(passLog);
  const defined = (xs: (number | undefined)[]): number[] =>
    xs.filter((x): x is number => x !== undefined);
  const planMs = passes.map((p) => p.planMs);
  const intentsMs = passes.map((p) => p.intentsMs);
  // The next mode starts from the base images.
  for (const node of nodeNames) await kubelet.setImages(node, BASE_IMAGES);
  return {
    mode,
    podsWatched,
    podsGated,
    flips: flippedNames.length,
    flipsPerSecond: flippedNames.length / flipSeconds,
    released: latencies.length,
    releasedBeforeFlip,
    neverTrue,
    latencyMs: {
      p50: percentile(latencies, 50),
      p90: percentile(latencies, 90),
      p99: percentile(latencies, 99),
      max: Math.max(...latencies),
    },
    setImagesMs: { p50: percentile(setImagesMs, 50), p99: percentile(setImagesMs, 99) },
    stagesMs: Object.fromEntries(
      stageNames.map((st) => [
        st,
        { p50: percentile(breakdown[st], 50), p99: percentile(breakdown[st], 99) },
      ]),
    ) as ModeRun['stagesMs'],
    toPassMs: Object.fromEntries(
      toPassParts.map((part) => [part, quantiles(split[part])]),
    ) as ModeRun['toPassMs'],
    pacing: {
      passes: pacing.length,
      passMs: quantiles(pacing.map((p) => p.passMs)),
      waitedMs: quantiles(defined(pacing.map((p) => p.waitedMs))),
      lateMs: quantiles(defined(pacing.map((p) => p.lateMs))),
    },
    passes: {
      count: passes.length,
      planMsP50: percentile(planMs, 50),
      planMsMax: Math.max(...planMs),
      intentsMsP50: percentile(intentsMs, 50),
      intentsMsP99: percentile(intentsMs, 99),
    },
    load,
    pushes: {
      count: pushesAfter.count - pushesBefore.count,
      meanMs:
        ((pushesAfter.seconds - pushesBefore.seconds) /
          Math.max(1, pushesAfter.count - pushesBefore.count)) *
        1000,
    },
    passLog,
  };
}

// ---- the run

const machine = { cores: cpus().length, memGiB: totalmem() / 2 ** 30 };
say(
  `pods ${pods}, flips ${flips} at ${rate}/s over ${nodeCount} nodes, modes ${modes.join('+')}, ` +
    `Git round trip +${gitDelayMs} ms, ` +
    (passShare === undefined ? '' : `pass share ${passShare}, `) +
    `${machine.cores} cores, load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
);
const cp = await startControlPlane({ name: 'bench-latency' });
const adminKc = cp.kubeConfig('admin');
const tollgateKc = cp.kubeConfig('tollgate');
// In its own process: its spawns of git-http-backend must not block tollgate's loop.
const git = await startGitServerProcess();
// tollgate's own way to Git, with the round trip asked for; the bench's set-up goes direct.
const gitDelay: DelayProxy | undefined =
  gitDelayMs > 0 ? await startDelayProxy(git.url, gitDelayMs) : undefined;
const gitRoute = (url: string): string => gitDelay?.delayed(url) ?? url;
const kubelet = new SimulatedKubelet(adminKc, { concurrency: 16 });
const perNode = Math.max(110, Math.ceil((flips * modes.length) / nodeCount) + 10);
for (const name of nodeNames)
  await kubelet.addNode(name, {
    cpu: '64',
    memory: '256Gi',
    pods: perNode,
    images: BASE_IMAGES,
  });
await kubelet.start();

const namespace = `lat-${runId}`;
const namespaces = [namespace];
const policyUrl = git.createRepo('policy');
await pushTree(
  git,
  policyUrl,
  benchPolicyFiles({
    namespaces: namespaces,
    pods,
    gate,
    gatePolicy: 'bench-image',
    conditions: [{ type: 'Budget' }, { type: 'ImagePresent', minNodes: 1 }],
  }),
  { message: 'latency bench policy' },
);

const runs: ModeRun[] = [];
try {
  await ensureNamespace(adminKc, namespace);
  const createMs = await createPods(adminKc, namespace);
  say(`${totalPods} gated pods created in ${(createMs / 1000).toFixed(0)} s`);
  for (const [i, mode] of modes.entries()) {
    const run = await runMode(
      mode,
      i,
      namespace,
      adminKc,
      tollgateKc,
      kubelet,
      git,
      policyUrl,
      gitRoute,
    );
    runs.push(run);
    say(
      `${mode}: ${run.released}/${run.flips} released, p50 ${run.latencyMs.p50.toFixed(0)} ms, ` +
        `p99 ${run.latencyMs.p99.toFixed(0)} ms, max ${run.latencyMs.max.toFixed(0)} ms`,
    );
  }
} finally {
  await kubelet.stop();
  await gitDelay?.close();
  await git.close();
  await cp.stop();
}

// ---- report

const f0 = (n: number): string => (Number.isFinite(n) ? n.toFixed(0) : '-');
const rows: string[][] = [
  ['figure', ...runs.map((r) => `tollgate ${r.mode}`)],
  ['pods watched (gated)', ...runs.map((r) => `${r.podsWatched} (${r.podsGated})`)],
  ['flips (rate /s)', ...runs.map((r) => `${r.flips} (${r.flipsPerSecond.toFixed(1)})`)],
  ['released', ...runs.map((r) => String(r.released))],
  ['Git round trip added ms', ...runs.map(() => String(gitDelayMs))],
  ['latency p50 ms', ...runs.map((r) => f0(r.latencyMs.p50))],
  ['latency p90 ms', ...runs.map((r) => f0(r.latencyMs.p90))],
  ['latency p99 ms', ...runs.map((r) => f0(r.latencyMs.p99))],
  ['latency max ms', ...runs.map((r) => f0(r.latencyMs.max))],
  ['passes with writes', ...runs.map((r) => String(r.passes.count))],
  [
    'plan ms p50 / max',
    ...runs.map((r) => `${f0(r.passes.planMsP50)} / ${f0(r.passes.planMsMax)}`),
  ],
  [
    'intent push ms p50 / p99',
    ...runs.map((r) => `${f0(r.passes.intentsMsP50)} / ${f0(r.passes.intentsMsP99)}`),
  ],
  ...stageNames.flatMap((st) => [
    [
      `  ${st} ms p50 / p99`,
      ...runs.map((r) => `${f0(r.stagesMs[st].p50)} / ${f0(r.stagesMs[st].p99)}`),
    ],
    ...(st === 'toPass'
      ? toPassParts.map((part) => [
          `    ${part} ms p50 / p99`,
          ...runs.map((r) => `${f0(r.toPassMs[part].p50)} / ${f0(r.toPassMs[part].p99)}`),
        ])
      : []),
  ]),
  ['passes, all', ...runs.map((r) => String(r.pacing.passes))],
  [
    '  pass ms (share-counted) p50 / p99',
    ...runs.map((r) => `${f0(r.pacing.passMs.p50)} / ${f0(r.pacing.passMs.p99)}`),
  ],
  [
    '  first change waited ms p50 / p99',
    ...runs.map((r) => `${f0(r.pacing.waitedMs.p50)} / ${f0(r.pacing.waitedMs.p99)}`),
  ],
  [
    '  timer late ms p50 / p99',
    ...runs.map((r) => `${f0(r.pacing.lateMs.p50)} / ${f0(r.pacing.lateMs.p99)}`),
  ],
  ['audit pushes (mean ms)', ...runs.map((r) => `${r.pushes.count} (${f0(r.pushes.meanMs)})`)],
  [
    'setImages ms p50 / p99',
    ...runs.map((r) => `${f0(r.setImagesMs.p50)} / ${f0(r.setImagesMs.p99)}`),
  ],
  [
    'load 1m before / after',
    ...runs.map((r) => `${r.load.before[0]!.toFixed(2)} / ${r.load.after[0]!.toFixed(2)}`),
  ],
];
const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
for (const row of rows) console.log(row.map((cell, i) => cell.padEnd(widths[i]!)).join('  '));

const outFile = join(outDir, `latency-${stamp}.json`);
writeFileSync(
  outFile,
  `${JSON.stringify({ at: new Date().toISOString(), machine, pods, flips, rate, nodes: nodeCount, gitDelayMs, passShare: passShare ?? 'default', runs }, null, 2)}\n`,
);
console.log(`results: ${outFile}`);

const problems: string[] = [];
for (const r of runs) {
  if (r.released !== r.flips)
    problems.push(`${r.mode}: ${r.flips - r.released} flipped pods not released`);
  if (r.releasedBeforeFlip > 0)
    problems.push(`${r.mode}: ${r.releasedBeforeFlip} pods released before their flip`);
  if (r.neverTrue > 0) problems.push(`${r.mode}: ${r.neverTrue} flips never seen on a node`);
}
for (const p of problems) console.error(`latency: ${p}`);
process.exit(problems.length > 0 ? 1 : 0);
