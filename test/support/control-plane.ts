/**
 * A real local Kubernetes control plane for end-to-end tests: etcd, kube-apiserver,
 * kube-scheduler and kube-controller-manager built from upstream (test/cluster/build.sh),
 * started on free loopback ports in a temp folder. There is no kubelet; pair it with
 * `SimulatedKubelet` (test/support/kubelet.ts).
 *
 * Identities (static token file, so authentication is real but needs no PKI):
 * - `admin`: user tollgate-test-admin in system:masters.
 * - `tollgate`: the tollgate-system/tollgate ServiceAccount (a TokenRequest token), the
 *   identity the Deployment runs as, bound only by deploy/base/rbac.yaml, so RBAC
 *   mistakes in deploy/ fail tests the way they would fail in a cluster.
 * - `intruder`: user `intruder` with no bindings at all, for admission/RBAC denial tests.
 * The scheduler and controller manager run as their upstream identities
 * (system:kube-scheduler, system:kube-controller-manager with per-controller service
 * account credentials), so they get exactly the bootstrap RBAC they get in a cluster.
 *
 * Failure modes handled: a component that exits during start-up fails the start at once
 * with the tail of its log; every child is killed (SIGTERM, then SIGKILL) on stop() and
 * on process exit, even when a test throws; logs and data stay on disk when the test
 * process ends with a non-zero exit code (the folder is printed), and are removed
 * otherwise.
 *
 * `TOLLGATE_TEST_KUBECONFIG` set: nothing is started; the admin kubeconfig is that file,
 * and the `intruder` identity is a service account in tollgate-system too.
 */
import { reuseConnections } from '../../src/cluster/client.ts';
import { spawn, type ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import {
  mkdtempSync,
  mkdirSync,
  openSync,
  closeSync,
  readFileSync,
  writeFileSync,
  rmSync,
  existsSync,
} from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { request as httpRequest } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  KubeConfig,
  KubernetesObjectApi,
  CoreV1Api,
  PatchStrategy,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { parseAllDocuments, stringify } from 'yaml';

export type Identity = 'admin' | 'tollgate' | 'intruder';

export interface ControlPlane {
  /** https://127.0.0.1:PORT (or the external cluster's server). */
  readonly server: string;
  /** Path to a kubeconfig for system:masters. */
  readonly adminKubeconfig: string;
  /** Path to a kubeconfig for tollgate's ServiceAccount (tollgate-system/tollgate, RBAC from deploy/). */
  readonly tollgateKubeconfig: string;
  /** Path to a kubeconfig for `intruder`, an identity with no RBAC at all. */
  readonly intruderKubeconfig: string;
  /** True when running against TOLLGATE_TEST_KUBECONFIG instead of local binaries. */
  readonly external: boolean;
  /** Folder holding component logs (kept after a failed run). Empty when external. */
  readonly logDir: string;
  /** Milliseconds from start call to all components ready and RBAC applied. */
  readonly startMillis: number;
  kubeConfig(who?: Identity): KubeConfig;
  /** Text of kube-scheduler /metrics. */
  schedulerMetrics(): Promise<string>;
  /** Stops and starts kube-apiserver on the same port (watches break, clients relist). */
  restartApiServer(): Promise<void>;
  /**
   * Stops and starts kube-scheduler, ready again (its /readyz) before this resolves: a
   * scheduler with nothing carried over (no queued pods, no bindings or status writes
   * waiting in its client's rate limiter). Resolves to the milliseconds it took.
   */
  restartScheduler(): Promise<number>;
  /**
   * Compacts etcd at its current revision (the etcd v3 API's JSON gateway, as etcdctl
   * compact does): every older revision is gone, so a watch or list from one answers
   * 410 Gone. Returns the revision compacted at.
   */
  compactEtcd(): Promise<number>;
  /** Process ids of the running components, for memory measurements. */
  pids(): Record<string, number | undefined>;
  stop(): Promise<void>;
}

export interface ControlPlaneOptions {
  /** Extra kube-apiserver flags, e.g. `--max-requests-inflight=5`. */
  apiServerArgs?: string[];
  /** Extra kube-controller-manager flags (e.g. a different `--controllers`). */
  controllerManagerArgs?: string[];
  /** Names the temp folder and log lines. */
  name?: string;
}

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, '../..');
const rbacFile = join(repoRoot, 'deploy/base/rbac.yaml');
const tollgateNamespace = 'tollgate-system';
/**
 * kube-apiserver 1.37 stops listening within milliseconds of SIGTERM but then lingers in
 * its graceful-termination path for more than 5s; waiting that out would add seconds to
 * every test file, so it gets SIGKILL after this grace. etcd keeps the data consistent.
 */
