/**
 * tollgate beside Kueue, on the same control plane, the same simulated nodes, the same
 * machine, in one run: how fast each lets a burst of gated pods go.
 *
 *   node bench/peers.ts [--pods 1000,10000] [--timeout 900] [--kueue-qps N]
 *
 * Kueue: its manager (`sigs.k8s.io/kueue/cmd/kueue`, built from the Go module proxy at the
 * version pinned in test/tools/kueue/go.mod, cached like the other tools) with its own CRDs
 * (from the same module), run as a ServiceAccount bound to cluster-admin, with:
 * - the plain-pod integration only (`integrations.frameworks: [pod]`), pods managed in
 *   namespaces labelled `tollgate.io/bench-peer=kueue`;
 * - one ResourceFlavor, one ClusterQueue with room for every pod (cpu, memory, pods), one
 *   LocalQueue in the bench namespace;
 * - no webhook registered with the API server: the bench creates each pod the way Kueue's
 *   pod webhook would leave it (queue-name and managed labels, the
 *   `kueue.x-k8s.io/managed` finalizer, the `kueue.x-k8s.io/admission` gate). Kueue's
 *   webhook server still starts (it must, with a self-signed certificate the bench makes);
 *   its internal certificate management is off, so it also reads a metrics certificate
 *   from its fixed path /etc/kueue/metrics/certs, which the bench writes (needs write
 *   access there); leader election off; the visibility API server off
 *   (`--feature-gates=VisibilityOnDemand=false`); every other setting Kueue's default
 *   (client QPS 50, burst 100, unless `--kueue-qps` says otherwise; Pod reconciler
 *   concurrency 5 as in its shipped config).
 * tollgate: `tollgate run` as a child process with its shipped defaults (lease timings,
 * dispatcher), as the tollgate identity (RBAC from deploy/), a policy from a real Git
 * server with one tenant, no budget, pacing far above the burst, and the Budget
 * condition (always true), strict audit to a real Git server: every release is recorded
 * in Git before its write, which Kueue does not do.
 *
 * Per size and side, one after the other, each controller started fresh and ready before
 * the first pod, and the kube-scheduler restarted before each side (`freshScheduler`), so
 * neither side meets the queues and backoffs the other left it: the pods are created
 * (concurrency 32) into a fresh namespace while the controller runs. An independent watcher (admin, its own informer) stamps each pod's
 * first sighting (created, gated) and the sighting without its gate. Figures:
 * - wall: first create request to the last gate removal seen;
 * - per-pod latency p50/p99: first sighting to gate removal seen ("ready to go" is
 *   creation: both controllers may release a pod as soon as they see it);
 * - API requests per released pod: the API server's audit log (level Metadata), requests
 *   by the controller's user inside the run's window, over the pods released;
 * - controller CPU seconds (utime + stime from /proc) over the window and peak RSS
 *   (sampled every 500 ms).
 * Results: a table on stdout, JSON in bench/results/peers-<stamp>.json.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AuthenticationV1Api,
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  makeInformer,
  type KubernetesObject,
  type V1Pod,
} from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { startControlPlane, type ControlPlane } from '../test/support/control-plane.ts';
import { SimulatedKubelet } from '../test/support/kubelet.ts';
import { pushTree, type GitServer } from '../test/support/git-server.ts';
import { startGitServerProcess } from '../test/support/git-server-process.ts';
import {
  benchPolicyFiles,
  createGatedPods,
  ensureNamespace,
  gatedPod,
  percentile,
  rssOf,
} from './lib.ts';
import {
  SHIPPED_LEASE,
  freePort,
  spawnTollgate,
  stopReplica,
  type Replica,
} from './tollgate-process.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    pods: { type: 'string', default: '1000,10000' },
    timeout: { type: 'string', default: '900' },
    'kueue-qps': { type: 'string' },
  },
});
const sizes = (values.pods ?? '').split(',').map(Number);
if (sizes.some((n) => !Number.isInteger(n) || n < 1))
  throw new Error(`--pods: positive integers separated by commas, got ${values.pods}`);
const timeoutMs = Number(values.timeout) * 1000;
/** Kueue's client QPS (burst twice that); absent: Kueue's default (50, burst 100). */
const kueueQps = values['kueue-qps'] === undefined ? undefined : Number(values['kueue-qps']);
if (kueueQps !== undefined && !(kueueQps > 0)) throw new Error('--kueue-qps: a positive number');
const say = (line: string): void => void process.stderr.write(`# peers: ${line}\n`);
const tollgateGate = 'bench.tollgate.io/ready';
const kueueGate = 'kueue.x-k8s.io/admission';
const runId = Date.now().toString(36);

