/**
 * Resident memory of a whole `tollgate run` process and of tollgate's cluster view holding
 * N pods, against @kubernetes/client-node's plain informer holding the same pods, on one
 * real control plane.
 *
 *   node bench/memory.ts [--pods 0,10000,50000] [--repeat 3,1] [--concurrency 96]
 *                        [--contenders baseline,plain,tollgate,run] [--settle 15000]
 *                        [--run-node-options=--max-semi-space-size=16]
 *                        [--node-flags=--optimize-for-size] [--at-rest 20000]
 *                        [--at-rest-timeout 600]
 *
 * The parent starts the control plane (test/support/control-plane.ts) and creates gated
 * batch-like pods (`batchPod` below) in one namespace, topping it up to each N in turn
 * (gated pods never schedule, so no kubelet is needed). For each N and repeat it runs each
 * contender in its own child process (`node --expose-gc`), so no heap or RSS is shared:
 *
 * - `baseline`: loads the same modules (this file's static imports) and makes one API call:
 *   the runtime's and the libraries' own footprint, subtracted from the others.
 * - `plain`: `makeInformer` on /api/v1/namespaces/<ns>/pods (the library's ListWatch: one
 *   unpaginated list, typed objects with Date fields, managedFields kept).
 * - `tollgate`: `createClusterView` wired as `tollgate run` wires it (src/main.ts): pods of
 *   the managed namespace (cluster-wide pod watch filtered to it), nodes (none here: no
 *   kubelet), the managed namespace's ResourceQuotas (none here), and one referenced
 *   ConfigMap, as a policy with an ObjectCondition makes it. Only the view: not the policy
 *   source, loops, dispatcher or audit writer of a whole `tollgate run` process.
 * - `run`: a whole `tollgate run` process started as the image starts it (its entrypoint,
 *   its malloc tunables and NODE_ENV from scripts/build-image.sh), holding every
 *   pod (bench/memory-run.ts); its RSS from /proc after it planned and `--settle` ms
 *   passed. The figure the 150 MB target is about. `--pods 0,...` measures it before any pod;
 *   `--run-node-options` adds to its NODE_OPTIONS (a control row: an operator's own
 *   `--max-semi-space-size` turns off the young-generation flag of src/cli/memory-flags.ts).
 * - `run-v8-young`: `run` with `--max-semi-space-size=64` added, V8's own young generation
 *   on this machine: the control row of the young-generation flag.
 * - `run-baseline`: `run` started from another checkout (`--baseline DIR`, e.g. a copy of
 *   main with its node_modules; its own bin/tollgate.js and image environment), alternating with `run` in one bench: a change's
 *   effect as a ratio of the same run (`run / run-baseline`).
 *
 * `--at-rest MS`: every `run`-like contender is also measured at rest: once it used under 5%
 * of a core for 5 s (its Released conditions written, only rate-limited Events left), one
 * RSS sample a second for MS: their median, least, mean and most (bench/memory-run.ts
 * `rssAtRest`; at rest the RSS is a sawtooth, passes over the held pods and the memory
 * reducer's collections).
 *
 * `--run-env NAME=VALUE` (repeatable) adds to the environment of `run` only (not of
 * `run-baseline` or `run-v8-young`): a setting's effect against a same-run baseline.
 *
 * `--heap-snapshots DIR` has every `run`-like contender write a V8 heap snapshot there after
 * its samples (SIGUSR2) and reports its largest groups by constructor, and keeps beside it
 * the process's /proc/PID/smaps and metrics at its last sample (and at rest, with
 * `--at-rest`: `smaps-<tag>.txt`, `metrics-<tag>-at-rest.txt`); every `run`-like row
 * also gives its resident memory by kind of mapping (/proc/PID/smaps: the Node binary,
 * malloc's main arena, anonymous mappings such as V8's heap and malloc's thread arenas,
 * other files).
 *
 * All three use the unprivileged `tollgate` identity. Each child waits until it holds all
 * N pods (time to sync), runs gc() three times, samples process.memoryUsage() five times
 * one second apart (each after gc) and prints JSON; the medians are reported. Peak RSS is
 * the child's maxRSS over its whole life (the list in flight included).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CoreV1Api, KubeConfig, makeInformer, type V1Pod } from '@kubernetes/client-node';
import { createClusterView } from '../src/cluster/view.ts';
import { trimObject } from '../src/cluster/trim.ts';
import { silentLogger } from '../src/observe/log.ts';
import { createGatedPods, ensureNamespace, median } from './lib.ts';
import { getRaw } from './phase-profile.ts';
import { holdAllPolicy, measureTollgateRun, type RunMeasurement } from './memory-run.ts';

const here = dirname(fileURLToPath(import.meta.url));
const self = fileURLToPath(import.meta.url);
const childContenders = ['baseline', 'plain', 'tollgate'] as const;
const runContenders = ['run', 'run-v8-young', 'run-baseline'] as const;
const allContenders = [...childContenders, ...runContenders] as const;
/** The control row of `run`: V8's own young generation (64 MiB semi-spaces on this machine), the flag of src/cli/memory-flags.ts off. */
const v8YoungGeneration = '--max-semi-space-size=64';
type ChildContender = (typeof childContenders)[number];
type Contender = (typeof allContenders)[number];
type RunContender = (typeof runContenders)[number];
const isRunContender = (c: Contender): c is RunContender =>
  (runContenders as readonly string[]).includes(c);

