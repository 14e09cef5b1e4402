/**
 * A restart that must not lose or double outcomes: `tollgate run` (its own process) on
 * the real control plane releases gated pods, its audit branch on the real git server
 * behind a small proxy that SIGKILLs the process in the middle of a push, twice: once
 * before the push reaches the server (the commits stay unpushed in the cache) and once
 * after the server took it but before the process heard back. Each time tollgate is
 * started again on the same cache folder. When all pods are released, `tollgate audit
 * verify --kubeconfig` must exit 0: every intent has exactly one outcome, after it, and
 * every released pod has its succeeded Release, and every commit is signed with the key
 * given by --audit-signing-key-file. After the first kill every push is slowed
 * down (a busy forge), so recovery reading the trail before the leftovers landed shows.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import {
  createServer as createHttpServer,
  request,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { SimulatedKubelet } from '../../support/kubelet.ts';
import { startGitServer, pushTree, type GitServer } from '../../support/git-server.ts';
import { creatable, eventually } from '../../support/eventually.ts';
import { aPod } from '../../builders/pod.ts';
import { cleanEnv } from '../../../bench/tollgate-process.ts';
import { oneGatePolicy } from '../../builders/policy-files.ts';
import { spawnTollgateRun, type TollgateRunProcess } from '../../support/tollgate-run.ts';
import { sshSigner } from '../../../src/audit/sign.ts';

const root = new URL('../../../', import.meta.url).pathname;
const cli = join(root, 'src/cli/main.ts');
const namespace = 'audit-restart';
const gate = 'restart.tollgate.io/ready';
const PODS = 60;

/** When a push (POST git-receive-pack) arrives: kill the process before or after the server has it. */
type KillPlan = { readonly when: 'before-server' | 'after-server'; readonly kill: () => void };

/** A proxy in front of the git server that carries out the next kill plan at a push. */
async function killingProxy(
  target: string,
): Promise<{ url: string; plan: KillPlan[]; server: Server; slow: { pushMs: number } }> {
  const plan: KillPlan[] = [];
  const slow = { pushMs: 0 };
  const upstream = new URL(target);
  const server = createHttpServer((incoming, outgoing) => {
    const isPush = incoming.method === 'POST' && (incoming.url ?? '').endsWith('/git-receive-pack');
    if (isPush && slow.pushMs > 0) {
      incoming.pause();
      setTimeout(() => handle(incoming, outgoing, isPush), slow.pushMs);
      return;
    }
    handle(incoming, outgoing, isPush);
  });
  const handle = (incoming: IncomingMessage, outgoing: ServerResponse, isPush: boolean): void => {
    const step = isPush ? plan.shift() : undefined;
    if (step?.when === 'before-server') {
      step.kill();
      incoming.socket.destroy();
      return;
    }
    const forward = request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: incoming.method,
        path: incoming.url,
        headers: incoming.headers,
      },
      (response) => {
        if (step?.when === 'after-server') {
          // Let the server finish the push, then kill before the client hears the answer.
          response.resume();
          response.on('end', () => {
            step.kill();
            incoming.socket.destroy();
          });
          return;
        }
        outgoing.writeHead(response.statusCode ?? 502, response.headers);
        response.pipe(outgoing);
      },
    );
    forward.on('error', () => outgoing.destroy());
    incoming.pipe(forward);
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    plan,
    server,
    slow,
  };
}

