/**
 * `npm run demo`: tollgate end to end on one machine, nothing to install but the repo.
 *
 * Boots the local control plane of the e2e harness and the simulated kubelet (four nodes,
 * two with the trainer image), a real Prometheus scraping a small exporter that stands in
 * for the API pods' own metrics, serves policy-examples/ as a Git repository over HTTP
 * (plus one commit that shortens the api-frontend ResizePolicy's window and cooldown so
 * a resize shows within a minute), starts the real `tollgate run` as a child process
 * (audit to the same repository's tollgate/audit branch, resize signals from that
 * Prometheus), creates a batch across the example tenants, shows live progress, raises
 * the API pods' load and flips the external-readiness ConfigMap midway, prints the audit
 * history from Git and shuts everything down.
 *
 * It lives in scripts/ and not src/cli/ because it needs test/support (src never imports
 * test). `--short` (or TOLLGATE_DEMO_SHORT=1) makes a few hundred pods and checks the
 * expected releases and resizes: exit 0 only if they happened, so the demo is also a test.
 * Failure modes: no `prometheus` binary -> exits 1 naming the apt-get command (`npm run
 * demo` installs it first where it can, scripts/ensure-debian-packages.sh).
 */
import { spawn, execFile } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseDocument } from 'yaml';
import {
  ApiextensionsV1Api,
  CoreV1Api,
  RbacAuthorizationV1Api,
  type KubeConfig,
  type V1Pod,
} from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '../test/support/control-plane.ts';
import { SimulatedKubelet } from '../test/support/kubelet.ts';
import { pushTree, startGitServer, type GitServer } from '../test/support/git-server.ts';
import { startPrometheus, type TestPrometheus } from '../test/support/prometheus.ts';
import { createResourceSource, type ResourceSource } from '../src/cluster/source.ts';
import { parseQuantity } from '../src/lib/quantity.ts';
import { systemClock } from '../src/lib/clock.ts';
import {
  APPROVAL_HOURS,
  APPROVED,
  ProgressLines,
  approvalFile,
  approvalMergeAt,
} from './demo-time.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'src/cli/main.ts');
const run = promisify(execFile);
const short = process.argv.includes('--short') || process.env.TOLLGATE_DEMO_SHORT === '1';

const GANGS = short ? 4 : 40;
const GANG_SIZE = 8;
const LOADS = short ? 150 : 2500;
const ML_BUDGET = 64; // policy-examples/tenants/ml-training.yaml
const TRAINER_IMAGE = 'registry.example.com/ml/trainer:2026.11';
/**
 * The resize part. The example policy judges signals over 5 minutes with a 10-minute
 * cooldown; the demo pushes one commit on top that makes them 15 s, and runs passes
 * every 3 s, so the same decisions show within a minute.
 */
const RESIZE_WINDOW = '15s';
const RESIZE_COOLDOWN = '15s';
const RESIZE_INTERVAL = '3s';
const API_PODS = 3;
const API_NAMESPACE = 'api-prod';
const PROXY_CPU = '500m';
const PROXY_MEMORY = '512Mi';
/** The proxy's cpu demand in cores before and after the load rises (see Traffic). */
const DEMAND_BEFORE = 0.3;
const DEMAND_AFTER = short ? 0.9 : 1.2;
/** policy-examples/resize/api.yaml: queue-length scaleUpAbove (200), past its hysteresis (10%). */
const QUEUE_UP = 220;
const tenants = [
  { name: 'ml-training', namespaces: ['ml-train'], prefix: 'ml.tollgate.io/' },
  { name: 'data-pipeline', namespaces: ['etl'], prefix: 'data.tollgate.io/' },
  { name: 'api', namespaces: ['api-prod'], prefix: 'api.tollgate.io/' },
];

const say = (line: string): void => void process.stdout.write(`${line}\n`);

function files(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out[relative(dir, p)] = readFileSync(p, 'utf8');
    }
  };
  walk(dir);
  return out;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

/** Creates pods with bounded parallelism (the API server of the demo is small). */
async function createAll(core: CoreV1Api, pods: V1Pod[], parallel = 16): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < pods.length) {
        const pod = pods[next++] as V1Pod;
        await core.createNamespacedPod({ namespace: pod.metadata?.namespace ?? '', body: pod });
      }
    }),
  );
}

