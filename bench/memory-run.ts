/**
 * The `run` contender of bench/memory.ts: a whole `tollgate run` process, started as the
 * image starts it (`node bin/tollgate.js run` from the tree the image holds in /app: src/
 * compiled to JavaScript where the checkout's image does that; the image's malloc
 * tunables and NODE_ENV, the deployment's NODE_OPTIONS), with a
 * policy that holds every pod of the bench namespace (a tenant budget of 0 pods), a real
 * Git server for policy and audit, and its own lease. Its resident memory is read from
 * /proc once it holds all N pods and has planned, then settled; peak is VmHWM.
 *
 * Everything a real replica does with N held pods is in the figure: the view, the
 * gate-release passes, Hold records pushed to the audit repository, the Released pod
 * condition written through the dispatcher, metrics, Events, leader election.
 */
import { execFileSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ControlPlane } from '../test/support/control-plane.ts';
import { pushTree, type GitServer } from '../test/support/git-server.ts';
import { shippedRun } from '../test/soak/shipped-run.ts';
import { groupsOf } from './audit-heap-diff.ts';
import { benchPolicyFiles, median, rssOf } from './lib.ts';
import {
  IMAGE_NODE_OPTIONS,
  SHIPPED_LEASE,
  spawnTollgate,
  stopReplica,
} from './tollgate-process.ts';

const thisCheckout = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The image's variables that shape a process's memory: its allocator and its tunables. */
const memoryVariables = new Set(['GLIBC_TUNABLES', 'LD_PRELOAD', 'MALLOC_CONF', 'NODE_ENV']);

/**
 * What the image's own environment (the checkout's scripts/build-image.sh) sets that shapes
 * a process's memory: the preloaded allocator and its settings, glibc's malloc tunables,
 * NODE_ENV. Not PATH, HOME or the cache folder.
 */
export function imageMemoryEnv(checkout: string): Record<string, string> {
  const { imageEnv } = shippedRun(checkout);
  return Object.fromEntries(Object.entries(imageEnv).filter(([name]) => memoryVariables.has(name)));
}

/**
 * The tree the checkout's image holds in /app, built in `dir`: src/ compiled to JavaScript
 * (the checkout's scripts/compile-js.sh), bin/, schemas/ and package.json, the checkout's
 * node_modules linked. A checkout whose image runs its TypeScript (no compile-js.sh) is
 * run as it is.
 */