const apiServerGraceMs = 2000;

const log = (message: string): void => {
  process.stderr.write(`[control-plane] ${message}\n`);
};

/** The folder with the four binaries: TOLLGATE_CLUSTER_BIN_DIR, or build.sh (cached). */
export function clusterBinDir(): string {
  const fromEnv = process.env.TOLLGATE_CLUSTER_BIN_DIR;
  if (fromEnv) return fromEnv;
  try {
    const out = execFileSync('bash', [join(repoRoot, 'test/cluster/build.sh')], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    return out.trim().split('\n').at(-1) ?? '';
  } catch (error) {
    throw new Error(
      `control plane: test/cluster/build.sh failed (${(error as Error).message}); install Go or set TOLLGATE_TEST_KUBECONFIG`,
      { cause: error },
    );
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

interface HttpAnswer {
  status: number;
  body: string;
}

/** GET over http(s); TLS verification off because component serving certs are self-signed. */
function get(url: string, token?: string, timeoutMs = 5000): Promise<HttpAnswer> {
  return new Promise((resolveGet, reject) => {
    const requester = url.startsWith('https:') ? httpsRequest : httpRequest;
    const req = requester(
      url,
      {
        method: 'GET',
        rejectUnauthorized: false,
        timeout: timeoutMs,
        headers: token ? { authorization: `Bearer ${token}` } : {},
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolveGet({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`timeout after ${timeoutMs}ms`)));
    req.on('error', reject);
    req.end();
  });
}

function tail(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

class Component {
  readonly name: string;
  readonly #binary: string;
  readonly #args: string[];
  readonly #logFile: string;
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  #stopping = false;
  readonly #restartOnCrash: boolean;
  #restartTimer: NodeJS.Timeout | undefined;
  /** Unexpected exits so far (each followed by a restart when restartOnCrash). */
  restarts = 0;
  /** Set when the process exited without being asked to: readiness waits fail fast on it. */
  crashed: string | undefined;

  /**
   * restartOnCrash: the scheduler and controller manager exit when the apiserver goes
   * away while they initialize (e.g. restartApiServer() right after start); in a cluster
   * the kubelet restarts them, so the harness does too. etcd and the apiserver do not
   * restart: their exit is a failure the test must see.
   */
  constructor(
    name: string,
    binary: string,
    args: string[],
    logFile: string,
    restartOnCrash = false,
  ) {
    this.name = name;
    this.#binary = binary;
    this.#args = args;
    this.#logFile = logFile;
    this.#restartOnCrash = restartOnCrash;
  }

  get pid(): number | undefined {
    return this.#child?.exitCode === null ? this.#child.pid : undefined;
  }

  get logFile(): string {
    return this.#logFile;
  }

  start(): void {
    this.#stopping = false;
    this.crashed = undefined;
    const fd = openSync(this.#logFile, 'a');
    // With setpriv (util-linux) the kernel SIGKILLs the component when the test process
    // dies, even by SIGKILL, where no exit hook runs; setpriv execs, so the pid is the
    // component's own.
    const child = setpriv
      ? spawn(setpriv, ['--pdeathsig', 'KILL', '--', this.#binary, ...this.#args], {
          stdio: ['ignore', fd, fd],
        })
      : spawn(this.#binary, this.#args, { stdio: ['ignore', fd, fd] });
    closeSync(fd);
    // Unreferenced: a forgotten stop() must not keep the test process alive forever; the
    // exit hook kills whatever is still running.
    child.unref();
    this.#child = child;
    live.add(child);
    this.#exited = new Promise((resolveExit) => {
      child.on('exit', (code, signal) => {
        live.delete(child);
        if (!this.#stopping) {
          this.crashed = `${this.name} exited (code ${code}, signal ${signal})`;
          log(
            this.restarts === 0
              ? `${this.crashed}; log ${this.#logFile}:\n${tail(this.#logFile, 15)}`
              : `${this.crashed} again`,
          );
          if (this.#restartOnCrash) {
            // Backoff like the kubelet's CrashLoopBackOff (shorter): while the apiserver
            // is down these components exit at once on every start.
            const delay = Math.min(500 * 2 ** this.restarts, 8000);
            this.restarts += 1;
            this.#restartTimer = setTimeout(() => {
              this.#restartTimer = undefined;
              if (this.#stopping) return;
              log(`restarting ${this.name} (restart ${this.restarts})`);
              this.start();
            }, delay);
            this.#restartTimer.unref();
          }
        }
        resolveExit();
      });
      child.on('error', (error) => {
        live.delete(child);
        this.crashed = `${this.name} could not start: ${error.message}`;
        resolveExit();
      });
    });
  }

  /** SIGTERM, then SIGKILL after graceMs. */
  async stop(graceMs = 5000): Promise<void> {
    this.#stopping = true;
    clearTimeout(this.#restartTimer);
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    // Referenced again while stopping: otherwise the event loop may drain before the
    // exit event arrives and the awaiting caller never resumes.
    child.ref();
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await this.#exited;
    clearTimeout(timer);
  }
}

/** Every child still running; killed synchronously at process exit whatever happened. */
const live = new Set<ChildProcess>();
const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((path) => existsSync(path));
/** Temp folders to remove at exit if the run passed (kept for diagnosis if it failed). */
const folders = new Set<string>();
let exitHooksInstalled = false;

function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  process.on('exit', (code) => {
    for (const child of live) child.kill('SIGKILL');
    const failed = code !== 0 || (process.exitCode !== undefined && process.exitCode !== 0);
    for (const folder of folders) {
      if (failed || process.env.TOLLGATE_KEEP_CLUSTER_LOGS) {
        // etcd's preallocated WAL is ~120 MiB per run and says nothing the logs do not.
        if (!process.env.TOLLGATE_KEEP_CLUSTER_LOGS)
          rmSync(join(folder, 'etcd'), { recursive: true, force: true });
        process.stderr.write(
          `[control-plane] run failed or logs requested: component logs kept in ${folder}/logs\n`,
        );
      } else {
        rmSync(folder, { recursive: true, force: true });
      }
    }
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      for (const child of live) child.kill('SIGKILL');
      process.exit(130);
    });
  }
}

async function waitFor(
  what: string,
  components: Component[],
  check: () => Promise<boolean>,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError = '';
  for (;;) {
    const crashed = components.find((c) => c.crashed);
    if (crashed)
      throw new Error(
        `control plane: ${crashed.crashed} while waiting for ${what}; log ${crashed.logFile}:\n${tail(crashed.logFile)}`,
      );
    try {
      if (await check()) return;
    } catch (error) {
      lastError = (error as Error).message;
    }
    if (Date.now() > deadline) {
      const logs = components
        .map((c) => `--- ${c.name} (${c.logFile}):\n${tail(c.logFile, 10)}`)
        .join('\n');
      throw new Error(
        `control plane: ${what} not ready after ${timeoutMs}ms (last error: ${lastError || 'not ready'})\n${logs}`,
      );
    }
    await sleep(100);
  }
}

function kubeconfigYaml(server: string, user: string, token: string, caFile?: string): string {
  const cluster: Record<string, unknown> = { server };
  if (caFile) cluster['certificate-authority'] = caFile;
  else cluster['insecure-skip-tls-verify'] = true;
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'tollgate-test', cluster }],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: user, context: { cluster: 'tollgate-test', user } }],
    'current-context': user,
  });
}