const { values } = parseArgs({
  options: {
    pods: { type: 'string', default: '0,10000,50000' },
    repeat: { type: 'string', default: '1' },
    concurrency: { type: 'string', default: '96' },
    contenders: { type: 'string', default: allContenders.join(',') },
    settle: { type: 'string', default: '15000' },
    'run-node-options': { type: 'string', default: '' },
    'node-flags': { type: 'string', default: '' },
    baseline: { type: 'string' },
    'run-env': { type: 'string', multiple: true },
    'heap-snapshots': { type: 'string' },
    /** Also the RSS of every `run`-like contender at rest, this many ms after it went quiet. */
    'at-rest': { type: 'string' },
    /** How long to wait for it to go quiet, in seconds (600). */
    'at-rest-timeout': { type: 'string', default: '600' },
    child: { type: 'string' },
  },
});

interface ChildReport {
  contender: Contender;
  pods: number;
  syncMs: number;
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
  maxRss: number;
  samples: NodeJS.MemoryUsage[];
  resident?: RunMeasurement['resident'];
  heap?: RunMeasurement['heap'];
  atRest?: RunMeasurement['atRest'];
  passes?: number;
}

const gate = 'bench.tollgate.io/ready';
const namespace = 'bench-memory';

/**
 * A pod as a Job controller would create it for a batch worker, kept behind a gate: 7
 * labels, 3 annotations, a worker container (command, args, 6 env vars one of them a
 * fieldRef, requests and limits, a volume mount) and a log-shipper sidecar (2 env vars,
 * requests and limits), an emptyDir volume, a toleration and a node selector. No
 * ownerReference: the garbage collector would delete pods whose Job does not exist.
 */
