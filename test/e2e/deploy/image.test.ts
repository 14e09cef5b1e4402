/**
 * tollgate's OCI image (scripts/build-image.sh), run as a container runtime would run it
 * but without one: the layout is unpacked by umoci (a real OCI tool, from Debian) and
 * its root filesystem run in a chroot as the image's user, with only the image's
 * environment plus what a kubelet gives a pod (KUBERNETES_SERVICE_HOST/PORT and the
 * service account token, CA and namespace files).
 *
 * - the image holds no shell and runs as uid 1000; the SBOM names Node.js, the Debian C
 *   libraries (jemalloc among them) and the npm packages;
 * - `tollgate run` in it maps the allocator its environment preloads;
 * - `tollgate version` reports the package version and the commit it was built from;
 * - `tollgate run` with in-cluster configuration against the real control plane takes
 *   the lease, releases a gated pod, records the release in the audit branch, and exits 0
 *   on SIGTERM; the policy comes over http(s) with a token file, the audit branch is
 *   fetched and pushed over SSH with a deploy key (the image's git and ssh, no shell)
 *   against a real SSH server (ssh2) running the real git-receive-pack;
 * - `tollgate validate` in the image reads a policy over SSH.
 *
 * A container runtime gives every container the default devices of the OCI runtime spec
 * (git and ssh open /dev/null and /dev/urandom); the chroot gets those memory devices,
 * nothing else.
 *
 * Needs root (chroot, umoci unpack) and umoci; TOLLGATE_IMAGE_LAYOUT points at an
 * already built output folder (.ci/run builds it once, twice in fact, checking the
 * digests are equal), otherwise the image is built here.
 *
 * Run: node --test --test-concurrency=1 test/e2e/deploy/image.test.ts
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { SimulatedKubelet } from '../../support/kubelet.ts';
import { startGitServer, pushTree, type GitServer } from '../../support/git-server.ts';
import {
  commitFiles,
  makeSshKey,
  startSshGitServer,
  type SshGitServer,
} from '../../support/ssh-git-server.ts';
import { creatable, eventually } from '../../support/eventually.ts';
import { aPod } from '../../builders/pod.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { freePort, repoRoot } from './tools.ts';

const isRoot = process.getuid?.() === 0;
const hasUmoci = (() => {
  try {
    execFileSync('umoci', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
const skip = !isRoot
  ? 'needs root (chroot and umoci unpack)'
  : !hasUmoci
    ? 'needs umoci (apt-get install umoci)'
    : false;

/** chroot from the test's PATH: the image's own PATH holds nothing but node. */
const chroot = ['/usr/sbin/chroot', '/usr/bin/chroot'].find((path) => existsSync(path)) ?? 'chroot';
const namespace = 'image-e2e';
const gate = 'image.tollgate.io/ready';
const serviceAccountDir = '/var/run/secrets/kubernetes.io/serviceaccount';

interface ImageConfig {
  process: { user: { uid: number; gid: number }; args: string[]; env: string[]; cwd: string };
}

/** Memory devices (major 1) by name and minor number. */
const runtimeDevices = { null: 3, zero: 5, full: 7, random: 8, urandom: 9 };

let work: string;
let rootfs: string;
let config: ImageConfig;

function layoutDir(): string {
  const given = process.env.TOLLGATE_IMAGE_LAYOUT;
  if (given) return given;
  const out = join(work, 'image');
  execFileSync('bash', [join(repoRoot, 'scripts/build-image.sh'), '--out', out], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return out;
}

/** Runs `args` (the image's entrypoint replaced by them) in the root filesystem as its user. */
function inImage(
  args: string[],
  env: Record<string, string>,
): { command: string; args: string[]; env: NodeJS.ProcessEnv } {
  const { uid, gid } = config.process.user;
  const imageEnv = Object.fromEntries(
    config.process.env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]),
  );
  return {
    command: chroot,
    args: [`--userspec=${uid}:${gid}`, rootfs, ...args],
    env: { ...imageEnv, ...env },
  };
}