/** Like tollgate's own client (src/cluster/client.ts): one connection pool per identity. */
function loadKubeConfig(file: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(file);
  return reuseConnections(kc);
}

/** Server-side applies every document of deploy/base/rbac.yaml (idempotent on reuse). */
/**
 * A kubeconfig at `path` authenticating as the service account tollgate-system/`account`
 * with a token from the TokenRequest API (six hours, the API server's default audience).
 */
async function writeServiceAccountKubeconfig(
  admin: KubeConfig,
  account: string,
  path: string,
): Promise<string> {
  const cluster = admin.getCurrentCluster();
  if (!cluster) throw new Error('control plane: the admin kubeconfig has no current cluster');
  const answer = await admin.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
    name: account,
    namespace: tollgateNamespace,
    body: { spec: { audiences: [], expirationSeconds: 3600 * 6 } },
  });
  const kc = new KubeConfig();
  kc.loadFromClusterAndUser(cluster, { name: account, token: answer.status?.token });
  writeFileSync(path, kc.exportConfig(), { mode: 0o600 });
  return path;
}

async function applyRbac(admin: KubeConfig): Promise<void> {
  const objects = admin.makeApiClient(KubernetesObjectApi);
  const core = admin.makeApiClient(CoreV1Api);
  try {
    await core.createNamespace({ body: { metadata: { name: tollgateNamespace } } });
  } catch (error) {
    if ((error as { code?: number }).code !== 409) throw error;
  }
  const docs = parseAllDocuments(readFileSync(rbacFile, 'utf8'));
  for (const [index, doc] of docs.entries()) {
    if (doc.errors.length > 0)
      throw new Error(`${rbacFile}: document ${index + 1}: ${doc.errors[0]?.message}`);
    const spec = doc.toJS() as KubernetesObject | null;
    if (!spec) continue;
    try {
      await objects.patch(
        spec,
        undefined,
        undefined,
        'tollgate-test-harness',
        true,
        PatchStrategy.ServerSideApply,
      );
    } catch (error) {
      throw new Error(
        `${rbacFile}: document ${index + 1} (${spec.kind}/${spec.metadata?.name}) could not be applied: ${(error as Error).message}`,
        {
          cause: error,
        },
      );
    }
  }
}