const container = (name: string, image: string, cpu = '100m', memory = '128Mi') => ({
  name,
  image,
  resources: { requests: { cpu, memory }, limits: { cpu, memory } },
});

function batch(): V1Pod[] {
  const pods: V1Pod[] = [];
  for (let g = 0; g < GANGS; g++) {
    for (let m = 0; m < GANG_SIZE; m++) {
      pods.push({
        metadata: {
          name: `train-g${String(g).padStart(2, '0')}-${m}`,
          namespace: 'ml-train',
          labels: { 'app.kubernetes.io/component': 'trainer', 'ml.tollgate.io/gang': `g${g}` },
          annotations: { 'ml.tollgate.io/gang-size': String(GANG_SIZE) },
        },
        spec: {
          schedulingGates: [{ name: 'ml.tollgate.io/gpu-gang' }],
          containers: [container('trainer', TRAINER_IMAGE, '500m', '1Gi')],
        },
      });
    }
  }
  const load = (name: string): V1Pod => ({
    metadata: { name, namespace: 'etl', labels: { app: 'nightly-load' } },
    spec: {
      schedulingGates: [{ name: 'data.tollgate.io/nightly-load' }],
      containers: [container('load', 'registry.example.com/etl/load:1.4')],
    },
  });
  pods.push(load(APPROVED.name));
  for (let i = 0; i < LOADS - 1; i++) pods.push(load(`nightly-load-${String(i).padStart(4, '0')}`));
  // The resizable workload (policy-examples/resize/api.yaml): running, not gated.
  for (let i = 0; i < API_PODS; i++) {
    pods.push({
      metadata: {
        name: `api-frontend-${i}`,
        namespace: API_NAMESPACE,
        labels: { app: 'api-frontend' },
      },
      spec: {
        containers: [
          container('proxy', 'registry.example.com/api/proxy:3', PROXY_CPU, PROXY_MEMORY),
          container('cache', 'registry.example.com/api/cache:3', '250m', '1Gi'),
          container('worker', 'registry.example.com/api/worker:3', '1', '1Gi'),
        ],
      },
    });
  }
  return pods;
}

interface Counts {
  gated: number;
  released: number;
  running: number;
}

/**
 * Lists a namespace's pods as raw JSON through tollgate's own list path: the client's
 * typed deserialiser took seconds per tick for the full demo's 2,800 pods on a busy
 * 2-core machine, so the "live" view updated every 7-10 s.
 */
class PodLister {
  readonly #kc: KubeConfig;
  readonly #sources = new Map<string, ResourceSource>();

  constructor(kc: KubeConfig) {
    this.#kc = kc;
  }

  async list(namespace: string): Promise<V1Pod[]> {
    let source = this.#sources.get(namespace);
    if (!source) {
      source = createResourceSource(this.#kc, { apiVersion: 'v1', kind: 'Pod', namespace });
      this.#sources.set(namespace, source);
    }
    const pods: V1Pod[] = [];
    let continueToken: string | undefined;
    do {
      const page = await source.list({
        limit: 5000,
        ...(continueToken === undefined ? {} : { continueToken }),
        signal: AbortSignal.timeout(30_000),
      });
      pods.push(...(page.items as V1Pod[]));
      continueToken = page.continueToken;
    } while (continueToken);
    return pods;
  }
}

const isApiFrontend = (pod: V1Pod): boolean => pod.metadata?.labels?.app === 'api-frontend';

/** Per-tenant counts, and the api-frontend pods as they are now. */
async function count(pods: PodLister): Promise<{ counts: Map<string, Counts>; api: V1Pod[] }> {
  const out = new Map<string, Counts>();
  const api: V1Pod[] = [];
  for (const t of tenants) {
    const c = { gated: 0, released: 0, running: 0 };
    for (const ns of t.namespaces) {
      for (const pod of await pods.list(ns)) {
        if (ns === API_NAMESPACE && isApiFrontend(pod)) api.push(pod);
        const gated = (pod.spec?.schedulingGates ?? []).some((g) => g.name.startsWith(t.prefix));
        if (gated) c.gated += 1;
        else if (t.name !== 'api') c.released += 1;
        if (pod.status?.phase === 'Running') c.running += 1;
      }
    }
    out.set(t.name, c);
  }
  return { counts: out, api };
}

/** A metric of `tollgate run`, summed over its series by the value of `by` (all: ''). */
async function metricBy(url: string, name: string, by?: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`).catch(() => undefined))?.text().catch(() => '');
  const out = new Map<string, number>();
  for (const m of (text ?? '').matchAll(new RegExp(`^${name}(?:\\{([^}]*)\\})? (\\S+)$`, 'gm'))) {
    const key = by ? (new RegExp(`${by}="([^"]*)"`).exec(m[1] ?? '')?.[1] ?? '') : '';
    out.set(key, (out.get(key) ?? 0) + Number(m[2]));
  }
  return out;
}

