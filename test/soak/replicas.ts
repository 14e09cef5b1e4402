/**
 * `tollgate run` replicas as real processes started as deploy/ ships them (entrypoint, args,
 * ConfigMap, variables, Secrets as files, grace period: test/soak/shipped-run.ts), as the
 * unprivileged `tollgate` identity, restarted after a kill
 * the way a Deployment restarts a pod. Each replica's heap, RSS and open fds are read
 * from its own /metrics (prom-client's process and Node.js series) and /proc; once a
 * minute its live heap after a full collection, through the V8 inspector the soak
 * starts it with (`--inspect` on loopback, a Node flag: the product's own flags stay as
 * deploy/ ships them).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { CoordinationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { freePort } from '../e2e/deploy/tools.ts';
import { metricValue } from '../e2e/gate-release/harness.ts';
import { eventually } from '../support/eventually.ts';
import { replicaLaunch, shippedRun, type ReplicaLaunch } from './shipped-run.ts';
import { liveHeap, type LiveHeap } from './inspector.ts';

const shipped = shippedRun();
export const leaseName = shipped.configMap.TOLLGATE_LEASE_NAME ?? 'tollgate';
export const leaseNamespace = 'tollgate-system';

export interface ReplicaConfig {
  readonly kubeconfig: string;
  readonly policyUrl: string;
  readonly auditUrl: string;
  readonly gitToken: string;
  /** The resize state key every replica shares (the Secret tollgate-resize-state-key). */
  readonly resizeStateKey: string;
  readonly work: string;
}

export interface MemorySample {
  readonly at: number;
  readonly identity: string;
  /** Which start of this replica (0 = first): a restart begins a new series. */
  readonly incarnation: number;
  readonly rssBytes: number;
  readonly heapUsedBytes: number;
  /**
   * Bytes live on the heap after a full collection (inspector.ts), read once a minute per
   * process; NaN in the samples between and when the replica could not answer.
   */
  readonly heapLiveBytes: number;
  /**
   * Of the live heap, bytes of V8's compiled code (bytecode and machine code: inspector.ts
   * `codeSpaces`), read with it; NaN when it is.
   */
  readonly heapCodeBytes: number;
  /** Pods in the replica's own cluster view (tollgate_informer_objects): what its memory grows with. */
  readonly viewPods: number;
  readonly openFds: number;
  readonly cloneBytes: number;
}

/** Every replica process still running: killed when the soak exits, however it ends. */
const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/**
 * How often the live heap is read: each reading forces a full collection in the replica,
 * which a sample every 15 s would turn into a different process than the one shipped.
 * Every fourth sample (15 s apart): a reading is due a little before the full minute,
 * so a sample that comes a few milliseconds early does not push it to the next one.
 */
const liveHeapEveryMs = 60_000 - 5_000;

/** Like the kubelet's CrashLoopBackOff, shorter: 2 s doubling up to 20 s. */
const crashBackoffMs = (crashes: number): number => Math.min(2_000 * 2 ** crashes, 20_000);

export class Replica {
  readonly identity: string;
  incarnation = -1;
  child: ChildProcess | undefined;
  url = '';
  /** The V8 inspector's port of the running process (loopback only). */
  inspectPort = 0;
  /** When the live heap of this incarnation was last read (0: not yet). */
  #liveHeapAt = 0;
  exits: (number | string | null)[] = [];
  /** Exits nobody asked for (the replica gave up by itself), each followed by a restart. */
  crashes = 0;
  /** SIGTERMs the process outlived its grace period for (then SIGKILLed). */
  graceExceeded = 0;
  readonly #config: ReplicaConfig;
  readonly #note: (what: string) => void;
  #exited: Promise<void> = Promise.resolve();
  /** While a SIGTERM's shutdown runs: ends with the process. */
  #terminating: Promise<void> | undefined;
  #exitExpected = false;
  #stopped = false;
  #starting = false;

  constructor(identity: string, config: ReplicaConfig, note: (what: string) => void) {
    this.identity = identity;
    this.#config = config;
    this.#note = note;
  }

  get running(): boolean {
    return (
      this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null
    );
  }

  /** The folder standing for the Deployment's Git cache volume (TOLLGATE_GIT_CACHE_DIR). */
  get cacheDir(): string {
    return this.#launch(0).env.TOLLGATE_GIT_CACHE_DIR!;
  }

  /** The Deployment's grace period: how long a SIGTERM may take before the SIGKILL. */
  get terminationGraceMs(): number {
    return shipped.terminationGraceSeconds * 1000;
  }