export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  installExitHooks();
  if (process.env.TOLLGATE_TEST_KUBECONFIG)
    return attachExternal(process.env.TOLLGATE_TEST_KUBECONFIG);
  const started = Date.now();
  const name = options.name ?? 'e2e';
  const bin = clusterBinDir();
  for (const binary of ['etcd', 'kube-apiserver', 'kube-scheduler', 'kube-controller-manager']) {
    if (!existsSync(join(bin, binary)))
      throw new Error(`control plane: ${join(bin, binary)} is missing; run test/cluster/build.sh`);
  }
  const root = mkdtempSync(join(tmpdir(), `tollgate-cp-${name.replace(/[^a-z0-9-]/gi, '-')}-`));
  folders.add(root);
  const logDir = join(root, 'logs');
  const certDir = join(root, 'certs');
  mkdirSync(logDir);
  mkdirSync(certDir);

  const [etcdPort, etcdPeerPort, apiPort, schedulerPort, controllerPort] = await Promise.all([
    freePort(),
    freePort(),
    freePort(),
    freePort(),
    freePort(),
  ]);
  const server = `https://127.0.0.1:${apiPort}`;

  // Service-account signing keys: the apiserver issues tokens (TokenRequest), the
  // controller manager uses them for per-controller credentials.
  const { publicKey, privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const saPub = join(certDir, 'sa.pub');
  const saKey = join(certDir, 'sa.key');
  writeFileSync(saPub, publicKey);
  writeFileSync(saKey, privateKey, { mode: 0o600 });

  const token = (): string => randomBytes(24).toString('hex');
  const tokens = {
    admin: token(),
    intruder: token(),
    scheduler: token(),
    controllerManager: token(),
  };
  const tokenFile = join(certDir, 'tokens.csv');
  writeFileSync(
    tokenFile,
    [
      `${tokens.admin},tollgate-test-admin,uid-admin,"system:masters"`,
      `${tokens.intruder},intruder,uid-intruder,"tollgate-intruders"`,
      `${tokens.scheduler},system:kube-scheduler,uid-scheduler`,
      `${tokens.controllerManager},system:kube-controller-manager,uid-kcm`,
    ].join('\n') + '\n',
    { mode: 0o600 },
  );

  // The apiserver writes its self-signed serving cert (with its CA appended) here; the
  // cert names 127.0.0.1 when bound there, so kubeconfigs verify it.
  const servingCert = join(certDir, 'apiserver.crt');
  const kubeconfigs = {
    admin: join(root, 'admin.kubeconfig'),
    tollgate: join(root, 'tollgate.kubeconfig'),
    intruder: join(root, 'intruder.kubeconfig'),
    scheduler: join(root, 'scheduler.kubeconfig'),
    controllerManager: join(root, 'controller-manager.kubeconfig'),
  };
  const writeKubeconfigs = (caFile: string | undefined): void => {
    writeFileSync(
      kubeconfigs.admin,
      kubeconfigYaml(server, 'tollgate-test-admin', tokens.admin, caFile),
    );
    writeFileSync(
      kubeconfigs.intruder,
      kubeconfigYaml(server, 'intruder', tokens.intruder, caFile),
    );
    writeFileSync(
      kubeconfigs.scheduler,
      kubeconfigYaml(server, 'system:kube-scheduler', tokens.scheduler, caFile),
    );
    writeFileSync(
      kubeconfigs.controllerManager,
      kubeconfigYaml(server, 'system:kube-controller-manager', tokens.controllerManager, caFile),
    );
  };

  const etcd = new Component(
    'etcd',
    join(bin, 'etcd'),
    [
      '--name=tollgate-test',
      `--data-dir=${join(root, 'etcd')}`,
      `--listen-client-urls=http://127.0.0.1:${etcdPort}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdPort}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
      `--initial-cluster=tollgate-test=http://127.0.0.1:${etcdPeerPort}`,
      '--unsafe-no-fsync=true',
      '--log-level=warn',
    ],
    join(logDir, 'etcd.log'),
  );
  const apiServer = new Component(
    'kube-apiserver',
    join(bin, 'kube-apiserver'),
    [
      `--etcd-servers=http://127.0.0.1:${etcdPort}`,
      `--cert-dir=${certDir}`,
      `--secure-port=${apiPort}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      '--endpoint-reconciler-type=none',
      '--authorization-mode=RBAC',
      `--token-auth-file=${tokenFile}`,
      '--service-cluster-ip-range=10.0.0.0/24',
      '--service-account-issuer=https://tollgate-test.invalid',
      `--service-account-key-file=${saPub}`,
      `--service-account-signing-key-file=${saKey}`,
      '--disable-admission-plugins=ServiceAccount',
      '--allow-privileged=true',
      '--profiling=false',
      '--v=1',
      ...(options.apiServerArgs ?? []),
    ],
    join(logDir, 'kube-apiserver.log'),
  );
  const scheduler = new Component(
    'kube-scheduler',
    join(bin, 'kube-scheduler'),
    [
      `--kubeconfig=${kubeconfigs.scheduler}`,
      `--authentication-kubeconfig=${kubeconfigs.scheduler}`,
      `--authorization-kubeconfig=${kubeconfigs.scheduler}`,
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
      `--secure-port=${schedulerPort}`,
      `--cert-dir=${join(certDir, 'scheduler')}`,
      '--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics',
      '--v=1',
    ],
    join(logDir, 'kube-scheduler.log'),
    true,
  );
  const controllerManager = new Component(
    'kube-controller-manager',
    join(bin, 'kube-controller-manager'),
    [
      `--kubeconfig=${kubeconfigs.controllerManager}`,
      `--authentication-kubeconfig=${kubeconfigs.controllerManager}`,
      `--authorization-kubeconfig=${kubeconfigs.controllerManager}`,
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
      `--secure-port=${controllerPort}`,
      `--cert-dir=${join(certDir, 'controller-manager')}`,
      '--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics',
      '--use-service-account-credentials=true',
      `--service-account-private-key-file=${saKey}`,
      // The node lifecycle controller is off unless a test names its own --controllers.
      ...(options.controllerManagerArgs?.some((a) => a.startsWith('--controllers='))
        ? []
        : ['--controllers=*,-nodelifecycle']),
      '--v=1',
      ...(options.controllerManagerArgs ?? []),
    ],
    join(logDir, 'kube-controller-manager.log'),
    true,
  );
  const all = [etcd, apiServer, scheduler, controllerManager];
  const stopAll = async (): Promise<void> => {
    // Reverse order: clients first, so they do not log a storm of connection errors.
    await Promise.all([scheduler.stop(), controllerManager.stop()]);
    await apiServer.stop(apiServerGraceMs);
    await etcd.stop();
  };

  const apiReady = async (): Promise<boolean> =>
    (await get(`${server}/readyz`, tokens.admin)).status === 200;
  const schedulerReady = async (): Promise<boolean> =>
    (await get(`https://127.0.0.1:${schedulerPort}/readyz`)).status === 200;
  try {
    etcd.start();
    await waitFor(
      'etcd',
      [etcd],
      async () => (await get(`http://127.0.0.1:${etcdPort}/health`)).status === 200,
      30_000,
    );
    const etcdMillis = Date.now() - started;
    apiServer.start();
    await waitFor('kube-apiserver /readyz', [etcd, apiServer], apiReady, 60_000);
    const apiMillis = Date.now() - started;
    writeKubeconfigs(existsSync(servingCert) ? servingCert : undefined);
    scheduler.start();
    controllerManager.start();
    const admin = loadKubeConfig(kubeconfigs.admin);
    await Promise.all([
      applyRbac(admin).then(() =>
        writeServiceAccountKubeconfig(admin, 'tollgate', kubeconfigs.tollgate),
      ),
      waitFor('kube-scheduler /readyz', all, schedulerReady, 60_000),
      waitFor(
        'kube-controller-manager /healthz',
        all,
        async () => (await get(`https://127.0.0.1:${controllerPort}/healthz`)).status === 200,
        60_000,
      ),
    ]);
    const startMillis = Date.now() - started;
    log(
      `${name}: started in ${startMillis}ms (etcd ${etcdMillis}ms, apiserver ready ${apiMillis}ms) at ${server}; logs ${logDir}`,
    );

    let stopped = false;
    return {
      server,
      adminKubeconfig: kubeconfigs.admin,
      tollgateKubeconfig: kubeconfigs.tollgate,
      intruderKubeconfig: kubeconfigs.intruder,
      external: false,
      logDir,
      startMillis,
      kubeConfig(who: Identity = 'admin'): KubeConfig {
        return loadKubeConfig(kubeconfigs[who]);
      },
      async schedulerMetrics(): Promise<string> {
        const answer = await get(`https://127.0.0.1:${schedulerPort}/metrics`);
        if (answer.status !== 200)
          throw new Error(
            `kube-scheduler /metrics answered ${answer.status}: ${answer.body.slice(0, 200)}`,
          );
        return answer.body;
      },
      async restartApiServer(): Promise<void> {
        if (stopped) throw new Error('control plane: restartApiServer after stop()');
        const begun = Date.now();
        await apiServer.stop(apiServerGraceMs);
        const stoppedAfter = Date.now() - begun;
        apiServer.start();
        await waitFor('kube-apiserver /readyz after restart', [etcd, apiServer], apiReady, 60_000);
        log(
          `${name}: kube-apiserver restarted (stopped in ${stoppedAfter}ms, ready again after ${Date.now() - begun}ms)`,
        );
      },
      async restartScheduler(): Promise<number> {
        if (stopped) throw new Error('control plane: restartScheduler after stop()');
        const begun = performance.now();
        await scheduler.stop();
        scheduler.start();
        await waitFor('kube-scheduler /readyz after restart', all, schedulerReady, 60_000);
        return Math.round(performance.now() - begun);
      },
      async compactEtcd(): Promise<number> {
        const etcdApi = async (path: string, body: object): Promise<Record<string, unknown>> => {
          const answer = await fetch(`http://127.0.0.1:${etcdPort}/v3/${path}`, {
            method: 'POST',
            body: JSON.stringify(body),
          });
          if (!answer.ok) throw new Error(`etcd ${path} answered ${answer.status}`);
          return (await answer.json()) as Record<string, unknown>;
        };
        const range = await etcdApi('kv/range', { key: Buffer.from('/').toString('base64') });
        const revision = Number((range.header as { revision: string }).revision);
        await etcdApi('kv/compaction', { revision, physical: true });
        return revision;
      },
      pids(): Record<string, number | undefined> {
        return Object.fromEntries(all.map((c) => [c.name, c.pid]));
      },
      async stop(): Promise<void> {
        if (stopped) return;
        stopped = true;
        await stopAll();
      },
    };
  } catch (error) {
    await stopAll();
    log(`${name}: start failed; component logs kept in ${logDir}`);
    folders.delete(root);
    throw error;
  }
}

/** TOLLGATE_TEST_KUBECONFIG: use an existing cluster; identities are service accounts. */
async function attachExternal(file: string): Promise<ControlPlane> {
  const started = Date.now();
  if (!existsSync(file)) throw new Error(`TOLLGATE_TEST_KUBECONFIG=${file}: file does not exist`);
  const admin = loadKubeConfig(file);
  const cluster = admin.getCurrentCluster();
  if (!cluster)
    throw new Error(`TOLLGATE_TEST_KUBECONFIG=${file}: no current cluster in the current context`);
  await applyRbac(admin);
  const core = admin.makeApiClient(CoreV1Api);
  try {
    await core.createNamespacedServiceAccount({
      namespace: tollgateNamespace,
      body: { metadata: { name: 'intruder' } },
    });
  } catch (error) {
    if ((error as { code?: number }).code !== 409) throw error;
  }
  const root = mkdtempSync(join(tmpdir(), 'tollgate-external-'));
  folders.add(root);
  const write = (account: string): Promise<string> =>
    writeServiceAccountKubeconfig(admin, account, join(root, `${account}.kubeconfig`));
  const tollgateKubeconfig = await write('tollgate');
  const intruderKubeconfig = await write('intruder');
  const unsupported = (what: string): Error =>
    new Error(
      `control plane: ${what} is not supported against an external cluster (TOLLGATE_TEST_KUBECONFIG)`,
    );
  const files = { admin: file, tollgate: tollgateKubeconfig, intruder: intruderKubeconfig };
  return {
    server: cluster.server,
    adminKubeconfig: file,
    tollgateKubeconfig,
    intruderKubeconfig,
    external: true,
    logDir: '',
    startMillis: Date.now() - started,
    kubeConfig: (who: Identity = 'admin') => loadKubeConfig(files[who]),
    schedulerMetrics: () => Promise.reject(unsupported('schedulerMetrics()')),
    restartApiServer: () => Promise.reject(unsupported('restartApiServer()')),
    restartScheduler: () => Promise.reject(unsupported('restartScheduler()')),
    compactEtcd: () => Promise.reject(unsupported('compactEtcd()')),
    pids: () => ({}),
    stop: () => Promise.resolve(),
  };
}

let shared: Promise<ControlPlane> | undefined;

/**
 * One control plane per test process (node --test runs each file in its own process),
 * started on first use and stopped at exit, so the tests of a file share it.
 * Tests using it must not depend on an empty cluster: use their own namespaces.
 */
export function sharedControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  if (!shared) {
    shared = startControlPlane({ name: 'shared', ...options });
    // stop() is asynchronous; at exit the synchronous hook SIGKILLs whatever is left.
    // beforeExit gives a clean SIGTERM shutdown when the event loop drains normally.
    process.once('beforeExit', () => {
      void shared?.then((cp) => cp.stop()).catch(() => undefined);
    });
  }
  return shared;
}
