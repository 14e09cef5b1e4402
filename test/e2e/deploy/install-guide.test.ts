/**
 * docs/install.md, executed: every ```sh block runs in order, with bash -euo pipefail,
 * against the real control plane, with the real kubectl (test/tools/build.sh) and
 * `tollgate` on PATH, a real Git server for POLICY_REPO and AUDIT_REPO, and a working
 * folder that holds this checkout as ./tollgate. The guide's shell state carries from
 * block to block, except across the one marked `wait-for-tollgate`.
 *
 * Two blocks are not run as written, and the guide says so:
 * - `norun` (the image push: there is no registry here);
 * - before `wait-for-tollgate`, the test plays the kubelet, which this control plane
 *   does not have: it starts `tollgate run` with exactly the configuration the guide's
 *   Deployment would get (the ConfigMap tollgate-config, the Secrets tollgate-git and
 *   tollgate-resize-state-key as applied, tollgate's service account token), then runs
 *   the block as written.
 *
 * Run: node --test --test-concurrency=1 test/e2e/deploy/install-guide.test.ts
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { startGitServer, type GitServer } from '../../support/git-server.ts';
import { freePort, repoRoot, toolPath } from './tools.ts';

interface Block {
  readonly index: number;
  readonly tags: readonly string[];
  readonly script: string;
}

/** The guide's ```sh blocks, with the words after `sh` as tags. */
function shellBlocks(markdown: string): Block[] {
  return [...markdown.matchAll(/^```sh([^\n]*)\n([\s\S]*?)^```$/gm)].map((m, index) => ({
    index,
    tags: m[1]!.trim().split(/\s+/).filter(Boolean),
    script: m[2]!,
  }));
}

const guide = readFileSync(join(repoRoot, 'docs/install.md'), 'utf8');
const blocks = shellBlocks(guide);

let cp: ControlPlane;
let git: GitServer;
let work: string;
let env: NodeJS.ProcessEnv;
const replicas: ChildProcess[] = [];
const logs: string[] = [];

/**
 * Runs blocks as one bash script; each block announces itself on stderr. Asynchronous:
 * tollgate's own process keeps running (and logging) meanwhile.
 */
function runBlocks(
  selected: Block[],
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const script = selected
    .map((b) => `echo "--- docs/install.md sh block ${b.index + 1}" >&2\n${b.script}`)
    .join('\n');
  const child = spawn('bash', ['-euo', 'pipefail', '-c', script], {
    cwd: work,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve) =>
    child.once('close', (status) => resolve({ status, stdout, stderr })),
  );
}

/**
 * What a kubelet would do for the Deployment: start `tollgate run` with the applied
 * ConfigMap as environment, the Secret's token as a file, and the service account's
 * token (as a kubeconfig, since there is no pod filesystem here).
 */