export function imageApp(checkout: string, dir: string): string {
  const compile = join(checkout, 'scripts/compile-js.sh');
  if (!existsSync(compile)) return checkout;
  mkdirSync(dir, { recursive: true });
  execFileSync('bash', [compile, dir], { stdio: 'pipe' });
  for (const part of ['bin', 'schemas'])
    cpSync(join(checkout, part), join(dir, part), { recursive: true });
  cpSync(join(checkout, 'package.json'), join(dir, 'package.json'));
  symlinkSync(join(checkout, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

export interface RunMeasurement {
  readonly pods: number;
  readonly syncMs: number;
  readonly rss: number;
  readonly heapUsed: number;
  readonly heapTotal: number;
  /** Memory V8 holds outside its heap for JavaScript objects: Buffers and other ArrayBuffers (nodejs_external_memory_bytes). */
  readonly external: number;
  readonly maxRss: number;
  readonly nodeOptions: string;
  /** Resident memory by kind of mapping (/proc/PID/smaps) at the last sample. */
  readonly resident: ResidentBreakdown;
  /** The heap snapshot taken after sampling, and its largest groups by constructor (self size). */
  readonly heap?: HeapSummary;
  /**
   * With `atRest`: the RSS (median of five samples a second apart) once the process went
   * quiet (under 5% of a core for 5 s: its Released conditions written, only Events left
   * trickling out) and `atRest.settleMs` more passed; how long after the first samples it
   * went quiet. Undefined fields when it did not go quiet within `atRest.timeoutMs`.
   */
  readonly atRest?: {
    /** The median of one sample a second over the settle window; `min`, `mean`, `max` of the same samples. */
    readonly rss?: number;
    readonly min?: number;
    readonly mean?: number;
    readonly max?: number;
    readonly quietAfterMs?: number;
    readonly passes?: number;
  };
  /** Gate-release passes the process ran up to its last sample (tollgate_gate_release_pass_seconds). */
  readonly passes: number;
}

/** Resident bytes of a process by kind of mapping. */
export interface ResidentBreakdown {
  /** The Node binary's own mapped pages (code and data). */
  readonly nodeBinary: number;
  /** glibc malloc's main arena (`[heap]`). */
  readonly mallocHeap: number;
  /** Anonymous mappings: V8's heap, malloc's thread arenas, WebAssembly memory. */
  readonly anonymous: number;
  /** Shared libraries and other mapped files. */
  readonly files: number;
  /** Stacks and the kernel's own ([vdso], [vvar]...). */
  readonly other: number;
}

export interface HeapSummary {
  readonly file: string;
  readonly totalBytes: number;
  readonly groups: readonly { key: string; count: number; bytes: number }[];
}

/** Sums the Rss of each mapping of /proc/PID/smaps into the kinds of `ResidentBreakdown`. */
export function residentBreakdownOf(smaps: string): ResidentBreakdown {
  const sums = { nodeBinary: 0, mallocHeap: 0, anonymous: 0, files: 0, other: 0 };
  let kind: keyof typeof sums = 'other';
  for (const line of smaps.split('\n')) {
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (header) {
      kind = mappingKind(header[1]!.trim());
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) sums[kind] += Number(rss[1]) * 1024;
  }
  return sums;
}

function mappingKind(path: string): keyof ResidentBreakdown {
  if (path === '' || path.startsWith('[anon')) return 'anonymous';
  if (path === '[heap]') return 'mallocHeap';
  if (path.startsWith('[')) return 'other';
  return /\/node$/.test(path) ? 'nodeBinary' : 'files';
}

function residentOf(pid: number): ResidentBreakdown {
  try {
    return residentBreakdownOf(readFileSync(`/proc/${pid}/smaps`, 'utf8'));
  } catch {
    return { nodeBinary: NaN, mallocHeap: NaN, anonymous: NaN, files: NaN, other: NaN };
  }
}

/** One value of a Prometheus text exposition, or NaN. */
/** Gate-release passes so far, from a scrape. */
function passesOf(text: string): number {
  return metric(text, 'tollgate_gate_release_pass_seconds_count');
}

function metric(text: string, name: string, labels = ''): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : Number.NaN;
}

/** Pods the last gate-release pass counted as gated (tenant bench), or NaN before a pass. */
function gatedOf(text: string): number {
  const line = text
    .split('\n')
    .find((l) => l.startsWith('tollgate_gated_pods{') && l.includes('tenant="bench"'));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : Number.NaN;
}

async function scrape(url: string): Promise<string> {
  try {
    const response = await fetch(`${url}/metrics`);
    return response.ok ? await response.text() : '';
  } catch {
    return '';
  }
}

/** CPU seconds (user and system) the process spent so far, from /proc/PID/stat. */
function cpuSecondsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of stat(5), 12 and 13 after the command's ")".
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * Waits until the process used under 5% of a core over 5 s, then samples its RSS once a
 * second for `settleMs` (at least five samples): the median, and the least, mean and
 * most of them. A process at rest that still holds pods goes on passing over them and
 * the memory reducer collects it every so often, so its RSS at rest is a sawtooth: a
 * few samples at the end read wherever the tooth was.
 */
async function rssAtRest(
  pid: number,
  options: { readonly settleMs: number; readonly timeoutMs: number },
): Promise<{ rss?: number; min?: number; mean?: number; max?: number; quietAfterMs?: number }> {
  const began = Date.now();
  let cpu = cpuSecondsOf(pid);
  for (;;) {
    if (Date.now() - began > options.timeoutMs) return {};
    await sleep(5_000);
    const now = cpuSecondsOf(pid);
    const busy = (now - cpu) / 5;
    cpu = now;
    if (busy < 0.05) break;
  }
  const quietAfterMs = Date.now() - began;
  const samples: number[] = [];
  for (let i = 0; i < Math.max(5, Math.round(options.settleMs / 1000)); i++) {
    await sleep(1000);
    samples.push(rssOf(pid));
  }
  return {
    rss: median(samples),
    min: Math.min(...samples),
    mean: samples.reduce((sum, x) => sum + x, 0) / samples.length,
    max: Math.max(...samples),
    quietAfterMs,
  };
}

function peakRssOf(pid: number): number {
  try {
    const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** Pushes the policy that holds every pod of `namespace` (budget 0), once per bench run. */
export async function holdAllPolicy(
  git: GitServer,
  namespace: string,
  gate: string,
): Promise<string> {
  const url = git.createRepo('policy-memory');
  await pushTree(
    git,
    url,
    benchPolicyFiles({
      namespaces: [namespace],
      // Pacing far above anything: the budget of 0 pods is what holds them.
      pods: 1_000_000,
      gate,
      gatePolicy: 'bench-ready',
      conditions: [{ type: 'Budget' }],
      budgetPods: 0,
    }),
    { message: 'memory bench: hold every pod' },
  );
  return url;
}

export async function measureTollgateRun(options: {
  readonly cp: ControlPlane;
  readonly git: GitServer;
  readonly policyUrl: string;
  readonly pods: number;
  readonly settleMs: number;
  readonly tag: string;
  /** Added to the shipped NODE_OPTIONS, e.g. a control row's own young-generation size. */
  readonly extraNodeOptions?: string;
  /** The checkout whose bin/tollgate.js and image environment to run (a same-run baseline); default this one. */
  readonly checkout?: string;
  /** Where to write a V8 heap snapshot of the process after sampling (SIGUSR2); none without. */
  readonly heapSnapshotDir?: string;
  /** More environment of the process, over the image's. */
  readonly env?: Record<string, string>;
  /** Also measure the RSS at rest (see `RunMeasurement.atRest`). */
  readonly atRest?: { readonly settleMs: number; readonly timeoutMs: number };
}): Promise<RunMeasurement> {
  const { cp, git, policyUrl, pods, settleMs, tag, heapSnapshotDir } = options;
  const checkout = options.checkout ?? thisCheckout;
  const snapshotFlags = heapSnapshotDir
    ? `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${heapSnapshotDir}`
    : '';
  const nodeOptions =
    `${IMAGE_NODE_OPTIONS} ${options.extraNodeOptions ?? ''} ${snapshotFlags}`.trim();
  const work = mkdtempSync(join(tmpdir(), 'tollgate-memory-run-'));
  const replica = await spawnTollgate({
    cli: join(imageApp(checkout, join(work, 'app')), 'bin/tollgate.js'),
    // TMPDIR: an empty compile cache, as at a pod's first start (its /tmp emptyDir is new).
    env: { ...imageMemoryEnv(checkout), TMPDIR: work, ...options.env },
    identity: `memory-${tag}`,
    cp,
    git,
    policyUrl,
    auditUrl: git.createRepo(`audit-memory-${tag}`),
    leaseName: `memory-${tag}`,
    timings: SHIPPED_LEASE,
    nodeOptions,
    work,
  });
  try {
    const pid = replica.child.pid!;
    const deadline = Date.now() + 900_000;
    let text = '';
    while (metric(text, 'tollgate_informer_objects', '{resource="pods"}') !== pods) {
      if (replica.child.exitCode !== null)
        throw new Error(`tollgate run exited ${replica.child.exitCode}`);
      if (Date.now() > deadline) throw new Error(`tollgate run: does not hold ${pods} pods`);
      await sleep(200);
      text = await scrape(replica.url);
    }
    const syncMs = Date.now() - replica.spawnedAt;
    // A pass over all of them has run: it publishes the gated count (no release is logged:
    // the budget holds every pod).
    while (gatedOf(text) !== pods) {
      if (replica.child.exitCode !== null)
        throw new Error(`tollgate run exited ${replica.child.exitCode}`);
      if (Date.now() > deadline) throw new Error(`tollgate run: no pass over ${pods} pods`);
      await sleep(200);
      text = await scrape(replica.url);
    }
    await sleep(settleMs);
    const samples: { rss: number; heapUsed: number; heapTotal: number; external: number }[] = [];
    let resident = residentOf(pid);
    for (let i = 0; i < 5; i++) {
      await sleep(1000);
      const now = await scrape(replica.url);
      samples.push({
        rss: rssOf(pid),
        heapUsed: metric(now, 'nodejs_heap_size_used_bytes'),
        heapTotal: metric(now, 'nodejs_heap_size_total_bytes'),
        external: metric(now, 'nodejs_external_memory_bytes'),
      });
      resident = residentOf(pid);
      text = now;
    }
    // With heap snapshots asked for, the mappings and metrics are kept beside them.
    if (heapSnapshotDir) keepBeside(heapSnapshotDir, tag, pid, text);
    const atRest = options.atRest
      ? { ...(await rssAtRest(pid, options.atRest)), passes: passesOf(await scrape(replica.url)) }
      : undefined;
    if (heapSnapshotDir && atRest)
      keepBeside(heapSnapshotDir, `${tag}-at-rest`, pid, await scrape(replica.url));
    const maxRss = peakRssOf(pid);
    const heap = heapSnapshotDir ? await heapSnapshotOf(replica, heapSnapshotDir) : undefined;
    return {
      pods: metric(text, 'tollgate_informer_objects', '{resource="pods"}'),
      syncMs,
      rss: median(samples.map((s) => s.rss)),
      heapUsed: median(samples.map((s) => s.heapUsed)),
      heapTotal: median(samples.map((s) => s.heapTotal)),
      external: median(samples.map((s) => s.external)),
      maxRss,
      nodeOptions,
      resident,
      passes: passesOf(text),
      ...(heap ? { heap } : {}),
      ...(atRest ? { atRest } : {}),
    };
  } finally {
    await stopReplica(replica, 'SIGTERM');
  }
}

/** The process's /proc/PID/smaps and a scrape of its metrics, as `smaps-<name>.txt` and `metrics-<name>.txt` in `dir`. */
function keepBeside(dir: string, name: string, pid: number, metrics: string): void {
  writeFileSync(join(dir, `smaps-${name}.txt`), readFileSync(`/proc/${pid}/smaps`));
  writeFileSync(join(dir, `metrics-${name}.txt`), metrics);
}

/**
 * Has the process write a heap snapshot (SIGUSR2, `--heapsnapshot-signal`), waits until its
 * metrics answer again (the snapshot is written on the main thread) and sums it by
 * constructor: the largest groups by self size.
 */
async function heapSnapshotOf(
  replica: { child: { pid?: number; kill(signal: NodeJS.Signals): boolean }; url: string },
  dir: string,
): Promise<HeapSummary> {
  const before = new Set(readdirSync(dir));
  replica.child.kill('SIGUSR2');
  const deadline = Date.now() + 300_000;
  let file: string | undefined;
  while (!file || (await scrape(replica.url)) === '') {
    if (Date.now() > deadline) throw new Error('tollgate run: no heap snapshot within 300 s');
    await sleep(500);
    file ??= readdirSync(dir).find((f) => f.endsWith('.heapsnapshot') && !before.has(f));
  }
  const path = join(dir, file);
  const groups = [...groupsOf(path).entries()]
    .map(([key, group]) => ({ key, ...group }))
    .sort((a, b) => b.bytes - a.bytes);
  return {
    file: path,
    totalBytes: groups.reduce((sum, group) => sum + group.bytes, 0),
    groups: groups.slice(0, 25),
  };
}
