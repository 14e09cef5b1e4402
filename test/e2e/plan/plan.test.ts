/**
 * `tollgate plan` as a child process against the real control plane, with the
 * unprivileged tollgate identity (it only lists). Outputs are compared byte for byte with
 * golden files in test/fixtures/plan/ (regenerate: TOLLGATE_UPDATE_GOLDEN=1).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { pushTree, startGitServer, type GitServer } from '../../support/git-server.ts';

const run = promisify(execFile);
const fixtures = 'test/fixtures/plan';
const namespace = 'plan-e2e';
const now = '2026-11-29T09:00:00Z';

let cp: ControlPlane;
let git: GitServer;

async function plan(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; out: string; err: string }> {
  try {
    const r = await run(
      'node',
      ['src/cli/main.ts', 'plan', '--kubeconfig', cp.tollgateKubeconfig, '--now', now, ...args],
      {
        env: { ...process.env, ...env },
      },
    );
    return { code: 0, out: r.stdout, err: r.stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, out: e.stdout, err: e.stderr };
  }
}

function golden(name: string, actual: string): void {
  const file = join(fixtures, name);
  if (process.env.TOLLGATE_UPDATE_GOLDEN === '1') writeFileSync(file, actual);
  assert.ok(existsSync(file), `${file} missing: run with TOLLGATE_UPDATE_GOLDEN=1 and review it`);
  assert.equal(actual, readFileSync(file, 'utf8'), `${file} differs`);
}

/** A copy of the base policy folder with one file's text replaced. */
function variant(edit: (text: string) => string, file = 'tenants/batch.yaml'): string {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-plan-variant-'));
  cpSync(join(fixtures, 'base'), dir, { recursive: true });
  writeFileSync(join(dir, file), edit(readFileSync(join(dir, file), 'utf8')));
  return dir;
}

function tree(dir: string): Record<string, string> {
  const files: Record<string, string> = {};
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else files[relative(dir, p)] = readFileSync(p, 'utf8');
    }
  };
  walk(dir);
  return files;
}

before(async () => {
  cp = await sharedControlPlane();
  git = await startGitServer();
  const core = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace } } }).catch(() => undefined);
  // Created one by one, in name order: release order among equal priorities follows creation.
  for (let i = 0; i < 6; i++) {
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name: `job-${i}`, labels: { app: 'jobs' } },
        spec: {
          schedulingGates: [{ name: 'batch.tollgate.io/jobs' }],
          containers: [{ name: 'c', image: 'busybox', resources: { requests: { cpu: '100m' } } }],
        },
      },
    });
  }
});

after(async () => {
  await git?.close();
});

test('tollgate plan on the real control plane', async (t) => {
  await t.test('the same policy as base is no difference and exits 0', async () => {
    const r = await plan(['--policy', join(fixtures, 'base'), '--base', join(fixtures, 'base')]);
    assert.equal(r.code, 0, r.err);
    golden('same.txt', r.out);
  });

  await t.test(
    'a budget increase shows exactly the pods that would be released (exit 3)',
    async () => {
      const proposed = variant((s) => s.replace('pods: 2', 'pods: 4'));
      const r = await plan(['--policy', proposed, '--base', join(fixtures, 'base')]);
      assert.equal(r.code, 3, r.err);
      assert.match(
        r.out,
        /plan-e2e\/job-2: Hold \(waiting on Budget\) \[jobs\] -> Release \[jobs\]/,
      );
      assert.match(
        r.out,
        /plan-e2e\/job-3: Hold \(waiting on Budget\) \[jobs\] -> Release \[jobs\]/,
      );
      assert.equal((r.out.match(/-> Release/g) ?? []).length, 2);
      golden('budget-increase.txt', r.out);
      const md = await plan([
        '--policy',
        proposed,
        '--base',
        join(fixtures, 'base'),
        '--output',
        'markdown',
      ]);
      assert.equal(md.code, 3, md.err);
      golden('budget-increase.md', md.out);
    },
  );

  await t.test('a proposed branch of a Git repository is planned against main', async () => {
    const repo = git.createRepo('policy');
    await pushTree(git, repo, tree(join(fixtures, 'base')), { branch: 'main' });
    const proposed = variant((s) => s.replace('pods: 2', 'pods: 3'));
    await pushTree(git, repo, tree(proposed), { branch: 'pr-1' });
    const r = await plan(
      ['--policy', repo, '--ref', 'pr-1', '--base', 'main', '--output', 'json'],
      {
        TOLLGATE_GIT_TOKEN: git.token,
      },
    );
    assert.equal(r.code, 3, r.err);
    const diff = JSON.parse(r.out) as { pods: { pod: string }[]; tenants: { budget: string }[] };
    assert.deepEqual(
      diff.pods.map((p) => p.pod),
      ['plan-e2e/job-2'],
    );
    assert.equal(diff.tenants[0]?.budget, 'freed');
  });

  await t.test('an invalid proposed policy exits 1 and names the error', async () => {
    const proposed = variant((s) => s.replace('pods: 2', 'pods: -5'));
    const r = await plan(['--policy', proposed, '--base', join(fixtures, 'base')]);
    assert.equal(r.code, 1, r.err);
    assert.match(r.out, /batch\.yaml/);
  });

  await t.test('a missing policy flag is a usage error, exit 2', async () => {
    const r = await plan(['--base', join(fixtures, 'base')]);
    assert.equal(r.code, 2);
    assert.match(r.err, /--policy/);
  });
});
