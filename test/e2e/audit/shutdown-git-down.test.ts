/**
 * A leader's SIGTERM while its audit Git server hangs: `tollgate run` (its own process) on
 * the real control plane releases a gated pod in async audit mode, its audit branch on
 * the real git server behind a proxy that, once told to, accepts pushes and never
 * answers. A second pod is released while pushes hang, so its records are committed
 * locally and their push hangs. SIGTERM then stops the process: the final audit flush is
 * abandoned after its bound (a quarter of --shutdown-timeout) with the commits queued
 * locally, before the lease is released, and the process exits 0. Proven by the order of
 * the log lines and the exit code, not by elapsed time.
 */
import { oneGatePolicy } from '../../builders/policy-files.ts';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync } from 'node:fs';
import { createServer as createHttpServer, request, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { SimulatedKubelet } from '../../support/kubelet.ts';
import { startGitServer, pushTree, type GitServer } from '../../support/git-server.ts';
import { creatable, eventually } from '../../support/eventually.ts';
import { aPod } from '../../builders/pod.ts';
import { freePort } from '../deploy/tools.ts';
import { cleanEnv } from './support.ts';

const root = new URL('../../../', import.meta.url).pathname;
const cli = join(root, 'src/cli/main.ts');
const namespace = 'audit-shutdown';
const gate = 'shutdown.tollgate.io/ready';

/** A proxy in front of the git server; while `hang` is set, a push is taken and never answered. */
async function hangingProxy(target: string): Promise<{
  url: string;
  state: { hang: boolean; hungPushes: number };
  close: () => void;
}> {
  const state = { hang: false, hungPushes: 0 };
  const sockets = new Set<Socket>();
  const upstream = new URL(target);
  const server: Server = createHttpServer((incoming, outgoing) => {
    const isPush = incoming.method === 'POST' && (incoming.url ?? '').endsWith('/git-receive-pack');
    if (isPush && state.hang) {
      state.hungPushes += 1;
      incoming.resume();
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
        outgoing.writeHead(response.statusCode ?? 502, response.headers);
        response.pipe(outgoing);
      },
    );
    forward.on('error', () => outgoing.destroy());
    incoming.pipe(forward);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    state,
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

/** The log's messages in order. */
function messages(log: string): string[] {
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => {
      const entry = JSON.parse(line) as { msg: string; part?: string };
      return entry.part === undefined ? entry.msg : `${entry.msg} ${entry.part}`;
    });
}

describe('SIGTERM while the audit Git server hangs', () => {
  let cp: ControlPlane;
  let core: CoreV1Api;
  let kubelet: SimulatedKubelet;
  let git: GitServer;
  let proxy: Awaited<ReturnType<typeof hangingProxy>>;
  const children: ChildProcess[] = [];
  const work = mkdtempSync(join(tmpdir(), 'tollgate-audit-shutdown-'));

  before(async () => {
    cp = await sharedControlPlane();
    core = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
    kubelet = new SimulatedKubelet(cp.kubeConfig('admin'), { concurrency: 4 });
    await kubelet.addNode('shutdown-node-1', { cpu: '10', memory: '16Gi', pods: 20 });
    await kubelet.start();
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    git = await startGitServer();
    proxy = await hangingProxy(git.url);
  });
  after(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    proxy?.close();
    await kubelet?.stop();
    await git?.close();
  });

  it('abandons the final audit flush after its bound, keeps the commits locally, releases the lease after it and exits 0', async () => {
    const policyUrl = git.createRepo('policy');
    const auditUrl = git.createRepo('audit').replace(git.url, proxy.url);
    await pushTree(
      git,
      policyUrl,
      oneGatePolicy({
        cluster: 'shutdown',
        tenant: 'shutdown',
        namespace,
        gate,
        audit: { mode: 'async', maxDecisions: 500, maxDelay: '100ms' },
      }),
    );
    const log = join(work, 'tollgate.log');
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [
        cli,
        'run',
        '--kubeconfig',
        cp.tollgateKubeconfig,
        '--policy-repo',
        policyUrl,
        '--policy-ref',
        'main',
        '--git-token-env',
        'E2E_GIT_TOKEN',
        '--git-cache-dir',
        join(work, 'cache'),
        '--audit-repo',
        auditUrl,
        '--identity',
        'shutdown-0',
        '--metrics-address',
        `127.0.0.1:${port}`,
        '--lease-namespace',
        'tollgate-system',
        '--lease-name',
        'tollgate-audit-shutdown',
        '--lease-duration',
        '3s',
        '--renew-deadline',
        '2s',
        '--retry-period',
        '500ms',
        '--shutdown-timeout',
        '4s',
        '--log-level',
        'info',
      ],
      {
        env: cleanEnv({ E2E_GIT_TOKEN: git.token }),
        stdio: ['ignore', openSync(log, 'a'), openSync(log, 'a')],
      },
    );
    children.push(child);
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const tail = (): string => readFileSync(log, 'utf8').slice(-3000);
    const gated = async (name: string): Promise<boolean> =>
      ((await core.readNamespacedPod({ namespace, name })).spec?.schedulingGates ?? []).length > 0;
    const createGated = (name: string) =>
      core.createNamespacedPod({
        namespace,
        body: creatable(
          aPod(name, namespace).gated(gate).requests({ cpu: '10m', memory: '16Mi' }).obj(),
        ),
      });
    const auditTip = (): string =>
      execFileSync(
        'git',
        ['--git-dir', join(git.root, 'audit.git'), 'rev-parse', 'tollgate/audit'],
        {
          encoding: 'utf8',
        },
      ).trim();

    // While the Git server answers: a release, its records pushed.
    await createGated('first');
    await eventually('the first pod released', async () => !(await gated('first')), {
      timeoutMs: 60_000,
      intervalMs: 100,
      describe: tail,
    });
    const backlogMetric = async (): Promise<number> => {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      return Number(/^tollgate_audit_backlog (\S+)$/m.exec(text)?.[1]);
    };
    await eventually(
      'the first release recorded on the remote',
      async () => (await backlogMetric()) === 0,
      {
        timeoutMs: 30_000,
        intervalMs: 100,
        describe: tail,
      },
    );

    // The Git server hangs: the second release's records are committed, their push hangs.
    proxy.state.hang = true;
    await createGated('second');
    await eventually('the second pod released', async () => !(await gated('second')), {
      timeoutMs: 60_000,
      intervalMs: 100,
      describe: tail,
    });
    await eventually('a push of its records hangs', async () => proxy.state.hungPushes > 0, {
      timeoutMs: 30_000,
      intervalMs: 100,
      describe: tail,
    });
    const tipWhileHanging = auditTip();

    child.kill('SIGTERM');
    // Not a timing assertion: a generous bound (the shutdown timeout is 4 s) so that a
    // process that never exits fails here with its log instead of hanging the suite.
    const exitBound = 90_000;
    const exit = await Promise.race([
      exited,
      new Promise<'still running'>((resolve) =>
        setTimeout(() => resolve('still running'), exitBound).unref(),
      ),
    ]);
    assert.notEqual(
      exit,
      'still running',
      `no exit ${exitBound / 1000} s after SIGTERM:\n${tail()}`,
    );
    assert.equal(exit, 0, tail());
    const order = messages(log);
    const at = (message: string): number => {
      const index = order.indexOf(message);
      assert.ok(index >= 0, `log has "${message}":\n${tail()}`);
      return index;
    };
    const abandoned = order.findIndex((message) =>
      message.startsWith('final audit flush abandoned'),
    );
    assert.ok(abandoned >= 0, `log says the final flush was abandoned:\n${tail()}`);
    assert.ok(at('shutdown requested') < abandoned, 'abandoned after the SIGTERM');
    assert.ok(at('stopped dispatcher') < abandoned, 'in-flight writes settled before the audit');
    assert.ok(abandoned < at('stopped leader election'), 'the lease released after the audit');
    assert.ok(abandoned < at('tollgate stopped'));
    const line = readFileSync(log, 'utf8')
      .split('\n')
      .find((entry) => entry.includes('final audit flush abandoned'));
    const { backlog } = JSON.parse(line as string) as { backlog: number };
    assert.ok(backlog > 0, `the second release's records stay queued locally (backlog ${backlog})`);
    assert.equal(auditTip(), tipWhileHanging, 'nothing reached the remote after the hang');
  });
});