type Side = 'kueue' | 'tollgate';
interface SideRun {
  side: Side;
  pods: number;
  released: number;
  wallMs: number;
  latencyMs: { p50: number; p99: number };
  apiRequests: number;
  apiRequestsPerPod: number;
  cpuSeconds: number;
  peakRssMiB: number;
}

// ---- Kueue

function kueueModuleDir(): string {
  return execFileSync('go', ['list', '-m', '-f', '{{.Dir}}', 'sigs.k8s.io/kueue'], {
    cwd: join(root, 'test/tools/kueue'),
    encoding: 'utf8',
  }).trim();
}

/**
 * Kueue's manager, built from the Go module proxy at the version test/tools/kueue/go.mod
 * pins, into the tools cache keyed by the pins' checksum (a repeat run builds nothing).
 */
function kueueBinary(): string {
  const dir = join(root, 'test/tools/kueue');
  const pins = ['go.mod', 'go.sum'].map((f) => readFileSync(join(dir, f)));
  const sum = createHash('sha256').update(Buffer.concat(pins)).digest('hex').slice(0, 12);
  const version = /sigs\.k8s\.io\/kueue (v\S+)/.exec(pins[0]!.toString())?.[1] ?? 'unknown';
  const out = join(
    process.env.TOLLGATE_TOOLS_CACHE ?? join(root, '.cache/tools'),
    `kueue-${version}-${sum}`,
  );
  const binary = join(out, 'kueue');
  if (existsSync(binary)) return binary;
  say(`building Kueue ${version} from the Go module proxy (minutes, once)`);
  execFileSync(
    'go',
    [
      'build',
      '-mod=readonly',
      '-trimpath',
      '-ldflags',
      '-s -w',
      '-o',
      binary,
      'sigs.k8s.io/kueue/cmd/kueue',
    ],
    {
      cwd: dir,
      env: { ...process.env, CGO_ENABLED: '0' },
      stdio: 'inherit',
    },
  );
  return binary;
}

async function applyAll(kc: KubeConfig, objects: KubernetesObject[]): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  for (const object of objects) {
    try {
      await api.create(object);
    } catch (error) {
      if ((error as { code?: number }).code !== 409) throw error;
    }
  }
}

/** Kueue's CRDs from its module, applied with the real kubectl (raw JSON schema intact). */
function installKueueCrds(cp: ControlPlane): void {
  const kubectl = execFileSync('bash', [join(root, 'test/tools/build.sh'), 'kubectl'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  })
    .trim()
    .split('\n')
    .pop() as string;
  const dir = join(kueueModuleDir(), 'config/components/crd/bases');
  const run = (...args: string[]): void =>
    void execFileSync(kubectl, ['--kubeconfig', cp.adminKubeconfig, ...args], { stdio: 'ignore' });
  run('apply', '--server-side', '-f', dir);
  run('wait', '--for=condition=Established', '--timeout=120s', 'crd', '--all');
}