before(
  () => {
    if (skip) return;
    work = mkdtempSync(join(tmpdir(), 'tollgate-image-e2e-'));
    const layout = layoutDir();
    const bundle = join(work, 'bundle');
    execFileSync('umoci', ['unpack', '--image', `${join(layout, 'oci')}:tollgate`, bundle], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    rootfs = join(bundle, 'rootfs');
    config = JSON.parse(readFileSync(join(bundle, 'config.json'), 'utf8')) as ImageConfig;
    // The character devices every OCI runtime creates in a container (runtime-spec,
    // "Default Devices") that git and ssh open: null, zero, full, random, urandom.
    mkdirSync(join(rootfs, 'dev'), { recursive: true });
    for (const [name, minor] of Object.entries(runtimeDevices))
      execFileSync('mknod', ['-m', '0666', join(rootfs, 'dev', name), 'c', '1', String(minor)]);
  },
  { timeout: 600_000 },
);

describe('the image', { skip }, () => {
  it('runs as uid 1000, holds no shell, and carries an SBOM of everything in it', () => {
    assert.equal(config.process.user.uid, 1000);
    assert.equal(config.process.user.gid, 1000);
    assert.deepEqual(config.process.args, ['/usr/local/bin/node', '/app/bin/tollgate.js', 'run']);
    const shells = execFileSync(
      'find',
      [
        rootfs,
        '(',
        '-name',
        'sh',
        '-o',
        '-name',
        'bash',
        '-o',
        '-name',
        'busybox',
        '-o',
        '-name',
        'dash',
        ')',
      ],
      { encoding: 'utf8' },
    );
    assert.equal(shells.trim(), '', 'no shell in the image');
    assert.ok(!existsSync(join(rootfs, 'bin')), 'no /bin at all');
    const sbom = JSON.parse(
      readFileSync(join(rootfs, 'usr/share/doc/tollgate/sbom.cdx.json'), 'utf8'),
    ) as { components: { name: string; version: string }[] };
    const names = new Set(sbom.components.map((c) => c.name));
    for (const name of [
      'node',
      'libc6',
      'libstdc++6',
      'libgcc-s1',
      'git',
      'openssh-client',
      'libssl3',
      'libjemalloc2',
      '@kubernetes/client-node',
      'isomorphic-git',
    ])
      assert.ok(names.has(name), `the SBOM names ${name}`);
    assert.ok(!names.has('typescript'), 'no development dependency in the SBOM');
  });

  it('ships tollgate compiled to JavaScript: no TypeScript to strip at any start', () => {
    const app = join(rootfs, 'app/src');
    const files = execFileSync('find', [app, '-type', 'f'], { encoding: 'utf8' })
      .trim()
      .split('\n');
    assert.deepEqual(
      files.filter((f) => !f.endsWith('.js')),
      [],
      'only JavaScript under /app/src',
    );
    assert.ok(files.includes(join(app, 'cli/main.js')), 'src/cli/main.ts compiled');
    const run = inImage(
      [
        '/usr/local/bin/node',
        '--import',
        `data:text/javascript,${encodeURIComponent("process.on('exit', () => process._rawDebug('STRIPPER ' + process.moduleLoadList.some((m) => m.includes('amaro'))));")}`,
        '/app/bin/tollgate.js',
        'version',
      ],
      {},
    );
    const answer = spawnSync(run.command, run.args, { env: run.env, encoding: 'utf8' });
    assert.equal(answer.status, 0, answer.stderr);
    assert.match(answer.stderr, /^STRIPPER false$/m, 'a first start loads no TypeScript stripper');
  });

  it('`tollgate version` names the package version and the commit it was built from', () => {
    const run = inImage(
      ['/usr/local/bin/node', '/app/bin/tollgate.js', 'version', '-o', 'json'],
      {},
    );
    const out = execFileSync(run.command, run.args, { env: run.env, encoding: 'utf8' });
    const info = JSON.parse(out) as { version: string; revision: string; node: string };
    const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
      version: string;
    };
    assert.equal(info.version, pkg.version);
    assert.equal(info.node, `v${readFileSync(join(repoRoot, '.node-version'), 'utf8').trim()}`);
    if (!process.env.TOLLGATE_IMAGE_LAYOUT) {
      const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: repoRoot, encoding: 'utf8' });
      assert.match(info.revision, new RegExp(`^${head.trim()}(-dirty)?$`));
    } else assert.match(info.revision, /^[0-9a-f]{40}(-dirty)?$/);
  });
});

/** What a kubelet mounts for an SSH deploy key Secret: the key (owned by the image's user, 0400) and known_hosts. */
const sshSecretDir = '/var/run/secrets/tollgate/ssh';
let ssh: SshGitServer | undefined;

