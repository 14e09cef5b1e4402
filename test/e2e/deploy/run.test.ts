/**
 * `tollgate run` as a real process (src/cli/main.ts), as an operator runs it:
 * - a wrong configuration exits 2 before anything starts, listing every problem (a
 *   policy that cannot be read or is invalid does not exit: policy-unavailable.test.ts);
 * - two replicas against the real control plane, a real Git server (policy + audit) and
 *   the simulated kubelet, both authenticated as the harness's `tollgate` identity, i.e.
 *   exactly the RBAC shipped in deploy/base/rbac.yaml. The leader is SIGKILLed in the
 *   middle of releasing; the standby must take the lease within lease duration + one
 *   retry period, finish the job, and no pod may be released twice (an independent
 *   watch counts every gate removal). SIGTERM then stops the survivor cleanly: exit 0,
 *   lease released, audit pushed.
 *
 * Run: node --test --test-concurrency=1 test/e2e/deploy/run.test.ts
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoordinationV1Api, CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { SimulatedKubelet } from '../../support/kubelet.ts';
import { startGitServer, pushTree, type GitServer } from '../../support/git-server.ts';
import { creatable, eventually } from '../../support/eventually.ts';
import { aPod } from '../../builders/pod.ts';
import { cleanEnv } from '../../../bench/tollgate-process.ts';
import { oneGatePolicy } from '../../builders/policy-files.ts';
import { runLeaseTimings, spawnTollgateRun } from '../../support/tollgate-run.ts';
import { BudgetWatcher } from '../gate-release/harness.ts';
import { deployDir, freePort, kustomizeBuild, withMonitoring } from './tools.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const cli = join(repoRoot, 'src/cli/main.ts');
const namespace = 'run-e2e';
const gate = 'run.tollgate.io/ready';
const PODS = Number(process.env.TOLLGATE_E2E_RUN_PODS ?? 400);
const timings = runLeaseTimings;
const leaseName = 'tollgate-run-e2e';
const policyFromGit = process.env.TOLLGATE_E2E_RUN_POLICY !== 'dir';

function runCli(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolvePromise) => {
    const child = spawn(process.execPath, [cli, ...args], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('exit', (code) => resolvePromise({ code, stdout, stderr }));
  });
}

describe('tollgate run: configuration', () => {
  it('a wrong configuration exits 2 before anything starts, naming every problem', async () => {
    const port = await freePort();
    const result = await runCli(
      [
        'run',
        '--policy-repo',
        'ftp://git.example/p.git',
        '--metrics-address',
        `127.0.0.1:${port}`,
        '--lease-duration',
        '5s',
        '--log-level',
        'loud',
      ],
      // A home without ~/.kube/config, which `run` would otherwise use as kubectl does.
      cleanEnv({
        TOLLGATE_RETRY_PERIOD: 'often',
        HOME: mkdtempSync(join(tmpdir(), 'tollgate-run-home-')),
      }),
    );
    assert.equal(result.code, 2);
    const expected = [
      /--kubeconfig \/ TOLLGATE_KUBECONFIG: not set, and this is not a pod/,
      /--policy-repo \/ TOLLGATE_POLICY_REPO: "ftp:\/\/git\.example\/p\.git" is not an http\(s\) or SSH URL/,
      /--retry-period \/ TOLLGATE_RETRY_PERIOD: "often" is not a duration/,
      /--log-level \/ TOLLGATE_LOG_LEVEL: "loud" is not one of/,
    ];
    for (const pattern of expected) assert.match(result.stderr, pattern);
    assert.match(result.stderr, /nothing was started/);
    // Nothing started: the metrics port is still free.
    const probe = createServer();
    await new Promise<void>((r, reject) => {
      probe.once('error', reject);
      probe.listen(port, '127.0.0.1', r);
    });
    await new Promise<void>((r) => probe.close(() => r()));
  });
});

interface Replica {
  readonly identity: string;
  readonly child: ChildProcess;
  readonly url: string;
  readonly log: string;
  readonly exited: Promise<number | null>;
}

describe('tollgate run: two replicas on the real control plane', () => {
  let cp: ControlPlane;
  let core: CoreV1Api;
  let kubelet: SimulatedKubelet;
  let git: GitServer;
  let policyUrl: string;
  let auditUrl: string;
  let watcher: BudgetWatcher;
  const replicas: Replica[] = [];
  const work = mkdtempSync(join(tmpdir(), 'tollgate-run-e2e-'));

  const policyFiles = (): Record<string, string> =>
    oneGatePolicy({
      cluster: 'run-e2e',
      tenant: 'run',
      namespace,
      gate,
      audit: { maxDelay: '200ms' },
      pacing: { maxInFlight: 40, releasesPerSecond: 40, batchSize: 40 },
    });

  /** The policy as a Git repository (default), or as a folder with TOLLGATE_E2E_RUN_POLICY=dir. */
  const policyDir = join(work, 'policy');
  const policy = () => (policyFromGit ? { url: policyUrl, ref: 'main' } : { dir: policyDir });

  async function startReplica(identity: string): Promise<Replica> {
    const { child, url, log, exited } = await spawnTollgateRun({
      kubeconfig: cp.tollgateKubeconfig,
      identity,
      policy: policy(),
      gitToken: { env: 'E2E_GIT_TOKEN' },
      audit: { url: auditUrl },
      cacheDir: join(work, identity),
      leaseName,
      log: join(work, `${identity}.log`),
      env: cleanEnv({ E2E_GIT_TOKEN: git.token }),
      expirySweep: '*/2 * * * * *',
    });
    const replica = { identity, child, url, log, exited };
    replicas.push(replica);
    const dead = exited.then((code) => {
      throw new Error(
        `${identity} exited ${code} before it was ready:\n${readFileSync(log, 'utf8').slice(-3000)}`,
      );
    });
    const ready = eventually(
      `${identity} ready`,
      async () => (await fetch(`${replica.url}/readyz`).catch(() => undefined))?.status === 200,
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    await Promise.race([ready, dead]);
    dead.catch(() => undefined);
    return replica;
  }

  const readLease = () =>
    cp
      .kubeConfig('admin')
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace: 'tollgate-system', name: leaseName });
  const holder = async (): Promise<string | undefined> => (await readLease()).spec?.holderIdentity;
  const leaderGauge = async (replica: Replica): Promise<number> => {
    const text = await (await fetch(`${replica.url}/metrics`)).text();
    return Number(/^tollgate_leader (\S+)$/m.exec(text)?.[1]);
  };

  before(async () => {
    cp = await sharedControlPlane();
    core = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
    kubelet = new SimulatedKubelet(cp.kubeConfig('admin'), { concurrency: 16 });
    for (let i = 1; i <= 3; i++)
      await kubelet.addNode(`run-node-${i}`, { cpu: '200', memory: '512Gi', pods: 600 });
    await kubelet.start();
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    git = await startGitServer();
    policyUrl = git.createRepo('policy');
    auditUrl = git.createRepo('audit');
    await pushTree(git, policyUrl, policyFiles(), { message: 'policy v1' });
    for (const [path, content] of Object.entries(policyFiles())) {
      mkdirSync(dirname(join(policyDir, path)), { recursive: true });
      writeFileSync(join(policyDir, path), content);
    }
    watcher = new BudgetWatcher(
      cp.kubeConfig('admin'),
      () => ({ run: { namespaces: [namespace], gatePrefix: 'run.tollgate.io/', maxInFlight: 40 } }),
      () => 40,
    );
    await watcher.start();
  });

  after(async () => {
    for (const replica of replicas)
      if (replica.child.exitCode === null) replica.child.kill('SIGKILL');
    await watcher?.stop();
    await kubelet?.stop();
    await git?.close();
  });

  it('the leader is SIGKILLed mid-release: the standby takes over once the lease expired, in one transition, no pod is released twice', async () => {
    const a = await startReplica('replica-a');
    await eventually('replica-a leads', async () => (await holder()) === 'replica-a', {
      timeoutMs: 10_000,
    });
    const b = await startReplica('replica-b');
    assert.equal(await leaderGauge(a), 1);
    assert.equal(await leaderGauge(b), 0, 'the standby is ready but does not lead');

    // /readyz says why it is ready; /metrics serves every series the shipped dashboard
    // and alerts query (so none of them watches a name tollgate never exports).
    const readyz = await (await fetch(`${a.url}/readyz?verbose`)).text();
    assert.match(readyz, /\[\+\] policy ok\n\[\+\] cluster-view ok\n\[\+\] stale-guard ok\nok/);
    const exported = new Set(
      [
        ...(await (await fetch(`${a.url}/metrics`)).text()).matchAll(/^# TYPE (\S+) (\S+)$/gm),
      ].flatMap(([, name, type]) =>
        type === 'histogram' ? [`${name}_bucket`, `${name}_sum`, `${name}_count`] : [name!],
      ),
    );
    const base = withMonitoring();
    const queried = JSON.stringify([
      base.find((o) => o.kind === 'PrometheusRule'),
      base.find((o) => o.metadata?.name === 'tollgate-dashboard'),
    ]).match(/tollgate_[a-z0-9_]+/g)!;
    const missing = [...new Set(queried)].filter((name) => !exported.has(name));
    assert.deepEqual(missing, [], 'series queried by deploy/ that tollgate run does not export');

    const pods: V1Pod[] = Array.from({ length: PODS }, (_, i) =>
      aPod(`p-${String(i).padStart(4, '0')}`, namespace)
        .gated(gate)
        .requests({ cpu: '100m', memory: '32Mi' })
        .obj(),
    );
    const ours = new Set(pods.map((p) => `${namespace}/${p.metadata!.name}`));
    const released = () =>
      [...watcher.seen.entries()].filter(([k, s]) => ours.has(k) && s.releases > 0).length;
    let next = 0;
    const creating = Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < pods.length)
          await core.createNamespacedPod({ namespace, body: creatable(pods[next++]!) });
      }),
    );

    await eventually('a quarter released by replica-a', async () => released() >= PODS / 4, {
      timeoutMs: 120_000,
      intervalMs: 20,
    });
    // The Lease as replica-a last renewed it before the kill (or earlier).
    const beforeKill = (await readLease()).spec;
    a.child.kill('SIGKILL');
    const killedAt = Date.now();
    await a.exited;
    const atKill = released();
    let takeoverAt: number | undefined;
    while (takeoverAt === undefined) {
      if ((await holder()) === 'replica-b') takeoverAt = Date.now();
      else if (Date.now() - killedAt > 3 * timings.lease)
        assert.fail('replica-b never took the lease');
      else await sleep(25);
    }
    const takeoverMs = takeoverAt - killedAt;
    const afterTakeover = (await readLease()).spec;

    await creating;
    await eventually(`all ${PODS} released`, async () => released() >= PODS, {
      timeoutMs: 180_000,
      intervalMs: 100,
      describe: () => `${released()} released`,
    });
    assert.equal(await leaderGauge(b), 1);

    assert.deepEqual(
      watcher.violations.slice(0, 5),
      [],
      `${watcher.violations.length} pacing violations across the failover`,
    );
    for (const key of ours) {
      const seen = watcher.seen.get(key)!;
      assert.equal(seen.releases, 1, `${key} released ${seen.releases} times`);
    }

    // SIGTERM: clean exit 0, lease released, audit pushed.
    const stoppingAt = Date.now();
    b.child.kill('SIGTERM');
    const code = await b.exited;
    const shutdownMs = Date.now() - stoppingAt;
    assert.equal(code, 0, `replica-b exit code; log:\n${readFileSync(b.log, 'utf8').slice(-2000)}`);
    assert.equal(await holder(), undefined, 'the lease is released on shutdown');
    const grace = (
      kustomizeBuild(`${deployDir}/base`).find((o) => o.kind === 'Deployment') as unknown as {
        spec: { template: { spec: { terminationGracePeriodSeconds: number } } };
      }
    ).spec.template.spec.terminationGracePeriodSeconds;
    assert.ok(
      shutdownMs < grace * 1000,
      `shutdown took ${shutdownMs}ms; the Deployment grants ${grace}s before SIGKILL`,
    );

    const source = await openAuditSource(auditUrl, 'tollgate/audit', { token: git.token });
    const history = await readAuditHistory(source);
    source.close();
    const releases = history
      .flatMap((c) => c.records)
      .filter((r) => r.kind === 'Release' && r.outcome.result === 'succeeded');
    const byController = new Map<string, number>();
    for (const commit of history) {
      const controller = /Tollgate-Controller: (\S+)/.exec(commit.message ?? '')?.[1] ?? 'unknown';
      byController.set(controller, (byController.get(controller) ?? 0) + commit.records.length);
    }
    const succeededPods = new Set(releases.map((r) => `${r.target.namespace}/${r.target.name}`));
    assert.equal(
      releases.length,
      succeededPods.size,
      'at most one successful Release recorded per pod',
    );
    // The successor recovered the outcomes the killed leader left open, so the record
    // accounts for every release.
    const recovered = releases.filter((r) => r.reason.startsWith('recovered')).length;
    assert.equal(
      succeededPods.size,
      PODS,
      `${PODS - succeededPods.size} releases have no successful outcome in the audit`,
    );

    console.log(
      `# run: ${PODS} pods; kill at ${atKill} released; takeover ${takeoverMs}ms after SIGKILL (lease ${timings.lease}ms + retry ${timings.retry}ms); ` +
        `SIGTERM -> exit in ${shutdownMs}ms; audit commits ${history.length}, successful releases recorded ${releases.length} (${recovered} recovered by the successor); records by controller ${JSON.stringify(Object.fromEntries(byController))}`,
    );
    // Ordered and counted from the Lease record, not timed: replica-b took the lease only
    // after replica-a's last renewal had expired, in one transition. (How soon after is
    // counted in lease reads in leader.test.ts; the deadlines are unit-tested on a clock.)
    assert.equal(beforeKill?.holderIdentity, 'replica-a');
    assert.equal(afterTakeover?.leaseTransitions, (beforeKill?.leaseTransitions ?? 0) + 1);
    const renewedA = new Date(beforeKill?.renewTime ?? 0).getTime();
    const acquiredB = new Date(afterTakeover?.acquireTime ?? 0).getTime();
    assert.ok(
      acquiredB >= renewedA + timings.lease,
      `replica-b acquired at ${afterTakeover?.acquireTime}, before replica-a's renewal of ${beforeKill?.renewTime} expired (${timings.lease}ms)`,
    );
  });
});