/** A ServiceAccount bound to cluster-admin, and a kubeconfig file with its token. */
async function kueueKubeconfig(cp: ControlPlane, work: string): Promise<string> {
  const admin = cp.kubeConfig('admin');
  await ensureNamespace(admin, 'kueue-system');
  await applyAll(admin, [
    {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'kueue', namespace: 'kueue-system' },
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'bench-kueue' },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: 'cluster-admin',
      },
      subjects: [{ kind: 'ServiceAccount', name: 'kueue', namespace: 'kueue-system' }],
    } as KubernetesObject,
  ]);
  const token = await admin.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
    name: 'kueue',
    namespace: 'kueue-system',
    body: { spec: { expirationSeconds: 86_400, audiences: [] } },
  });
  const kc = new KubeConfig();
  kc.loadFromFile(cp.adminKubeconfig);
  const cluster = kc.getCurrentCluster()!;
  const file = join(work, 'kueue.kubeconfig');
  writeFileSync(
    file,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'bench',
          cluster: {
            server: cluster.server,
            ...(cluster.caFile ? { 'certificate-authority': cluster.caFile } : {}),
            ...(cluster.skipTLSVerify ? { 'insecure-skip-tls-verify': true } : {}),
          },
        },
      ],
      users: [{ name: 'kueue', user: { token: token.status?.token } }],
      contexts: [{ name: 'kueue', context: { cluster: 'bench', user: 'kueue' } }],
      'current-context': 'kueue',
    }),
  );
  return file;
}

/** A self-signed certificate for Kueue's webhook and metrics servers (nobody calls them). */
function kueueCertificates(work: string): string {
  const dir = join(work, 'kueue-certs');
  mkdirSync(dir, { recursive: true });
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '2',
      '-subj',
      '/CN=localhost',
      '-keyout',
      join(dir, 'tls.key'),
      '-out',
      join(dir, 'tls.crt'),
    ],
    { stdio: 'ignore' },
  );
  const metrics = '/etc/kueue/metrics/certs';
  mkdirSync(metrics, { recursive: true });
  for (const f of ['tls.key', 'tls.crt'])
    writeFileSync(join(metrics, f), readFileSync(join(dir, f)));
  return dir;
}

async function kueueQueues(kc: KubeConfig, namespace: string, pods: number): Promise<void> {
  await applyAll(kc, [
    { apiVersion: 'kueue.x-k8s.io/v1beta2', kind: 'ResourceFlavor', metadata: { name: 'default' } },
    {
      apiVersion: 'kueue.x-k8s.io/v1beta2',
      kind: 'ClusterQueue',
      metadata: { name: 'bench' },
      spec: {
        namespaceSelector: {},
        resourceGroups: [
          {
            coveredResources: ['cpu', 'memory', 'pods'],
            flavors: [
              {
                name: 'default',
                resources: [
                  { name: 'cpu', nominalQuota: String(pods * 10) },
                  { name: 'memory', nominalQuota: `${pods * 100}Gi` },
                  { name: 'pods', nominalQuota: pods * 10 },
                ],
              },
            ],
          },
        ],
      },
    } as KubernetesObject,
    {
      apiVersion: 'kueue.x-k8s.io/v1beta2',
      kind: 'LocalQueue',
      metadata: { name: 'bench', namespace },
      spec: { clusterQueue: 'bench' },
    } as KubernetesObject,
  ]);
}

interface Controller {
  readonly pid: number;
  readonly user: string;
  stop(): Promise<void>;
}

async function waitHttp(url: string, child: ChildProcess, what: string): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    if (child.exitCode !== null) throw new Error(`${what} exited ${child.exitCode} before ready`);
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await sleep(250);
  }
  throw new Error(`${what}: ${url} not ready`);
}