  /**
   * Starts a process unless one runs or is starting: a crash restart and the chaos's own
   * restart may ask at once, and two processes of one identity would share a lease holder.
   */
  async start(): Promise<void> {
    if (this.running || this.#starting || this.#stopped) return;
    this.#starting = true;
    const [port, inspectPort] = await Promise.all([freePort(), freePort()]).finally(
      () => (this.#starting = false),
    );
    this.incarnation += 1;
    this.#liveHeapAt = 0;
    const launch = this.#launch(port);
    for (const folder of launch.folders) mkdirSync(folder, { recursive: true });
    for (const file of launch.files)
      if (!existsSync(file.path)) writeFileSync(file.path, file.content, { mode: file.mode });
    const out = openSync(this.logFile, 'a');
    // Only what deploy/ ships and the host's PATH: nothing TOLLGATE_* or KUBECONFIG from
    // the outer shell.
    const child = spawn(launch.command, [`--inspect=127.0.0.1:${inspectPort}`, ...launch.args], {
      env: launch.env,
      stdio: ['ignore', out, out],
    });
    closeSync(out);
    this.child = child;
    live.add(child);
    this.url = `http://127.0.0.1:${port}`;
    this.inspectPort = inspectPort;
    this.#exitExpected = false;
    this.#exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        live.delete(child);
        this.exits.push(signal ?? code);
        if (!this.#exitExpected && !this.#stopped) this.#restartAfterCrash(signal ?? code);
        resolve();
      }),
    );
  }