async function startLikeTheDeployment(replica: string): Promise<void> {
  const admin = cp.kubeConfig('admin');
  const core = admin.makeApiClient(CoreV1Api);
  const config = await core.readNamespacedConfigMap({
    namespace: 'tollgate-system',
    name: 'tollgate-config',
  });
  const secret = await core.readNamespacedSecret({
    namespace: 'tollgate-system',
    name: 'tollgate-git',
  });
  const stateKey = await core.readNamespacedSecret({
    namespace: 'tollgate-system',
    name: 'tollgate-resize-state-key',
  });
  const token = (
    await core.createNamespacedServiceAccountToken({
      namespace: 'tollgate-system',
      name: 'tollgate',
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    })
  ).status!.token!;
  const podDir = join(work, 'pods', replica);
  mkdirSync(join(podDir, 'cache'), { recursive: true });
  writeFileSync(
    join(podDir, 'git-token'),
    Buffer.from(secret.data!.token!, 'base64').toString('utf8'),
  );
  writeFileSync(
    join(podDir, 'resize-state-keys'),
    Buffer.from(stateKey.data!.keys!, 'base64').toString('utf8'),
  );
  const cluster = admin.getCurrentCluster()!;
  writeFileSync(
    join(podDir, 'kubeconfig'),
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        { name: 'c', cluster: { server: cluster.server, 'certificate-authority': cluster.caFile } },
      ],
      users: [{ name: 'tollgate', user: { token } }],
      contexts: [{ name: 'c', context: { cluster: 'c', user: 'tollgate' } }],
      'current-context': 'c',
    }),
  );
  const child = spawn(process.execPath, [join(repoRoot, 'bin/tollgate.js'), 'run'], {
    env: {
      PATH: process.env.PATH,
      ...config.data,
      TOLLGATE_IDENTITY: replica,
      TOLLGATE_LEASE_NAMESPACE: 'tollgate-system',
      TOLLGATE_GIT_TOKEN_FILE: join(podDir, 'git-token'),
      TOLLGATE_RESIZE_STATE_KEY_FILE: join(podDir, 'resize-state-keys'),
      TOLLGATE_GIT_CACHE_DIR: join(podDir, 'cache'),
      TOLLGATE_KUBECONFIG: join(podDir, 'kubeconfig'),
      TOLLGATE_METRICS_ADDRESS: `127.0.0.1:${await freePort()}`,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const index = logs.push('') - 1;
  child.stdout!.on('data', (c: Buffer) => (logs[index] += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (logs[index] += c.toString()));
  replicas.push(child);
}

before(async () => {
  cp = await sharedControlPlane();
  git = await startGitServer();
  work = mkdtempSync(join(tmpdir(), 'tollgate-install-guide-'));
  symlinkSync(repoRoot, join(work, 'tollgate'));
  const bin = join(work, 'bin');
  mkdirSync(bin);
  symlinkSync(toolPath('kubectl'), join(bin, 'kubectl'));
  writeFileSync(
    join(bin, 'tollgate'),
    `#!/bin/sh\nexec "${process.execPath}" "${join(repoRoot, 'bin/tollgate.js')}" "$@"\n`,
  );
  chmodSync(join(bin, 'tollgate'), 0o755);
  env = {
    PATH: `${bin}:${process.env.PATH}`,
    HOME: work,
    KUBECONFIG: cp.adminKubeconfig,
    POLICY_REPO: git.createRepo('tollgate-policy'),
    AUDIT_REPO: git.createRepo('tollgate-audit'),
    TOLLGATE_GIT_TOKEN: git.token,
    GIT_TERMINAL_PROMPT: '0',
  };
});

after(async () => {
  for (const child of replicas) if (child.exitCode === null) child.kill('SIGKILL');
  await git?.close();
  await cp?.stop();
});

describe('docs/install.md', () => {
  it('marks exactly the image push as not run, and one block as the wait for tollgate', () => {
    assert.ok(blocks.length >= 8, `${blocks.length} sh blocks`);
    assert.deepEqual(
      blocks.filter((b) => b.tags.includes('norun')).map((b) => b.script.includes('skopeo copy')),
      [true],
    );
    assert.equal(blocks.filter((b) => b.tags.includes('wait-for-tollgate')).length, 1);
  });

  it('runs from zero to a released pod and its audit record, then break-glass and uninstall', async () => {
    const runnable = blocks.filter((b) => !b.tags.includes('norun'));
    const wait = runnable.findIndex((b) => b.tags.includes('wait-for-tollgate'));
    const install = await runBlocks(runnable.slice(0, wait));
    assert.equal(install.status, 0, `install blocks failed:\n${install.stderr.slice(-4000)}`);
    assert.match(install.stdout, /my-policy: valid at/);
    assert.match(
      install.stdout,
      /^batch\.tollgate\.io\/$/m,
      'the namespace annotation as rendered',
    );

    await startLikeTheDeployment('tollgate-guide-0');
    const rest = await runBlocks(runnable.slice(wait));
    assert.equal(
      rest.status,
      0,
      `blocks failed:\n${rest.stderr.slice(-4000)}\ntollgate:\n${logs.join('\n').slice(-3000)}`,
    );
    assert.match(rest.stdout, /^leader: tollgate-guide-0$/m);
    const released = /^released: batch\/(\S+)$/m.exec(rest.stdout);
    assert.ok(released, `a pod was released:\n${rest.stdout}`);
    assert.match(
      rest.stdout,
      new RegExp(`Release.*batch/${released[1]}|batch/${released[1]}.*Release`),
    );
    assert.match(rest.stdout, /pod\/urgent-\S+ patched/);
    assert.match(rest.stdout, /^\s*2$/m, 'the rotated key file holds the new key and the old one');
  });
});