async function startKueue(
  binary: string,
  kubeconfig: string,
  certDir: string,
  work: string,
): Promise<Controller> {
  const [health, webhook] = [await freePort(), await freePort()];
  const config = join(work, `kueue-${health}.yaml`);
  writeFileSync(
    config,
    stringify({
      apiVersion: 'config.kueue.x-k8s.io/v1beta2',
      kind: 'Configuration',
      namespace: 'kueue-system',
      health: { healthProbeBindAddress: `127.0.0.1:${health}` },
      metrics: { bindAddress: '0' },
      webhook: { port: webhook, host: '127.0.0.1', certDir },
      leaderElection: { leaderElect: false },
      internalCertManagement: { enable: false },
      controller: {
        groupKindConcurrency: {
          'Job.batch': 5,
          Pod: 5,
          'Workload.kueue.x-k8s.io': 5,
          'LocalQueue.kueue.x-k8s.io': 1,
          'Cohort.kueue.x-k8s.io': 1,
          'ClusterQueue.kueue.x-k8s.io': 1,
          'ResourceFlavor.kueue.x-k8s.io': 1,
        },
      },
      ...(kueueQps === undefined
        ? {}
        : { clientConnection: { qps: kueueQps, burst: 2 * kueueQps } }),
      integrations: { frameworks: ['pod'] },
      managedJobsNamespaceSelector: { matchLabels: { 'tollgate.io/bench-peer': 'kueue' } },
    }),
  );
  const log = join(work, `kueue-${health}.log`);
  const child = spawn(
    binary,
    ['-config', config, '-kubeconfig', kubeconfig, '--feature-gates=VisibilityOnDemand=false'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let raw = '';
  child.stdout!.on('data', (c: Buffer) => (raw += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (raw += c.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => (writeFileSync(log, raw), r())));
  await waitHttp(`http://127.0.0.1:${health}/readyz`, child, `kueue (log ${log})`);
  return {
    pid: child.pid!,
    user: await whoAmI(kubeconfig),
    stop: async () => {
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(20_000).then(() => child.kill('SIGKILL'))]);
    },
  };
}

// ---- tollgate

async function startTollgate(
  cp: ControlPlane,
  git: GitServer,
  policyUrl: string,
  work: string,
): Promise<Controller> {
  const replica: Replica = await spawnTollgate({
    identity: `peers-${Date.now().toString(36)}`,
    cp,
    git,
    policyUrl,
    auditUrl: git.createRepo(`audit-${Date.now().toString(36)}`),
    leaseName: `tollgate-peers-${Date.now().toString(36)}`,
    timings: SHIPPED_LEASE,
    work,
  });
  await waitHttp(`${replica.url}/readyz`, replica.child, 'tollgate run');
  return {
    pid: replica.child.pid!,
    user: await whoAmI(cp.tollgateKubeconfig),
    stop: () => stopReplica(replica, 'SIGTERM'),
  };
}

// ---- measuring

/** The user name the API server authenticates this kubeconfig as (SelfSubjectReview). */
async function whoAmI(kubeconfig: string): Promise<string> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const review = await kc.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
  });
  const name = review.status?.userInfo?.username;
  if (!name) throw new Error(`no user name for ${kubeconfig}`);
  return name;
}

/** CPU seconds (user + system) of a process so far, from /proc/<pid>/stat. */
function cpuSecondsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

interface Sightings {
  created: Map<string, number>;
  released: Map<string, number>;
  stop(): Promise<void>;
}

async function watch(kc: KubeConfig, namespace: string, gate: string): Promise<Sightings> {
  const core = kc.makeApiClient(CoreV1Api);
  const created = new Map<string, number>();
  const released = new Map<string, number>();
  const informer = makeInformer<V1Pod>(kc, `/api/v1/namespaces/${namespace}/pods`, () =>
    core.listNamespacedPod({ namespace }),
  );
  const seen = (pod: V1Pod): void => {
    const name = pod.metadata?.name ?? '';
    const now = performance.now();
    if (!created.has(name)) created.set(name, now);
    if (!released.has(name) && !(pod.spec?.schedulingGates ?? []).some((g) => g.name === gate))
      released.set(name, now);
  };
  informer.on('add', seen);
  informer.on('update', seen);
  let stopped = false;
  informer.on('error', () => {
    if (!stopped) setTimeout(() => void informer.start(), 200);
  });
  await informer.start();
  return {
    created,
    released,
    stop: async () => {
      stopped = true;
      await informer.stop();
    },
  };
}