export function batchPod(name: string, ns: string, gateName: string, index: number): V1Pod {
  const job = `train-${Math.floor(index / 100)}`;
  return {
    metadata: {
      name,
      namespace: ns,
      labels: {
        'app.kubernetes.io/name': 'trainer',
        'app.kubernetes.io/part-of': 'bench',
        'batch.kubernetes.io/job-name': job,
        'job-name': job,
        'batch.kubernetes.io/job-completion-index': String(index % 100),
        'tollgate.io/tenant': `team-${index % 7}`,
        'bench.tollgate.io/run': 'memory',
      },
      annotations: {
        'batch.kubernetes.io/job-completion-index': String(index % 100),
        'tollgate.io/gang': job,
        'prometheus.io/scrape': 'true',
      },
    },
    spec: {
      schedulingGates: [{ name: gateName }],
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 30,
      nodeSelector: { 'node.kubernetes.io/pool': 'batch' },
      tolerations: [{ key: 'batch', operator: 'Equal', value: 'true', effect: 'NoSchedule' }],
      containers: [
        {
          name: 'worker',
          image: 'registry.example/ml/trainer:2.14.1',
          command: ['python', '-m', 'trainer.main'],
          args: ['--epochs=10', `--shard=${index % 100}`, '--checkpoint-dir=/scratch/ckpt'],
          env: [
            { name: 'JOB_NAME', value: job },
            { name: 'SHARD_COUNT', value: '100' },
            { name: 'DATA_URL', value: `s3://datasets/bench/${job}/` },
            { name: 'LOG_LEVEL', value: 'info' },
            { name: 'OMP_NUM_THREADS', value: '2' },
            { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
          ],
          resources: {
            requests: { cpu: '500m', memory: '1Gi' },
            limits: { cpu: '2', memory: '2Gi' },
          },
          volumeMounts: [{ name: 'scratch', mountPath: '/scratch' }],
        },
        {
          name: 'log-shipper',
          image: 'registry.example/infra/log-shipper:1.3.0',
          env: [
            { name: 'SHIP_TO', value: 'logs.example:24224' },
            { name: 'BUFFER', value: '8Mi' },
          ],
          resources: {
            requests: { cpu: '10m', memory: '32Mi' },
            limits: { cpu: '100m', memory: '64Mi' },
          },
        },
      ],
      volumes: [{ name: 'scratch', emptyDir: { sizeLimit: '10Gi' } }],
    },
  };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function gcNow(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('bench/memory.ts child: run with node --expose-gc');
  gc();
}

/** One contender in this process: sync, settle, sample, print JSON on stdout. */
async function runChild(contender: ChildContender): Promise<void> {
  const kubeconfig = process.env.MEMORY_KUBECONFIG;
  const expected = Number(process.env.MEMORY_PODS);
  if (!kubeconfig || !Number.isInteger(expected))
    throw new Error('child: MEMORY_KUBECONFIG and MEMORY_PODS must be set');
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  let held: () => number;
  let stop: () => Promise<void> | void = () => {};
  const started = performance.now();
  if (contender === 'baseline') {
    await core.listNamespacedPod({ namespace, limit: 1 });
    held = () => 0;
  } else if (contender === 'plain') {
    const informer = makeInformer(kc, `/api/v1/namespaces/${namespace}/pods`, () =>
      core.listNamespacedPod({ namespace }),
    );
    informer.on('error', (error) => process.stderr.write(`plain informer: ${String(error)}\n`));
    await informer.start();
    held = () => informer.list().length;
    stop = () => informer.stop();
  } else {
    const view = createClusterView({
      kubeConfig: kc,
      namespaces: [namespace],
      logger: silentLogger,
    });
    view.watchObjects([
      { apiVersion: 'v1', kind: 'ConfigMap', namespace, name: 'bench-memory-ready' },
    ]);
    view.start();
    // A view that never syncs (e.g. the identity lacks RBAC for a resource the view
    // watches) must fail the run, not hang it.
    await view.whenSynced(AbortSignal.timeout(600_000));
    held = () => {
      let n = 0;
      for (const _ of view.pods()) n += 1;
      return n;
    };
    stop = () => view.stop();
  }
  const want = contender === 'baseline' ? 0 : expected;
  const deadline = performance.now() + 600_000;
  while (held() < want) {
    if (performance.now() > deadline) throw new Error(`${contender}: holds ${held()} of ${want}`);
    await sleep(50);
  }
  const syncMs = performance.now() - started;
  for (let i = 0; i < 3; i++) {
    gcNow();
    await sleep(200);
  }
  const samples: NodeJS.MemoryUsage[] = [];
  for (let i = 0; i < 5; i++) {
    await sleep(1000);
    gcNow();
    samples.push(process.memoryUsage());
  }
  const pick = (field: keyof NodeJS.MemoryUsage): number => median(samples.map((s) => s[field]));
  const report: ChildReport = {
    contender,
    pods: held(),
    syncMs,
    rss: pick('rss'),
    heapUsed: pick('heapUsed'),
    heapTotal: pick('heapTotal'),
    external: pick('external'),
    arrayBuffers: pick('arrayBuffers'),
    maxRss: process.resourceUsage().maxRSS * 1024,
    samples,
  };
  process.stdout.write(`${JSON.stringify(report)}\n`);
  await stop();
  process.exit(0);
}

function spawnChild(
  contender: ChildContender,
  kubeconfig: string,
  pods: number,
): Promise<ChildReport> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [...nodeFlags, '--expose-gc', self, '--child', contender],
      {
        env: { ...process.env, MEMORY_KUBECONFIG: kubeconfig, MEMORY_PODS: String(pods) },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`${contender} child exited ${code}`));
      try {
        resolve(JSON.parse(out.trim().split('\n').pop() ?? '') as ChildReport);
      } catch (error) {
        reject(new Error(`${contender} child printed no report: ${(error as Error).message}`));
      }
    });
  });
}