async function sshServerWithKeyInImage(): Promise<SshGitServer> {
  if (ssh) return ssh;
  const dir = join(rootfs, sshSecretDir);
  mkdirSync(dir, { recursive: true });
  const key = makeSshKey(dir, 'deploy-key');
  chownSync(key.privateFile, config.process.user.uid, config.process.user.gid);
  chmodSync(key.privateFile, 0o400);
  ssh = await startSshGitServer({ allowedKeys: [key.publicKey] });
  writeFileSync(join(dir, 'known_hosts'), `${ssh.knownHostsLine}\n`);
  return ssh;
}

after(async () => {
  await ssh?.close();
});

describe('the image reading a policy over SSH', { skip }, () => {
  it('`tollgate validate` fetches over ssh:// with the deploy key, through the image git and ssh', async () => {
    const server = await sshServerWithKeyInImage();
    const url = server.createRepo('image-validate');
    const commit = commitFiles(server.repoPath(url), {
      'tollgate.yaml':
        'apiVersion: tollgate.io/v1alpha1\nkind: Settings\nmetadata: { name: settings }\nspec:\n  cluster: image-e2e\n',
    });
    const uploads = server.uploadPacks;
    const run = inImage(
      [
        ...['/usr/local/bin/node', '/app/bin/tollgate.js', 'validate', url],
        ...['--git-ssh-key-file', `${sshSecretDir}/deploy-key`],
        ...['--git-ssh-known-hosts', `${sshSecretDir}/known_hosts`],
      ],
      {},
    );
    const answer = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn(run.command, run.args, {
        env: run.env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
      child.on('close', (code) => resolve({ code, out }));
    });
    assert.equal(answer.code, 0, answer.out);
    assert.match(answer.out, new RegExp(`valid at ${commit}`));
    assert.ok(server.uploadPacks > uploads, 'the fetch went through git-upload-pack');
  });
});