const metric = async (url: string, name: string): Promise<number> =>
  (await metricBy(url, name)).get('') ?? 0;

/** "65 succeeded, 8 conflict": a counter by its result label, zeros left out. */
async function results(url: string, name: string): Promise<string> {
  const byResult = [...(await metricBy(url, name, 'result'))]
    .filter(([, n]) => n > 0)
    .sort(([a], [b]) => (a === 'succeeded' ? -1 : b === 'succeeded' ? 1 : a.localeCompare(b)));
  return byResult.map(([result, n]) => `${n} ${result}`).join(', ') || 'none';
}

/** A container's requests as the kubelet reports them running (status), else as the spec asks. */
function requests(pod: V1Pod, name: string, from: 'actual' | 'spec'): Record<string, string> {
  if (from === 'actual') {
    const status = pod.status?.containerStatuses?.find((c) => c.name === name);
    const actual = status?.resources?.requests as Record<string, string> | undefined;
    if (actual) return actual;
  }
  const spec = pod.spec?.containers.find((c) => c.name === name);
  return (spec?.resources?.requests as Record<string, string> | undefined) ?? {};
}

const proxyCores = (pod: V1Pod): number =>
  parseQuantity(requests(pod, 'proxy', 'actual').cpu ?? PROXY_CPU);

/**
 * Stands in for the API pods' own instrumentation, served by the exporter the demo's
 * Prometheus scrapes, with the labels the example's queries select on:
 * - `api_worker_queue_length{namespace,pod}`: 150 x the proxy's utilisation (its cpu
 *   demand over the cpu the kubelet reports it running with), so a resize that gives the
 *   proxy more cpu shortens the queue, and tollgate stops stepping once it is under the
 *   policy's scale-up threshold;
 * - `http_requests_total{namespace,pod,code}`: counters without 5xx, so the SLO query has
 *   data and holds (no rollback).
 * The latency histogram and cAdvisor's throttling counters are not served: those two
 * signals hold for lack of samples, as tollgate treats any signal without data.
 */
class Traffic {
  demand = DEMAND_BEFORE;
  readonly #prometheus: TestPrometheus;
  readonly #served = new Map<string, number>();
  #at = Date.now();

  constructor(prometheus: TestPrometheus) {
    this.#prometheus = prometheus;
  }

  queue(cores: number): number {
    return Math.round((150 * this.demand) / cores);
  }