  #restartAfterCrash(exit: number | string | null): void {
    const delay = crashBackoffMs(this.crashes);
    this.crashes += 1;
    this.#note(
      `${this.identity} exited by itself (${exit}; log ${this.logFile}); restarted in ${delay} ms`,
    );
    setTimeout(() => {
      if (this.#stopped || this.running) return;
      void this.start().then(() => this.#note(`${this.identity} restarted after its exit`));
    }, delay);
  }

  /** deploy/ as shipped (test/soak/shipped-run.ts), on this host, metrics on `port`. */
  #launch(port: number): ReplicaLaunch {
    const c = this.#config;
    return replicaLaunch(shipped, {
      identity: this.identity,
      folder: join(c.work, this.identity),
      kubeconfig: c.kubeconfig,
      hostEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      overlay: {
        TOLLGATE_POLICY_REPO: c.policyUrl,
        TOLLGATE_AUDIT_REPO: c.auditUrl,
        TOLLGATE_METRICS_ADDRESS: `127.0.0.1:${port}`,
      },
      secrets: {
        'tollgate-git': { token: c.gitToken },
        'tollgate-resize-state-key': { keys: c.resizeStateKey },
      },
    });
  }

  get logFile(): string {
    return join(this.#config.work, `${this.identity}-${this.incarnation}.log`);
  }

  /** When each leader term of every incarnation began (its "became leader" lines), epoch ms. */
  termStarts(): number[] {
    const starts: number[] = [];
    for (let incarnation = 0; incarnation <= this.incarnation; incarnation += 1) {
      const file = join(this.#config.work, `${this.identity}-${incarnation}.log`);
      const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
      starts.push(...termStartsIn(text));
    }
    return starts;
  }

  /** Ready (/readyz 200) within the timeout, or an error naming the log. */
  async ready(timeoutMs = 120_000): Promise<void> {
    await eventually(
      `${this.identity} ready (log ${this.logFile})`,
      async () => (await fetch(`${this.url}/readyz`).catch(() => undefined))?.status === 200,
      { timeoutMs, intervalMs: 250 },
    );
  }

  /** Sends a signal; SIGKILL and SIGTERM are the soak's own kills (no crash restart). */
  signal(name: NodeJS.Signals): void {
    if (!this.running) return;
    if (name === 'SIGKILL' || name === 'SIGTERM') this.#exitExpected = true;
    this.child!.kill(name);
  }

  exited(): Promise<void> {
    return this.#exited;
  }

  /**
   * SIGTERM, then SIGKILL once the Deployment's grace period has passed, as the kubelet
   * stops a pod; an overrun is counted (`graceExceeded`).
   */
  async terminate(): Promise<void> {
    if (!this.running) return;
    this.#terminating = this.#terminate(this.child!);
    try {
      await this.#terminating;
    } finally {
      this.#terminating = undefined;
    }
  }

  /** The shutdown a SIGTERM started, while it runs (undefined otherwise). */
  shuttingDown(): Promise<void> | undefined {
    return this.#terminating;
  }

  async #terminate(child: ChildProcess): Promise<void> {
    this.#exitExpected = true;
    child.kill('SIGCONT');
    child.kill('SIGTERM');
    const timer = setTimeout(() => {
      this.graceExceeded += 1;
      this.#note(`${this.identity} outlived its ${this.terminationGraceMs} ms grace: SIGKILL`);
      child.kill('SIGKILL');
    }, this.terminationGraceMs);
    await this.#exited;
    clearTimeout(timer);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.terminate();
  }

  /** Its /metrics text, or undefined while it cannot answer (killed, paused). */
  async metrics(): Promise<string | undefined> {
    if (!this.running) return undefined;
    return fetch(`${this.url}/metrics`, { signal: AbortSignal.timeout(3000) })
      .then((r) => r.text())
      .catch(() => undefined);
  }

  /**
   * How often this process's informers relisted after 410 Gone (the sum over resources of
   * tollgate_informer_restarts_total{reason="gone"}), or undefined when it cannot answer.
   */
  async goneRelists(): Promise<number | undefined> {
    const text = await this.metrics();
    if (text === undefined) return undefined;
    return text
      .split('\n')
      .filter(
        (l) => l.startsWith('tollgate_informer_restarts_total{') && l.includes('reason="gone"'),
      )
      .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  }

  /** Decisions it accepted but has not pushed yet (tollgate_audit_backlog), if it answers. */
  async auditBacklog(): Promise<number | undefined> {
    const text = await this.metrics();
    return text === undefined ? undefined : metricValue(text, 'tollgate_audit_backlog');
  }

  /** One sample, or undefined while the replica cannot answer (killed, paused). */
  async sample(): Promise<MemorySample | undefined> {
    const text = await this.metrics();
    if (text === undefined) return undefined;
    const incarnation = this.incarnation;
    const heap = await this.#liveHeapIfDue(incarnation);
    return {
      at: Date.now(),
      identity: this.identity,
      incarnation,
      rssBytes: metricValue(text, 'process_resident_memory_bytes') ?? Number.NaN,
      heapUsedBytes: metricValue(text, 'nodejs_heap_size_used_bytes') ?? Number.NaN,
      heapLiveBytes: heap.liveBytes,
      heapCodeBytes: heap.codeBytes,
      viewPods: metricValue(text, 'tollgate_informer_objects{resource="pods"}') ?? Number.NaN,
      openFds: countFds(this.child!.pid!),
      cloneBytes: duBytes(this.cacheDir),
    };
  }

  /**
   * The live heap when a minute has passed since the last reading of this process (NaN
   * otherwise, or when it did not answer: a failed reading is tried again next sample).
   */
  async #liveHeapIfDue(incarnation: number): Promise<LiveHeap> {
    const none = { liveBytes: Number.NaN, codeBytes: Number.NaN };
    const now = Date.now();
    if (this.#liveHeapAt !== 0 && now - this.#liveHeapAt < liveHeapEveryMs) return none;
    const heap = await liveHeap(this.inspectPort);
    // A restart while the inspector answered: the reading is of the process before it.
    if (incarnation !== this.incarnation) return none;
    if (!Number.isNaN(heap.liveBytes)) this.#liveHeapAt = now;
    return heap;
  }
}

/** The times of a log's "became leader" lines (tollgate's JSON log), epoch ms. */
export function termStartsIn(log: string): number[] {
  const starts: number[] = [];
  for (const line of log.split('\n')) {
    if (!line.includes('"msg":"became leader"')) continue;
    try {
      const at = Date.parse((JSON.parse(line) as { time?: string }).time ?? '');
      if (Number.isFinite(at)) starts.push(at);
    } catch {
      // A line cut short by a SIGKILL is not a record.
    }
  }
  return starts;
}

function countFds(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return Number.NaN;
  }
}

function duBytes(dir: string): number {
  try {
    return Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0]);
  } catch {
    return Number.NaN;
  }
}

/** The replica holding the Lease now (undefined when nobody holds it). */
export async function leaseHolder(admin: KubeConfig): Promise<string | undefined> {
  const lease = await admin
    .makeApiClient(CoordinationV1Api)
    .readNamespacedLease({ namespace: leaseNamespace, name: leaseName })
    .catch(() => undefined);
  return lease?.spec?.holderIdentity ?? undefined;
}