describe('the image running `tollgate run` in a pod-like environment', { skip }, () => {
  let cp: ControlPlane;
  let kubelet: SimulatedKubelet;
  let git: GitServer;
  let child: ChildProcess | undefined;
  let exited: Promise<number | null>;
  let log = '';
  let metricsUrl: string;
  let auditUrl: string;

  before(async () => {
    cp = await sharedControlPlane();
    const admin = cp.kubeConfig('admin');
    const core = admin.makeApiClient(CoreV1Api);
    kubelet = new SimulatedKubelet(admin, { concurrency: 4 });
    await kubelet.addNode('image-node-1', { cpu: '16', memory: '64Gi', pods: 110 });
    await kubelet.start();
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    git = await startGitServer();
    const policyUrl = git.createRepo('policy');
    auditUrl = (await sshServerWithKeyInImage()).createRepo('audit');
    await pushTree(
      git,
      policyUrl,
      {
        'tollgate.yaml':
          'apiVersion: tollgate.io/v1alpha1\nkind: Settings\nmetadata: { name: settings }\nspec:\n  cluster: image-e2e\n',
        'tenants/image.yaml': `apiVersion: tollgate.io/v1alpha1\nkind: Tenant\nmetadata: { name: image }\nspec:\n  namespaces: [${namespace}]\n  gatePrefixes: [image.tollgate.io/]\n`,
        'gates/ready.yaml': `apiVersion: tollgate.io/v1alpha1\nkind: GatePolicy\nmetadata: { name: ready }\nspec:\n  tenant: image\n  gate: ${gate}\n  conditions: [{ type: Budget }]\n`,
      },
      { message: 'policy' },
    );

    // What a kubelet mounts into tollgate's pod: the service account's token, the
    // cluster CA and the namespace; and the Git token Secret.
    const token = (
      await core.createNamespacedServiceAccountToken({
        namespace: 'tollgate-system',
        name: 'tollgate',
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      })
    ).status!.token!;
    const saDir = join(rootfs, serviceAccountDir);
    mkdirSync(saDir, { recursive: true });
    writeFileSync(join(saDir, 'token'), token);
    writeFileSync(join(saDir, 'namespace'), 'tollgate-system');
    copyFileSync(admin.getCurrentCluster()!.caFile!, join(saDir, 'ca.crt'));
    mkdirSync(join(rootfs, 'var/run/secrets/tollgate/git'), { recursive: true });
    writeFileSync(join(rootfs, 'var/run/secrets/tollgate/git/token'), git.token);

    const server = new URL(cp.server);
    const metricsPort = await freePort();
    metricsUrl = `http://127.0.0.1:${metricsPort}`;
    const run = inImage(['/usr/local/bin/node', '/app/bin/tollgate.js', 'run'], {
      KUBERNETES_SERVICE_HOST: server.hostname,
      KUBERNETES_SERVICE_PORT: server.port,
      TOLLGATE_POLICY_REPO: policyUrl,
      TOLLGATE_AUDIT_REPO: auditUrl,
      TOLLGATE_GIT_TOKEN_FILE: '/var/run/secrets/tollgate/git/token',
      TOLLGATE_AUDIT_SSH_KEY_FILE: `${sshSecretDir}/deploy-key`,
      TOLLGATE_GIT_SSH_KNOWN_HOSTS: `${sshSecretDir}/known_hosts`,
      TOLLGATE_IDENTITY: 'image-pod',
      TOLLGATE_LEASE_NAMESPACE: 'tollgate-system',
      TOLLGATE_LEASE_NAME: 'tollgate-image-e2e',
      TOLLGATE_METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
    });
    child = spawn(run.command, run.args, { env: run.env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (chunk: Buffer) => (log += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (log += chunk.toString()));
    exited = new Promise((r) => {
      child!.once('exit', (code) => r(code));
      child!.once('error', (error) => {
        log += `\nspawn ${run.command}: ${error.message}`;
        r(-1);
      });
    });
  });

  after(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await kubelet?.stop();
    await git?.close();
  });

  it('leads, releases a gated pod, records it in the audit branch pushed over SSH, and stops cleanly', async () => {
    const admin = cp.kubeConfig('admin');
    await eventually(
      'the image process is ready',
      async () => (await fetch(`${metricsUrl}/readyz`).catch(() => undefined))?.status === 200,
      { timeoutMs: 90_000, intervalMs: 200, describe: () => log.slice(-2000) },
    );
    // The loader only warns about a preload it cannot find: the process must map it.
    assert.match(
      readFileSync(`/proc/${child!.pid}/maps`, 'utf8'),
      /\/usr\/lib\/x86_64-linux-gnu\/libjemalloc\.so\.2/,
      'the image process runs on the allocator its environment preloads (LD_PRELOAD)',
    );
    await eventually(
      'the image process holds the lease',
      async () =>
        (
          await admin
            .makeApiClient(CoordinationV1Api)
            .readNamespacedLease({ namespace: 'tollgate-system', name: 'tollgate-image-e2e' })
            .catch(() => undefined)
        )?.spec?.holderIdentity === 'image-pod',
      { timeoutMs: 30_000, intervalMs: 200, describe: () => log.slice(-2000) },
    );
    const metrics = await (await fetch(`${metricsUrl}/metrics`)).text();
    assert.match(
      metrics,
      /^tollgate_build_info\{version="[^"]+",revision="[^"]+",node_version="v24\.[^"]+"\} 1$/m,
    );
    assert.match(metrics, /^process_resident_memory_bytes \d+/m);

    const core = admin.makeApiClient(CoreV1Api);
    const pod = await core.createNamespacedPod({
      namespace,
      body: creatable(aPod('gated', namespace).gated(gate).requests({ cpu: '100m' }).obj()),
    });
    await eventually(
      'the pod is released',
      async () =>
        ((await core.readNamespacedPod({ namespace, name: 'gated' })).spec?.schedulingGates ?? [])
          .length === 0,
      { timeoutMs: 60_000, intervalMs: 200, describe: () => log.slice(-2000) },
    );

    child!.kill('SIGTERM');
    assert.equal(await exited, 0, `exit code; log:\n${log.slice(-2000)}`);
    assert.ok(ssh!.receivePacks >= 1, 'the audit commits went through git-receive-pack over SSH');
    const source = await openAuditSource(ssh!.repoPath(auditUrl), 'tollgate/audit');
    const history = await readAuditHistory(source);
    source.close();
    const released = history
      .flatMap((c) => c.records)
      .filter(
        (r) =>
          r.kind === 'Release' &&
          r.target.uid === pod.metadata!.uid &&
          r.outcome.result === 'succeeded',
      );
    assert.equal(released.length, 1, 'the release and its outcome are in the audit branch');
  });
});