/** Requests by `user` in the audit log with their receipt inside [from, to] (ISO strings). */
function auditedRequests(auditLog: string, user: string, from: string, to: string): number {
  let count = 0;
  for (const line of readFileSync(auditLog, 'utf8').split('\n')) {
    if (!line.includes(user)) continue;
    const event = JSON.parse(line) as {
      user?: { username?: string };
      stage?: string;
      requestReceivedTimestamp?: string;
    };
    const at = event.requestReceivedTimestamp ?? '';
    if (
      event.user?.username === user &&
      event.stage === 'ResponseComplete' &&
      at >= from &&
      at <= to
    )
      count += 1;
  }
  return count;
}

function kueuePod(name: string, namespace: string): V1Pod {
  const pod = gatedPod(name, namespace, kueueGate, {
    'kueue.x-k8s.io/queue-name': 'bench',
    'kueue.x-k8s.io/managed': 'true',
  });
  pod.metadata!.finalizers = ['kueue.x-k8s.io/managed'];
  return pod;
}

async function measure(
  side: Side,
  pods: number,
  controller: Controller,
  adminKc: KubeConfig,
  namespace: string,
  auditLog: string,
): Promise<SideRun> {
  const gate = side === 'kueue' ? kueueGate : tollgateGate;
  const sightings = await watch(adminKc, namespace, gate);
  let peakRss = rssOf(controller.pid);
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssOf(controller.pid))), 500);
  const cpuBefore = cpuSecondsOf(controller.pid);
  const fromIso = new Date().toISOString();
  const t0 = performance.now();
  await createGatedPods(adminKc, namespace, pods, gate, {
    concurrency: 32,
    ...(side === 'kueue' ? { build: (name: string, ns: string) => kueuePod(name, ns) } : {}),
  });
  const deadline = t0 + timeoutMs;
  while (sightings.released.size < pods && performance.now() < deadline) await sleep(50);
  const last = Math.max(...sightings.released.values());
  const cpuSeconds = cpuSecondsOf(controller.pid) - cpuBefore;
  clearInterval(sampler);
  await sleep(1500); // the audit log's last lines
  const toIso = new Date().toISOString();
  await sightings.stop();
  const latencies = [...sightings.released].map(
    ([name, at]) => at - (sightings.created.get(name) ?? at),
  );
  const apiRequests = auditedRequests(auditLog, controller.user, fromIso, toIso);
  return {
    side,
    pods,
    released: sightings.released.size,
    wallMs: last - t0,
    latencyMs: { p50: percentile(latencies, 50), p99: percentile(latencies, 99) },
    apiRequests,
    apiRequestsPerPod: apiRequests / Math.max(1, sightings.released.size),
    cpuSeconds,
    peakRssMiB: peakRss / 2 ** 20,
  };
}

// ---- the run

const work = mkdtempSync(join(tmpdir(), 'tollgate-peers-'));
const auditPolicy = join(work, 'audit-policy.yaml');
const auditLog = join(work, 'audit.log');
writeFileSync(
  auditPolicy,
  stringify({
    apiVersion: 'audit.k8s.io/v1',
    kind: 'Policy',
    omitStages: ['RequestReceived', 'ResponseStarted'],
    rules: [{ level: 'Metadata' }],
  }),
);
say(`sizes ${sizes.join(', ')}; building or finding Kueue`);
const binary = kueueBinary();
const cp = await startControlPlane({
  name: 'peers',
  apiServerArgs: [
    `--audit-policy-file=${auditPolicy}`,
    `--audit-log-path=${auditLog}`,
    '--audit-log-format=json',
    '--audit-log-maxsize=0',
  ],
});
const adminKc = cp.kubeConfig('admin');
// In its own process: its spawns of git-http-backend must not block tollgate's loop.
const git = await startGitServerProcess();
/** A kube-scheduler with nothing carried over from the side before (see the header). */
async function freshScheduler(): Promise<void> {
  say(`kube-scheduler restarted in ${await cp.restartScheduler()} ms`);
}
const kubelet = new SimulatedKubelet(adminKc, { concurrency: 16 });
const total = sizes.reduce((a, b) => a + b, 0) * 2;
for (let i = 1; i <= Math.ceil(total / 1000) + 1; i++)
  await kubelet.addNode(`peers-node-${i}`, { cpu: '640', memory: '2560Gi', pods: 1000 });
