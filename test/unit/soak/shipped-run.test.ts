/**
 * The soak runs tollgate as deploy/ ships it: the image's entrypoint and environment
 * (scripts/build-image.sh), the Deployment's args, its ConfigMap and its own variables, its
 * Secrets as files under the mounted paths, its grace period. What the soak sets itself is
 * what an overlay sets (the policy and audit repositories, the metrics address of a replica
 * that shares the host) and the cluster access of a process outside the cluster; every
 * other shipped value reaches the replica unchanged.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { parse } from 'yaml';
import { readFileSync } from 'node:fs';
import { parseRunConfig } from '../../../src/cli/run-config.ts';
import { repoRoot } from '../../e2e/deploy/tools.ts';
import { replicaLaunch, shippedRun, type ReplicaSite } from '../../soak/shipped-run.ts';

const shipped = shippedRun();
const folder = '/tmp/soak-work/replica-a';

/** A replica site as the soak builds one; `overrides` changes any field. */
function aSite(overrides: Partial<ReplicaSite> = {}): ReplicaSite {
  return {
    identity: 'replica-a',
    folder,
    kubeconfig: '/tmp/soak-work/tollgate.kubeconfig',
    hostEnv: { PATH: '/usr/bin:/bin' },
    overlay: {
      TOLLGATE_POLICY_REPO: 'http://127.0.0.1:4000/policy.git',
      TOLLGATE_AUDIT_REPO: 'http://127.0.0.1:4000/audit.git',
      TOLLGATE_METRICS_ADDRESS: '127.0.0.1:9191',
    },
    secrets: {
      'tollgate-git': { token: 'a-git-token' },
      'tollgate-resize-state-key': { keys: 'k'.repeat(48) },
    },
    ...overrides,
  };
}

/** What deploy/base sets: the ConfigMap's data and the container's literal values. */
function deployBaseVariables(): Record<string, string> {
  const read = (file: string): Record<string, unknown> =>
    parse(readFileSync(join(repoRoot, 'deploy/base', file), 'utf8')) as Record<string, unknown>;
  const config = read('config.yaml') as { data: Record<string, string> };
  const deployment = read('deployment.yaml') as {
    spec: { template: { spec: { containers: { env: { name: string; value?: string }[] }[] } } };
  };
  const literal = Object.fromEntries(
    deployment.spec.template.spec.containers[0]!.env.filter((e) => e.value !== undefined).map(
      (e) => [e.name, e.value!],
    ),
  );
  return { ...config.data, ...literal };
}

describe('the soak runs tollgate as deploy/ ships it', () => {
  const launch = replicaLaunch(shipped, aSite());

  it("runs the image's entrypoint with the Deployment's args", () => {
    assert.equal(launch.command, process.execPath);
    assert.deepEqual(launch.args, [join(repoRoot, 'bin/tollgate.js'), 'run']);
  });

  it('gives every variable deploy/base sets its shipped value, but the overlay settings and mounted paths', () => {
    const mounted = (value: string): boolean => value.startsWith('/var/');
    for (const [name, value] of Object.entries(deployBaseVariables())) {
      assert.ok(name in launch.env, `${name} reaches the replica`);
      if (name in aSite().overlay) continue;
      if (mounted(value))
        assert.ok(launch.env[name]!.startsWith(`${folder}/`), `${name} under the replica's folder`);
      else assert.equal(launch.env[name], value, name);
    }
  });

  it('adds only the audit repository and the cluster access to what is shipped', () => {
    const shippedNames = new Set([
      ...Object.keys(shipped.imageEnv),
      ...Object.keys(shipped.configMap),
      ...shipped.env.map((v) => v.name),
    ]);
    const extra = Object.keys(launch.env).filter((name) => !shippedNames.has(name));
    assert.deepEqual(extra.sort(), ['TOLLGATE_AUDIT_REPO', 'TOLLGATE_KUBECONFIG']);
  });

  it("takes the identity and namespaces from the pod's fields, as the Deployment does", () => {
    assert.equal(launch.env.TOLLGATE_IDENTITY, 'replica-a');
    assert.equal(launch.env.POD_NAMESPACE, 'tollgate-system');
    assert.equal(launch.env.TOLLGATE_LEASE_NAMESPACE, 'tollgate-system');
  });

  it('writes each Secret as the files the mounted paths name, the resize state key among them', () => {
    const files = Object.fromEntries(launch.files.map((f) => [f.path, f.content]));
    assert.equal(files[launch.env.TOLLGATE_GIT_TOKEN_FILE!], 'a-git-token');
    assert.equal(files[launch.env.TOLLGATE_RESIZE_STATE_KEY_FILE!], 'k'.repeat(48));
  });

  it('refuses a site without a Secret the Deployment mounts', () => {
    assert.throws(
      () => replicaLaunch(shipped, aSite({ secrets: { 'tollgate-git': { token: 't' } } })),
      /tollgate-resize-state-key/,
    );
  });

  it("preloads the image's allocator, and refuses a host without it rather than run on another", () => {
    assert.equal(launch.env.LD_PRELOAD, '/usr/lib/x86_64-linux-gnu/libjemalloc.so.2');
    assert.match(launch.env.MALLOC_CONF!, /background_thread:true/);
    assert.throws(
      () => replicaLaunch(shipped, aSite({ hostHas: () => false })),
      /preloads \/usr\/lib\/x86_64-linux-gnu\/libjemalloc\.so\.2 .* no such file/,
    );
  });

  it('is a configuration `tollgate run` accepts, with the resize state key and the shipped shutdown timeout', () => {
    const files = new Set([...launch.files.map((f) => f.path), aSite().kubeconfig]);
    const result = parseRunConfig(
      {},
      {
        env: launch.env,
        hostname: 'soak',
        isFile: (path) => files.has(path),
        isDirectory: (path) => path.startsWith(folder),
      },
    );
    assert.ok(result.ok, JSON.stringify(result));
    assert.equal(result.config.resize.stateKeyFile, launch.env.TOLLGATE_RESIZE_STATE_KEY_FILE);
    assert.equal(result.config.lease.timings.leaseDurationMs, 15_000);
  });

  it("waits the Deployment's grace period for a SIGTERM to end the process", () => {
    assert.equal(launch.terminationGraceMs, 30_000);
  });
});