/** Extra V8/Node flags for every child (baseline too), e.g. a smaller young generation. */
const nodeFlags = (values['node-flags'] ?? '').split(/\s+/).filter((flag) => flag !== '');

/** Mebibytes (2^20 bytes), the unit of every memory figure this bench prints and docs/BENCHMARKS.md gives. */
const mib = (bytes: number): string => (bytes / 1024 / 1024).toFixed(1);

async function runParent(): Promise<void> {
  const sizes = (values.pods ?? '')
    .split(',')
    .map(Number)
    .sort((a, b) => a - b);
  // One count per size, the last repeated: --repeat 3,1 = 3 at the first size, 1 after.
  const repeatList = (values.repeat ?? '').split(',').map(Number);
  const repeatsAt = (index: number): number =>
    repeatList[Math.min(index, repeatList.length - 1)] as number;
  const concurrency = Number(values.concurrency);
  if (sizes.length === 0 || sizes.some((n) => !Number.isInteger(n) || n < 0))
    throw new Error(`--pods: a comma-separated list of pod counts, got ${values.pods}`);
  const contenders = (values.contenders ?? '').split(',') as Contender[];
  if (contenders.some((c) => !allContenders.includes(c)))
    throw new Error(`--contenders: some of ${allContenders.join(', ')}, got ${values.contenders}`);
  const settleMs = Number(values.settle);
  const baselineCheckout = values.baseline;
  if (contenders.includes('run-baseline') && !baselineCheckout)
    throw new Error('--contenders run-baseline needs --baseline DIR (another checkout)');
  const heapSnapshotDir = values['heap-snapshots'];
  const runEnv = Object.fromEntries(
    (values['run-env'] ?? []).map((pair) => {
      const at = pair.indexOf('=');
      if (at < 1) throw new Error(`--run-env: NAME=VALUE, got ${pair}`);
      return [pair.slice(0, at), pair.slice(at + 1)];
    }),
  );
  if (heapSnapshotDir) mkdirSync(heapSnapshotDir, { recursive: true });
  if (repeatList.some((n) => !Number.isInteger(n) || n < 1))
    throw new Error(`--repeat: positive integers, comma-separated, got ${values.repeat}`);
  if (!Number.isInteger(concurrency) || concurrency < 1)
    throw new Error('--concurrency: not a positive integer');
  const say = (line: string): void =>
    void process.stderr.write(`# memory ${new Date().toISOString().slice(11, 19)}: ${line}\n`);

  // Loaded here only: children must not carry the harness's modules.
  const { startControlPlane } = await import('../test/support/control-plane.ts');
  const cp = await startControlPlane({ name: 'bench-memory' });
  const admin = cp.kubeConfig('admin');
  const { startGitServer } = await import('../test/support/git-server.ts');
  const git = contenders.some(isRunContender) ? await startGitServer() : undefined;
  const policyUrl = git ? await holdAllPolicy(git, namespace, gate) : '';
  const started = new Date().toISOString();
  const creation: { from: number; to: number; millis: number; podsPerSecond: number }[] = [];
  const runs: ChildReport[] = [];
  const loads: number[][] = [];
  let podBytes: { served: number; trimmed: number } | undefined;
  const done: number[] = [];
  const report = (): void =>
    writeReport({
      done,
      runs,
      creation,
      loads,
      podBytes,
      started,
      repeats: values.repeat ?? '',
    });
  try {
    await ensureNamespace(admin, namespace);
    let have = 0;
    for (const size of sizes) {
      const add = size - have;
      say(`creating ${add} pods (${have} -> ${size}), concurrency ${concurrency}`);
      const millis = await createGatedPods(admin, namespace, add, gate, {
        prefix: `p${sizes.indexOf(size)}`,
        concurrency,
        build: (name, ns, g, i) => batchPod(name, ns, g, have + i),
      });
      creation.push({ from: have, to: size, millis, podsPerSecond: add / (millis / 1000) });
      say(
        `created ${add} pods in ${(millis / 1000).toFixed(1)} s (${(add / (millis / 1000)).toFixed(0)}/s)`,
      );
      have = size;
      if (!podBytes && size > 0) {
        const core = admin.makeApiClient(CoreV1Api);
        const page = await core.listNamespacedPod({ namespace, limit: 1 });
        const raw = await getRaw(
          admin,
          `/api/v1/namespaces/${namespace}/pods/${page.items[0]!.metadata!.name}`,
        );
        podBytes = {
          served: Buffer.byteLength(raw),
          trimmed: Buffer.byteLength(JSON.stringify(trimObject(JSON.parse(raw) as V1Pod))),
        };
        say(`one pod is ${podBytes.served} bytes of JSON as served, ${podBytes.trimmed} trimmed`);
      }
      for (let r = 0; r < repeatsAt(sizes.indexOf(size)); r++) {
        for (const contender of contenders) {
          loads.push(loadavg());
          const report = isRunContender(contender)
            ? runReport(
                contender,
                await measureTollgateRun({
                  cp,
                  git: git!,
                  policyUrl,
                  pods: size,
                  settleMs,
                  tag: `${size}-${r}-${Date.now().toString(36)}`,
                  extraNodeOptions:
                    contender === 'run-v8-young'
                      ? `${values['run-node-options'] ?? ''} ${v8YoungGeneration}`
                      : values['run-node-options'],
                  ...(contender === 'run-baseline' ? { checkout: baselineCheckout } : {}),
                  ...(contender === 'run' ? { env: runEnv } : {}),
                  ...(heapSnapshotDir ? { heapSnapshotDir } : {}),
                  ...(values['at-rest'] !== undefined
                    ? {
                        atRest: {
                          settleMs: Number(values['at-rest']),
                          timeoutMs: Number(values['at-rest-timeout']) * 1000,
                        },
                      }
                    : {}),
                }),
              )
            : await spawnChild(contender, cp.tollgateKubeconfig, size);
          runs.push({ ...report, pods: contender === 'baseline' ? size : report.pods });
          say(
            `${size} pods, repeat ${r + 1}, ${contender}: rss ${mib(report.rss)} MiB, heap ${mib(report.heapUsed)} MiB, peak ${mib(report.maxRss)} MiB, sync ${(report.syncMs / 1000).toFixed(1)} s, load ${loadavg()[0]!.toFixed(1)}`,
          );
        }
      }
      done.push(size);
      // Written after every size: a failure at a later size keeps the earlier figures.
      report();
    }
  } finally {
    await git?.close();
    await cp.stop();
  }
}