describe('restart during audit pushes', () => {
  let cp: ControlPlane;
  let core: CoreV1Api;
  let kubelet: SimulatedKubelet;
  let git: GitServer;
  let proxy: Awaited<ReturnType<typeof killingProxy>>;
  const children: ChildProcess[] = [];
  const work = mkdtempSync(join(tmpdir(), 'tollgate-audit-restart-'));

  before(async () => {
    cp = await sharedControlPlane();
    core = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
    kubelet = new SimulatedKubelet(cp.kubeConfig('admin'), { concurrency: 8 });
    await kubelet.addNode('restart-node-1', { cpu: '100', memory: '256Gi', pods: 200 });
    await kubelet.start();
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    git = await startGitServer();
    proxy = await killingProxy(git.url);
  });
  after(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    proxy?.server.close();
    await kubelet?.stop();
    await git?.close();
  });

  it('SIGKILL before and after a push reaches the server, restart on the same cache: verify exits 0', async () => {
    const policyUrl = git.createRepo('policy');
    const auditUrl = git.createRepo('audit').replace(git.url, proxy.url);
    await pushTree(
      git,
      policyUrl,
      oneGatePolicy({
        cluster: 'restart',
        tenant: 'restart',
        namespace,
        gate,
        pacing: { maxInFlight: 100, releasesPerSecond: 8, batchSize: 4 },
      }),
    );
    for (let index = 0; index < PODS; index += 1)
      await core.createNamespacedPod({
        namespace,
        body: creatable(
          aPod(`p-${String(index).padStart(3, '0')}`, namespace)
            .gated(gate)
            .requests({ cpu: '10m', memory: '16Mi' })
            .obj(),
        ),
      });

    const log = join(work, 'tollgate.log');
    // Signing enabled from the run configuration: every commit, recovery's included, is
    // signed, and verify requires it (--allowed-signers).
    const signingKey = join(work, 'audit-key.pem');
    const { privateKey } = generateKeyPairSync('ed25519');
    writeFileSync(signingKey, privateKey.export({ format: 'pem', type: 'pkcs8' }) as string);
    const allowedSigners = join(work, 'allowed_signers');
    writeFileSync(
      allowedSigners,
      `tollgate@restart ${sshSigner(readFileSync(signingKey, 'utf8')).publicKey}\n`,
    );
    const start = async (): Promise<TollgateRunProcess> => {
      const run = await spawnTollgateRun({
        kubeconfig: cp.tollgateKubeconfig,
        identity: 'restart-0',
        policy: { url: policyUrl, ref: 'main' },
        gitToken: { env: 'E2E_GIT_TOKEN' },
        audit: { url: auditUrl, signingKeyFile: signingKey },
        cacheDir: join(work, 'cache'),
        leaseName: 'tollgate-audit-restart',
        log,
        env: cleanEnv({ E2E_GIT_TOKEN: git.token }),
      });
      children.push(run.child);
      return run;
    };
    const released = async (): Promise<number> =>
      (await core.listNamespacedPod({ namespace })).items.filter(
        (pod) => (pod.spec?.schedulingGates ?? []).length === 0,
      ).length;

    const verify = (): Promise<{ code: number; out: string }> =>
      new Promise((resolve) =>
        execFile(
          process.execPath,
          [
            cli,
            'audit',
            'verify',
            '--repo',
            auditUrl,
            '--kubeconfig',
            cp.adminKubeconfig,
            '--allowed-signers',
            allowedSigners,
          ],
          { env: cleanEnv({ TOLLGATE_GIT_TOKEN: git.token }) },
          (error, stdout, stderr) =>
            resolve({
              code: error ? Number((error as { code?: number }).code) : 0,
              out: stdout + stderr,
            }),
        ),
      );
    const releasesUnderWay = async (what: string): Promise<void> => {
      const before = await released();
      await eventually(what, async () => (await released()) > before, {
        timeoutMs: 60_000,
        intervalMs: 50,
        describe: () => readFileSync(log, 'utf8').slice(-1500),
      });
    };

    for (const when of ['before-server', 'after-server'] as const) {
      const run = await start();
      let killed = false;
      await releasesUnderWay(`releases under way before the kill (${when})`);
      proxy.plan.push({
        when,
        kill: () => {
          killed = true;
          run.child.kill('SIGKILL');
        },
      });
      await run.exited;
      assert.ok(killed, `tollgate exited on its own:\n${readFileSync(log, 'utf8').slice(-3000)}`);
      // Pushes are slow after the kill (a busy forge): a restarted tollgate that read the
      // trail for recovery before its own leftovers landed would decide them again, or never.
      proxy.slow.pushMs = 1_500;
      const restarted = await start();
      await releasesUnderWay(`releases under way after the restart (${when})`);
      proxy.slow.pushMs = 0;
      restarted.child.kill('SIGTERM');
      assert.equal(await restarted.exited, 0, readFileSync(log, 'utf8').slice(-3000));
      const checked = await verify();
      assert.equal(checked.code, 0, `after a kill ${when} and a restart:\n${checked.out}`);
    }
    const last = await start();
    await eventually(`all ${PODS} released`, async () => (await released()) === PODS, {
      timeoutMs: 120_000,
      intervalMs: 200,
      describe: () => readFileSync(log, 'utf8').slice(-1500),
    });
    last.child.kill('SIGTERM');
    assert.equal(await last.exited, 0, readFileSync(log, 'utf8').slice(-3000));
    const final = await verify();
    assert.equal(final.code, 0, final.out);
    assert.match(
      final.out,
      new RegExp(`ok: .*, ${PODS} released pods checked, \\d+ signatures checked`),
    );
  });
});