  update(pods: readonly V1Pod[]): void {
    const now = Date.now();
    const seconds = (now - this.#at) / 1000;
    this.#at = now;
    const { exporter } = this.#prometheus;
    for (const pod of pods) {
      const name = pod.metadata?.name ?? '';
      const labels = { namespace: API_NAMESPACE, pod: name };
      exporter.set('api_worker_queue_length', labels, this.queue(proxyCores(pod)));
      const served = (this.#served.get(name) ?? 0) + Math.round(this.demand * 400 * seconds);
      this.#served.set(name, served);
      exporter.set('http_requests_total', { ...labels, code: '200' }, served);
      exporter.set('http_requests_total', { ...labels, code: '500' }, 0);
    }
  }
}

interface Resizes {
  /** Pods running with proxy resources other than they were created with. */
  resized: number;
  total: number;
  /** Every running pod's proxy resources equal its spec (no resize in flight). */
  settled: boolean;
  /** One short line for the live view (it must fit a terminal row to redraw in place). */
  text: string;
  /** The proxy's memory too, for the summary. */
  long: string;
}

function resizes(pods: readonly V1Pod[], traffic: Traffic): Resizes {
  const cpu = new Set<string>();
  const memory = new Set<string>();
  let resized = 0;
  let settled = pods.length === API_PODS;
  for (const pod of pods) {
    const actual = requests(pod, 'proxy', 'actual');
    const spec = requests(pod, 'proxy', 'spec');
    if (
      parseQuantity(actual.cpu ?? PROXY_CPU) !== parseQuantity(spec.cpu ?? PROXY_CPU) ||
      parseQuantity(actual.memory ?? PROXY_MEMORY) !== parseQuantity(spec.memory ?? PROXY_MEMORY)
    )
      settled = false;
    if (actual.cpu) cpu.add(actual.cpu);
    if (actual.memory) memory.add(actual.memory);
    if (actual.cpu && parseQuantity(actual.cpu) !== parseQuantity(PROXY_CPU)) resized += 1;
  }
  const queues = [...new Set(pods.map((p) => traffic.queue(proxyCores(p))))].join(',');
  const cpuText = `proxy cpu ${PROXY_CPU} -> ${[...cpu].join(',') || '?'}`;
  return {
    resized,
    total: pods.length,
    settled,
    text: `resized ${resized}/${pods.length}, ${cpuText}, queue ${queues}`,
    long: `resized ${resized}/${pods.length} in place: ${cpuText}, memory ${PROXY_MEMORY} -> ${[...memory].join(',') || '?'}; queue length now ${queues}`,
  };
}

/**
 * What tollgate's own log says about the run: leader terms (more than one means the
 * lease was lost under load) and why writes did not succeed (e.g. a queued release
 * superseded by a newer decision for the same pod).
 */
function logSummary(text: string): string {
  let terms = 0;
  const notDone = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    let entry: { msg?: string; result?: { result?: string; message?: string } };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue;
    }
    if (entry.msg === 'became leader') terms += 1;
    if (entry.msg?.endsWith('write did not succeed') && entry.result) {
      // "superseded by a newer decision (gate-release:...)" -> one reason, not one per id
      const why = `${entry.result.result}: ${(entry.result.message ?? '').replace(/ \(.*$/, '')}`;
      notDone.set(why, (notDone.get(why) ?? 0) + 1);
    }
  }
  const writes = [...notDone].map(([why, n]) => `${n} ${why}`).join('; ') || 'none';
  return `tollgate's log: ${terms} leader term${terms === 1 ? '' : 's'}; writes that did not succeed: ${writes}`;
}

/**
 * A compact status view: redrawn in place every tick on a terminal; otherwise (CI logs,
 * a pipe) a plain line when the counts, the resize or the phase change, or every ~10 s
 * while they do not (ProgressLines), with rates over the time since the last line.
 */
class Progress {
  #lines = 0;
  #last = new Map<string, number>();
  readonly #clock = systemClock;
  #lastAt = this.#clock.now();
  readonly #start = this.#clock.now();
  readonly #plain = new ProgressLines(this.#clock, 10_000);
  readonly tty = process.stdout.isTTY === true;