function runReport(contender: RunContender, run: RunMeasurement): ChildReport {
  const { nodeOptions: _flags, ...figures } = run;
  return {
    contender,
    ...figures,
    arrayBuffers: Number.NaN,
    samples: [],
  };
}

interface ParentState {
  readonly done: readonly number[];
  readonly runs: readonly ChildReport[];
  readonly creation: readonly { from: number; to: number; millis: number; podsPerSecond: number }[];
  readonly loads: readonly number[][];
  readonly podBytes: { served: number; trimmed: number } | undefined;
  readonly started: string;
  readonly repeats: string;
}

function writeReport(state: ParentState): void {
  const { done, runs, creation, loads, podBytes, started, repeats } = state;
  const contenders = allContenders.filter((c) => runs.some((r) => r.contender === c));
  const summary = done.map((size) => {
    const of = (c: Contender, f: 'rss' | 'heapUsed' | 'heapTotal' | 'maxRss' | 'syncMs'): number =>
      median(runs.filter((r) => r.contender === c && r.pods === size).map((r) => r[f]));
    const row = Object.fromEntries(
      contenders.map((c) => [
        c,
        {
          rss: of(c, 'rss'),
          heapUsed: of(c, 'heapUsed'),
          heapTotal: of(c, 'heapTotal'),
          maxRss: of(c, 'maxRss'),
          syncMs: of(c, 'syncMs'),
        },
      ]),
    ) as Record<
      Contender,
      { rss: number; heapUsed: number; heapTotal: number; maxRss: number; syncMs: number }
    >;
    // NaN where a contender was not run or there are no pods: JSON null, an empty cell.
    const perPod = (c: Contender, f: 'rss' | 'heapUsed'): number =>
      row[c] && row.baseline && size > 0 ? (row[c][f] - row.baseline[f]) / size : Number.NaN;
    const ratioOf = (a: number, b: number): number => (row.tollgate && row.plain ? a / b : NaN);
    return {
      pods: size,
      ...row,
      bytesPerPod: {
        plain: { rss: perPod('plain', 'rss'), heapUsed: perPod('plain', 'heapUsed') },
        tollgate: { rss: perPod('tollgate', 'rss'), heapUsed: perPod('tollgate', 'heapUsed') },
      },
      ratio: {
        rss: ratioOf(row.tollgate?.rss ?? NaN, row.plain?.rss ?? NaN),
        rssAboveBaseline: ratioOf(perPod('tollgate', 'rss'), perPod('plain', 'rss')),
        heapAboveBaseline: ratioOf(perPod('tollgate', 'heapUsed'), perPod('plain', 'heapUsed')),
      },
    };
  });

  const result = {
    bench: 'memory',
    started,
    finished: new Date().toISOString(),
    machine: { cpus: cpus().length, memory: totalmem(), node: process.version },
    nodeFlags,
    loadAverages: loads,
    pod: { shape: 'batchPod in bench/memory.ts', ...podBytes },
    repeats,
    creation,
    runs: runs.map(({ samples: _samples, ...rest }) => rest),
    summary,
  };
  const dir = join(here, 'results');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `memory-${started.replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);

  const lines = [
    `| pods | contender | RSS MiB | heapUsed MiB | heapTotal MiB | peak RSS MiB | sync s | RSS above baseline, B/pod | heap above baseline, B/pod |`,
    `|---:|---|---:|---:|---:|---:|---:|---:|---:|`,
  ];
  for (const s of summary) {
    for (const c of contenders) {
      const perPod = c === 'plain' || c === 'tollgate' ? s.bytesPerPod[c] : undefined;
      const cell = (n: number | undefined): string =>
        n === undefined || Number.isNaN(n) ? '' : n.toFixed(0);
      const figures = s[c];
      lines.push(
        `| ${s.pods} | ${c} | ${mib(figures.rss)} | ${mib(figures.heapUsed)} | ${mib(figures.heapTotal)} | ${mib(figures.maxRss)} | ${(figures.syncMs / 1000).toFixed(1)} | ${cell(perPod?.rss)} | ${cell(perPod?.heapUsed)} |`,
      );
    }
  }
  for (const s of summary.filter((s) => s.run && s['run-baseline']))
    lines.push(
      `tollgate run / run-baseline at ${s.pods} pods: RSS ${(s.run.rss / s['run-baseline'].rss).toFixed(2)}, heapUsed ${(s.run.heapUsed / s['run-baseline'].heapUsed).toFixed(2)}`,
    );
  for (const run of runs.filter((r) => r.resident))
    lines.push(
      `${run.contender} at ${run.pods} pods, resident MiB: node binary ${mib(run.resident!.nodeBinary)}, malloc [heap] ${mib(run.resident!.mallocHeap)}, anonymous ${mib(run.resident!.anonymous)}, files ${mib(run.resident!.files)}, other ${mib(run.resident!.other)}`,
    );
  for (const run of runs.filter((r) => r.heap)) {
    lines.push(
      `${run.contender} at ${run.pods} pods, heap snapshot ${run.heap!.file}: ${mib(run.heap!.totalBytes)} MiB`,
    );
    for (const group of run.heap!.groups.slice(0, 15))
      lines.push(
        `  ${mib(group.bytes).padStart(7)} MiB ${String(group.count).padStart(8)}  ${group.key}`,
      );
  }
  for (const run of runs.filter((r) => r.atRest))
    lines.push(
      run.atRest!.rss === undefined
        ? `${run.contender} at ${run.pods} pods: not quiet within the wait, no RSS at rest`
        : `${run.contender} at ${run.pods} pods at rest: RSS ${mib(run.atRest!.rss)} MiB, median of one sample a second for ${values['at-rest']} ms (least ${mib(run.atRest!.min ?? Number.NaN)}, mean ${mib(run.atRest!.mean ?? Number.NaN)}, most ${mib(run.atRest!.max ?? Number.NaN)}; quiet ${((run.atRest!.quietAfterMs ?? 0) / 1000).toFixed(0)} s after the first samples; ${run.passes} gate-release passes by the first samples, ${run.atRest!.passes} at rest)`,
    );
  for (const s of summary.filter((s) => s.run))
    lines.push(
      `tollgate run holding ${s.pods} pods: RSS ${mib(s.run.rss)} MiB, peak ${mib(s.run.maxRss)} MiB (target: under 150 at 10,000, in the MiB docs/BENCHMARKS.md calls MB)${s['run-v8-young'] ? `; with V8's own young generation ${mib(s['run-v8-young'].rss)} MiB` : ''}`,
    );
  for (const s of summary.filter((s) => !Number.isNaN(s.ratio.rss)))
    lines.push(
      `tollgate/plain at ${s.pods}: RSS ${s.ratio.rss.toFixed(2)}, RSS above baseline ${s.ratio.rssAboveBaseline.toFixed(2)}, heap above baseline ${s.ratio.heapAboveBaseline.toFixed(2)}`,
    );
  for (const c of creation)
    lines.push(
      `created ${c.to - c.from} pods in ${(c.millis / 1000).toFixed(0)} s (${c.podsPerSecond.toFixed(0)}/s)`,
    );
  process.stdout.write(
    `${lines.join('\n')}\nnode flags: ${nodeFlags.join(' ') || '(none)'}\nresults: ${file}\n`,
  );
}

if (values.child) {
  if (!childContenders.includes(values.child as ChildContender))
    throw new Error(`--child: one of ${childContenders.join(', ')}`);
  await runChild(values.child as ChildContender);
} else {
  await runParent();
}