await kubelet.start();
const runs: SideRun[] = [];
say(`Kueue client QPS: ${kueueQps ?? 'default (50, burst 100)'}`);
try {
  installKueueCrds(cp);
  const kueueKubeconfigFile = await kueueKubeconfig(cp, work);
  const certDir = kueueCertificates(work);
  const tollgateNamespaces = sizes.map((n) => `peers-${runId}-tollgate-${n}`);
  const policyUrl = git.createRepo('policy');
  await pushTree(
    git,
    policyUrl,
    benchPolicyFiles({
      namespaces: tollgateNamespaces,
      pods: Math.max(...sizes),
      gate: tollgateGate,
      gatePolicy: 'bench-ready',
      conditions: [{ type: 'Budget' }],
    }),
    { message: 'peers bench policy' },
  );
  for (const pods of sizes) {
    const kueueNs = `peers-${runId}-kueue-${pods}`;
    await adminKc.makeApiClient(CoreV1Api).createNamespace({
      body: { metadata: { name: kueueNs, labels: { 'tollgate.io/bench-peer': 'kueue' } } },
    });
    await kueueQueues(adminKc, kueueNs, pods);
    await freshScheduler();
    const kueue = await startKueue(binary, kueueKubeconfigFile, certDir, work);
    try {
      runs.push(await measure('kueue', pods, kueue, adminKc, kueueNs, auditLog));
    } finally {
      await kueue.stop();
    }
    say(`kueue ${pods}: ${JSON.stringify(runs.at(-1))}`);
    const tollgateNs = `peers-${runId}-tollgate-${pods}`;
    await ensureNamespace(adminKc, tollgateNs);
    await freshScheduler();
    const tollgate = await startTollgate(cp, git, policyUrl, work);
    try {
      runs.push(await measure('tollgate', pods, tollgate, adminKc, tollgateNs, auditLog));
    } finally {
      await tollgate.stop();
    }
    say(`tollgate ${pods}: ${JSON.stringify(runs.at(-1))}`);
  }
} finally {
  await kubelet.stop();
  await git.close();
  await cp.stop();
}

// ---- report

const header = [
  'side',
  'pods',
  'released',
  'wall s',
  'p50 ms',
  'p99 ms',
  'API req/pod',
  'CPU s',
  'peak RSS MiB',
];
const rows = runs.map((r) => [
  r.side,
  String(r.pods),
  String(r.released),
  (r.wallMs / 1000).toFixed(1),
  r.latencyMs.p50.toFixed(0),
  r.latencyMs.p99.toFixed(0),
  r.apiRequestsPerPod.toFixed(2),
  r.cpuSeconds.toFixed(1),
  r.peakRssMiB.toFixed(0),
]);
const widths = header.map((_, i) => Math.max(...[header, ...rows].map((row) => row[i]!.length)));
for (const row of [header, ...rows])
  console.log(row.map((c, i) => c.padEnd(widths[i]!)).join('  '));
const machine = { cpus: cpus().length, load: loadavg().map((l) => Number(l.toFixed(2))) };
const outDir = join(root, 'bench/results');
mkdirSync(outDir, { recursive: true });
const outFile = join(outDir, `peers-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(
  outFile,
  `${JSON.stringify({ at: new Date().toISOString(), machine, runs }, null, 2)}\n`,
);
console.log(`machine: ${machine.cpus} cores, load ${machine.load.join(' ')}; results: ${outFile}`);
const missing = runs.filter((r) => r.released !== r.pods);
for (const r of missing) console.error(`peers: ${r.side} released ${r.released} of ${r.pods}`);
say(`logs and audit log: ${work}`);
process.exit(missing.length > 0 ? 1 : 0);