  show(counts: Map<string, Counts>, resize: string, queue: number, note: string): void {
    const now = this.#clock.now();
    const parts = [...counts].map(([t, c]) => `${t} ${c.gated}/${c.released}/${c.running}`);
    const state = `${parts.join('  ')} (gated/released/running)  api-frontend ${resize}`;
    if (!this.tty && !this.#plain.due(`${state} ${note}`)) return;
    const secs = Math.max((now - this.#lastAt) / 1000, 0.001);
    const rows: string[] = [];
    let total = 0;
    for (const [tenant, c] of counts) {
      const rate = (c.released - (this.#last.get(tenant) ?? 0)) / secs;
      this.#last.set(tenant, c.released);
      total += rate;
      rows.push(
        `  ${tenant.padEnd(14)} gated ${String(c.gated).padStart(5)}  released ${String(c.released).padStart(5)}  running ${String(c.running).padStart(5)}  ${rate.toFixed(1).padStart(6)}/s`,
      );
    }
    this.#lastAt = now;
    const elapsed = `t+${Math.round((now - this.#start) / 1000)}s`;
    if (this.tty) {
      if (this.#lines > 0) process.stdout.write(`\x1b[${this.#lines}A`);
      const view = [
        `tollgate demo  ${elapsed}  ${note}`,
        ...rows,
        `  api-frontend   ${resize}`,
        `  dispatcher queue depth ${queue}`,
      ];
      for (const line of view) process.stdout.write(`\x1b[2K${line}\n`);
      this.#lines = view.length;
    } else {
      say(`progress: ${state}  rate ${total.toFixed(1)}/s  queue ${queue}  ${elapsed}  ${note}`);
    }
  }
}

async function main(): Promise<number> {
  const work = mkdtempSync(join(tmpdir(), 'tollgate-demo-'));
  let cp: ControlPlane | undefined;
  let kubelet: SimulatedKubelet | undefined;
  let git: GitServer | undefined;
  let prometheus: TestPrometheus | undefined;
  let child: ReturnType<typeof spawn> | undefined;
  const failures: string[] = [];
  try {
    say(
      `tollgate demo${short ? ' (short)' : ''}: starting Prometheus and the local control plane...`,
    );
    // First, so a missing binary fails in a second with the install command.
    prometheus = await startPrometheus();
    say(`prometheus ${prometheus.url} (scrapes the api-frontend pods' stand-in metrics)`);
    cp = await startControlPlane({ name: 'demo' });
    say(`control plane ready at ${cp.server} in ${(cp.startMillis / 1000).toFixed(1)}s`);
    const core = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
    kubelet = new SimulatedKubelet(cp.kubeConfig('admin'), { concurrency: 16 });
    for (let i = 1; i <= 4; i++) {
      await kubelet.addNode(`demo-node-${i}`, {
        cpu: '128',
        memory: '512Gi',
        pods: 500,
        images: i <= 2 ? [TRAINER_IMAGE] : [],
      });
    }
    await kubelet.start();
    say('simulated kubelet: 4 nodes (2 with the trainer image)');

    git = await startGitServer();
    const repo = git.createRepo('policy');
    const commit = await pushTree(git, repo, files(join(root, 'policy-examples')), {
      message: 'policy-examples',
    });
    // The operator's change for the demo, as a commit of its own: the example's 5-minute
    // window and 10-minute cooldown would keep the resize out of sight.
    const resizeFile = 'resize/api.yaml';
    const resizePolicy = parseDocument(
      readFileSync(join(root, 'policy-examples', resizeFile), 'utf8'),
    );
    resizePolicy.setIn(['spec', 'window'], RESIZE_WINDOW);
    resizePolicy.setIn(['spec', 'cooldown'], RESIZE_COOLDOWN);
    const overlay = await pushTree(
      git,
      repo,
      { [resizeFile]: resizePolicy.toString() },
      { message: `demo: api-frontend resize window ${RESIZE_WINDOW}, cooldown ${RESIZE_COOLDOWN}` },
    );
    say(
      `policy repository ${repo} (policy-examples/ at ${commit.slice(0, 12)}, then ${overlay.slice(0, 12)}: ${resizeFile} window ${RESIZE_WINDOW}, cooldown ${RESIZE_COOLDOWN})`,
    );

    const traffic = new Traffic(prometheus);

    for (const ns of ['ml-train', 'ml-eval', 'etl', 'etl-staging', 'api-prod', 'api-canary'])
      await core.createNamespace({ body: { metadata: { name: ns } } });
    // The eval gate policy reads a Checkpoint (ml.example.com/v1), the model registry's
    // custom resource: install its CRD, or the cluster view cannot sync it.
    const ext = cp.kubeConfig('admin').makeApiClient(ApiextensionsV1Api);
    await ext.createCustomResourceDefinition({
      body: {
        metadata: { name: 'checkpoints.ml.example.com' },
        spec: {
          group: 'ml.example.com',
          scope: 'Namespaced',
          names: { plural: 'checkpoints', singular: 'checkpoint', kind: 'Checkpoint' },
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              schema: {
                openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true },
              },
            },
          ],
        },
      },
    });
    for (let i = 0; ; i++) {
      const crd = await ext.readCustomResourceDefinition({ name: 'checkpoints.ml.example.com' });
      if (crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True'))
        break;
      if (i > 100) throw new Error('the Checkpoint CRD was not established within 10s');
      await sleep(100);
    }
    // As an operator does for any object a policy names: let tollgate read Checkpoints.
    const rbac = cp.kubeConfig('admin').makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: 'ml-eval',
      body: {
        metadata: { name: 'tollgate-read-checkpoints' },
        rules: [
          {
            apiGroups: ['ml.example.com'],
            resources: ['checkpoints'],
            verbs: ['get', 'list', 'watch'],
          },
        ],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: 'ml-eval',
      body: {
        metadata: { name: 'tollgate-read-checkpoints' },
        roleRef: {
          apiGroup: 'rbac.authorization.k8s.io',
          kind: 'Role',
          name: 'tollgate-read-checkpoints',
        },
        subjects: [{ kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: 'tollgate' }],
      },
    });
    await core.createNamespacedConfigMap({
      namespace: 'ml-train',
      body: { metadata: { name: 'dataset-ready' }, data: { ready: 'false' } },
    });

    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const log = join(work, 'tollgate.log');
    const out = openSync(log, 'a');
    child = spawn(
      process.execPath,
      [
        cli,
        'run',
        '--kubeconfig',
        cp.tollgateKubeconfig,
        '--policy-repo',
        repo,
        '--policy-ref',
        'main',
        '--git-token-env',
        'DEMO_GIT_TOKEN',
        '--git-cache-dir',
        join(work, 'cache'),
        '--identity',
        'demo',
        '--metrics-address',
        `127.0.0.1:${port}`,
        '--lease-namespace',
        'tollgate-system',
        // The default lease timings (15s / 10s / 2s): with 5s / 3s / 1s the full demo lost
        // its lease 8 times in 2 minutes on a busy 2-core machine (a renewal late by 2 s),
        // and every loss cancels the queued writes of the term. A fresh lease is taken at
        // once anyway, so shorter timings bought nothing.
        '--prometheus-url',
        prometheus.url,
        '--resize-interval',
        RESIZE_INTERVAL,
        '--log-level',
        'info',
      ],
      {
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '',
          DEMO_GIT_TOKEN: git.token,
        },
        stdio: ['ignore', out, out],
      },
    );
    const exited = new Promise<number | null>((r) => child?.once('exit', (code) => r(code)));
    const deadline = Date.now() + 60_000;
    while ((await fetch(`${url}/readyz`).catch(() => undefined))?.status !== 200) {
      if (child.exitCode !== null || Date.now() > deadline)
        throw new Error(
          `tollgate run did not become ready; its log:\n${readFileSync(log, 'utf8').slice(-3000)}`,
        );
      await sleep(200);
    }
    say(`tollgate run ready (metrics ${url}/metrics, log ${log})`);

    const pods = batch();
    say(
      `creating ${pods.length} pods: ${GANGS} gangs of ${GANG_SIZE} trainers, ${LOADS} nightly loads, 3 api-frontend`,
    );
    await createAll(core, pods);
    // The approval for tonight's load, merged once the pod exists (an approval binds to
    // pods created before its merge, in whole seconds) and good for a few hours.
    const load = await core.readNamespacedPod(APPROVED);
    const mergeAt = approvalMergeAt(load, Date.now());
    if (mergeAt > Date.now()) await sleep(mergeAt - Date.now());
    const approval = approvalFile(Date.now());
    const approvalCommit = await pushTree(
      git,
      repo,
      { [approval.path]: approval.content },
      { message: `demo: approve ${APPROVED.namespace}/${APPROVED.name} for ${APPROVAL_HOURS}h` },
    );
    say(`merged ${approvalCommit.slice(0, 12)}: ${approval.path} for ${APPROVAL_HOURS}h`);
    const lister = new PodLister(cp.kubeConfig('admin'));
    const created = (await lister.list(API_NAMESPACE)).filter(isApiFrontend);
    const uids = new Map(created.map((p) => [p.metadata?.name ?? '', p.metadata?.uid ?? '']));
    traffic.update(created);

    const progress = new Progress();
    let api: V1Pod[] = created;
    let resized = resizes(api, traffic);
    const tick = async (note: string): Promise<Map<string, Counts>> => {
      const now = await count(lister);
      const counts = now.counts;
      api = now.api;
      traffic.update(api);
      resized = resizes(api, traffic);
      progress.show(counts, resized.text, await metric(url, 'tollgate_dispatch_queue_depth'), note);
      return counts;
    };
    // The API load rises after a few scrapes at the baseline; tollgate steps up once the
    // higher load has lasted a whole window.
    const queueBefore = traffic.queue(parseQuantity(PROXY_CPU));
    const rise = (): void => {
      traffic.demand = DEMAND_AFTER;
      traffic.update(api);
      if (!progress.tty)
        say(
          `api-frontend load rises: proxy cpu demand ${DEMAND_BEFORE} -> ${DEMAND_AFTER} cores, queue length ${queueBefore} -> ${traffic.queue(parseQuantity(PROXY_CPU))} (ResizePolicy scales up above ${QUEUE_UP})`,
        );
    };
    // Phase 1: the dataset is not ready; trainers must stay gated whatever else holds.
    let counts = new Map<string, Counts>();
    for (let i = 0; i < (short ? 4 : 8); i++) {
      if (i === 2) rise();
      counts = await tick('dataset-ready=false');
      await sleep(1000);
    }
    const mlBefore = counts.get('ml-training')?.released ?? 0;
    if (mlBefore !== 0) failures.push(`${mlBefore} trainers released before the dataset was ready`);

    // The client sends a JSON patch (RFC 6902) by default.
    await core.patchNamespacedConfigMap({
      namespace: 'ml-train',
      name: 'dataset-ready',
      body: [{ op: 'replace', path: '/data/ready', value: 'true' }],
    });
    if (!progress.tty) say('flipped ConfigMap ml-train/dataset-ready data.ready=true');

    const wantMl = Math.min(GANGS, Math.floor(ML_BUDGET / GANG_SIZE)) * GANG_SIZE;
    const until = Date.now() + (short ? 90_000 : 180_000);
    while (Date.now() < until) {
      counts = await tick('dataset-ready=true');
      const ml = counts.get('ml-training');
      const etl = counts.get('data-pipeline');
      // Resized far enough: every pod's queue under the scale-up threshold, nothing in flight.
      const apiDone =
        resized.resized === API_PODS &&
        resized.settled &&
        api.every((p) => traffic.queue(proxyCores(p)) <= QUEUE_UP);
      if (
        ml &&
        etl &&
        ml.released >= wantMl &&
        ml.running >= wantMl &&
        etl.released >= 1 &&
        apiDone
      )
        break;
      await sleep(1000);
    }
    await sleep(2000); // a further pass: nothing more may be released
    counts = await tick('settled');

    const ml = counts.get('ml-training') as Counts;
    const etl = counts.get('data-pipeline') as Counts;
    if (ml.released !== wantMl)
      failures.push(
        `ml-training: ${ml.released} trainers released, expected ${wantMl} (whole gangs within the 64-pod budget)`,
      );
    if (ml.released % GANG_SIZE !== 0)
      failures.push(`ml-training: a gang was released partly (${ml.released})`);
    const approved = await core.readNamespacedPod(APPROVED);
    if ((approved.spec?.schedulingGates ?? []).length > 0)
      failures.push(`${APPROVED.namespace}/${APPROVED.name}: approved but still gated`);
    if (etl.released !== 1)
      failures.push(
        `data-pipeline: ${etl.released} loads released, expected only the approved one`,
      );
    // In place: the same pods (uids), no container restarted, and the kubelet runs them
    // with the resources the spec now asks for, above what they were created with.
    for (const pod of api) {
      const name = pod.metadata?.name ?? '';
      const actual = requests(pod, 'proxy', 'actual');
      const spec = requests(pod, 'proxy', 'spec');
      if (pod.metadata?.uid !== uids.get(name))
        failures.push(`${API_NAMESPACE}/${name}: replaced (uid changed), not resized in place`);
      const restarts = (pod.status?.containerStatuses ?? []).reduce(
        (n, c) => n + (c.restartCount ?? 0),
        0,
      );
      if (restarts > 0)
        failures.push(`${API_NAMESPACE}/${name}: ${restarts} container restarts during the resize`);
      if (!(parseQuantity(spec.cpu ?? '0') > parseQuantity(PROXY_CPU)))
        failures.push(
          `${API_NAMESPACE}/${name}: proxy cpu request ${spec.cpu} not above ${PROXY_CPU}: not resized`,
        );
      else if (parseQuantity(actual.cpu ?? '0') !== parseQuantity(spec.cpu ?? '0'))
        failures.push(
          `${API_NAMESPACE}/${name}: runs with proxy cpu ${actual.cpu}, spec asks ${spec.cpu}: resize not actuated`,
        );
    }
    if (api.length !== API_PODS)
      failures.push(`${API_NAMESPACE}: ${api.length} api-frontend pods, expected ${API_PODS}`);

    say('');
    say(
      `summary: ml-training released ${ml.released} of ${GANGS * GANG_SIZE} trainers (budget 64 pods, whole gangs);`,
    );
    say(
      `         data-pipeline released ${etl.released} of ${LOADS} loads (only the approved one; the rest wait for an Approval)`,
    );
    say(`         api-frontend ${resized.long} (same pods, no restart)`);
    say(
      `         tollgate's counters: releases ${await results(url, 'tollgate_releases_total')}; resizes ${await results(url, 'tollgate_resizes_total')}`,
    );

    // Stop tollgate first: a graceful stop pushes the last audit batch.
    child.kill('SIGTERM');
    const code = await exited;
    say(`tollgate run stopped (exit ${code})`);
    say(logSummary(readFileSync(log, 'utf8')));
    if (code !== 0) failures.push(`tollgate run exited ${code}`);

    say('');
    say('audit history (git log --oneline tollgate/audit):');
    const clone = join(work, 'audit');
    await run('git', [
      'clone',
      '--quiet',
      '--branch',
      'tollgate/audit',
      repo.replace('http://', `http://x:${git.token}@`),
      clone,
    ]);
    const { stdout: gitLog } = await run('git', ['-C', clone, 'log', '--oneline', '-n', '10']);
    say(gitLog.trimEnd());
    say('');
    say(`tollgate audit log --pod ${APPROVED.namespace}/${APPROVED.name}:`);
    const audit = await run(
      process.execPath,
      [cli, 'audit', 'log', '--repo', repo, '--pod', `${APPROVED.namespace}/${APPROVED.name}`],
      { env: { ...process.env, TOLLGATE_GIT_TOKEN: git.token } },
    );
    say(audit.stdout.trimEnd());
    if (!/Release/.test(audit.stdout))
      failures.push('the audit trail has no Release record of the approved load');

    const token = git.token;
    const auditOf = async (...args: string[]): Promise<string> =>
      (
        await run(process.execPath, [cli, 'audit', 'log', '--repo', repo, ...args], {
          env: { ...process.env, TOLLGATE_GIT_TOKEN: token },
        })
      ).stdout;
    const first = `${API_NAMESPACE}/${api[0]?.metadata?.name ?? 'api-frontend-0'}`;
    say('');
    say(`tollgate audit log --pod ${first} --kind Resize:`);
    say((await auditOf('--pod', first, '--kind', 'Resize')).trimEnd());
    // Every resized pod: a Resize intent and its succeeded outcome, by decision id.
    const history = JSON.parse(await auditOf('--kind', 'Resize', '--output', 'json')) as {
      records: {
        id: string;
        phase: string;
        target: { namespace: string; name: string };
        outcome: { result: string };
      }[];
    }[];
    const records = history.flatMap((c) => c.records);
    for (const pod of api) {
      const name = pod.metadata?.name ?? '';
      const mine = records.filter(
        (r) => r.target.namespace === API_NAMESPACE && r.target.name === name,
      );
      const intents = new Set(mine.filter((r) => r.phase === 'intent').map((r) => r.id));
      const done = mine.filter(
        (r) => r.phase === 'outcome' && r.outcome.result === 'succeeded' && intents.has(r.id),
      );
      if (done.length === 0)
        failures.push(
          `${API_NAMESPACE}/${name}: no Resize intent with a succeeded outcome in the audit history`,
        );
    }
  } catch (error) {
    failures.push(error instanceof Error ? error.message : String(error));
  } finally {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await kubelet?.stop().catch(() => undefined);
    await git?.close().catch(() => undefined);
    await prometheus?.stop().catch(() => undefined);
    await cp?.stop().catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  }
  say('');
  if (failures.length > 0) {
    for (const f of failures) say(`demo check failed: ${f}`);
    return 1;
  }
  say(
    'demo checks passed: trainers held until the dataset was ready, whole gangs within budget, only the approved load released, api-frontend resized in place, all recorded in Git',
  );
  return 0;
}

process.exitCode = await main();
