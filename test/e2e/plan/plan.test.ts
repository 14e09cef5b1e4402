/**
 * `tollgate plan` as a child process against the real control plane, with the
 * unprivileged tollgate identity (it only lists). Outputs are compared byte for byte with
 * golden files in test/fixtures/plan/ (regenerate: TOLLGATE_UPDATE_GOLDEN=1).
 *
 * Resize: a simulated kubelet runs the pods of namespace plan-rz (so they are Running
 * with kubelet-reported resources) and a real Prometheus serves their queue lengths.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { eventually } from '../../support/eventually.ts';
import { pushTree, startGitServer, type GitServer } from '../../support/git-server.ts';
import { SimulatedKubelet } from '../../support/kubelet.ts';
import { startPrometheus, waitForSeries, type TestPrometheus } from '../../support/prometheus.ts';

const run = promisify(execFile);
const fixtures = 'test/fixtures/plan';
const namespace = 'plan-e2e';

const resizeNamespace = 'plan-rz';

let cp: ControlPlane;
let git: GitServer;
let kubelet: SimulatedKubelet | undefined;
let prom: TestPrometheus | undefined;

async function plan(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  at = new Date().toISOString(), // the moment the plan runs, after the pods exist
): Promise<{ code: number; out: string; err: string }> {
  try {
    const r = await run(
      'node',
      ['src/cli/main.ts', 'plan', '--kubeconfig', cp.tollgateKubeconfig, '--now', at, ...args],
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

/** A copy of a policy folder (default the base) with one file's text replaced. */
function variant(
  edit: (text: string) => string,
  file = 'tenants/batch.yaml',
  from = 'base',
): string {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-plan-variant-'));
  cpSync(join(fixtures, from), dir, { recursive: true });
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

/** Running pods for the resize plan: app web (a ResizePolicy matches) and one it does not. */
const resizePods: { name: string; app: string; requests: string; limits?: string }[] = [
  { name: 'web-0', app: 'web', requests: '500m' },
  { name: 'web-1', app: 'web', requests: '1' },
  { name: 'web-2', app: 'web', requests: '1500m', limits: '3' },
  { name: 'web-3', app: 'web', requests: '2', limits: '2' },
  { name: 'api-0', app: 'api', requests: '2' },
];

async function startResizeWorld(): Promise<void> {
  const admin = cp.kubeConfig('admin');
  const core = admin.makeApiClient(CoreV1Api);
  kubelet = new SimulatedKubelet(admin);
  await kubelet.addNode('plan-node', { cpu: '16', memory: '32Gi' });
  await kubelet.start();
  await core
    .createNamespace({ body: { metadata: { name: resizeNamespace } } })
    .catch(() => undefined);
  for (const p of resizePods) {
    await core.createNamespacedPod({
      namespace: resizeNamespace,
      body: {
        metadata: { name: p.name, labels: { app: p.app } },
        spec: {
          containers: [
            {
              name: 'app',
              image: 'busybox',
              resources: {
                requests: { cpu: p.requests, memory: '256Mi' },
                ...(p.limits ? { limits: { cpu: p.limits, memory: '256Mi' } } : {}),
              },
            },
          ],
        },
      },
    });
  }
  await eventually(
    'the plan-rz pods Running with kubelet-reported resources',
    async () => {
      const pods = (await core.listNamespacedPod({ namespace: resizeNamespace })).items as V1Pod[];
      return (
        pods.length === resizePods.length &&
        pods.every(
          (p) =>
            p.status?.phase === 'Running' &&
            (p.status.containerStatuses ?? []).every((c) => c.resources !== undefined),
        )
      );
    },
    { timeoutMs: 60_000 },
  );
}

after(async () => {
  await prom?.stop();
  await kubelet?.stop();
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

  await t.test(
    'an ObjectCondition on a kind the API server does not serve is a warning, and its pods hold as unreadable (exit 3)',
    async () => {
      const proposed = variant(
        (s) =>
          s.replace(
            '    - type: Budget',
            [
              '    - type: Budget',
              '    - type: ObjectCondition',
              '      object: { apiVersion: example.io/v1, kind: Widget, name: w }',
              '      conditionType: Ready',
            ].join('\n'),
          ),
        'gates/jobs.yaml',
      );
      const r = await plan(['--policy', proposed, '--base', join(fixtures, 'base')]);
      assert.equal(r.code, 3, r.err);
      assert.match(
        r.err,
        /warning: Widget\.example\.io\/v1 is not served by the API server \(a typo, or its CRD is not installed\)/,
      );
      assert.equal((r.err.match(/warning:/g) ?? []).length, 1, 'one warning per kind');
      assert.match(r.out, /-> Hold \(waiting on ObjectCondition\)/);
    },
  );

  await t.test(
    'resize: a narrower max bound without Prometheus shows, bounds-only, exactly the pods above it (exit 3)',
    async () => {
      await startResizeWorld();
      const base = join(fixtures, 'resize-base');
      const proposed = variant(
        (s) => s.replace("max: '2'", "max: '1'"),
        'resize/web.yaml',
        'resize-base',
      );
      const r = await plan(['--policy', proposed, '--base', base], { TOLLGATE_PROMETHEUS_URL: '' });
      assert.equal(r.code, 3, r.err);
      assert.match(r.out, /Usage-driven resize targets were not computed: no Prometheus was given/);
      const listed = [...r.out.matchAll(/^ {2}(plan-rz\/[\w-]+) \[/gm)].map((m) => m[1]);
      assert.deepEqual(listed, ['plan-rz/web-2', 'plan-rz/web-3']);
      golden('resize-bounds.txt', r.out);
      for (const [output, file] of [
        ['markdown', 'resize-bounds.md'],
        ['json', 'resize-bounds.json'],
      ] as const) {
        const o = await plan(['--policy', proposed, '--base', base, '--output', output], {
          TOLLGATE_PROMETHEUS_URL: '',
        });
        assert.equal(o.code, 3, o.err);
        golden(file, o.out);
      }
      const json = JSON.parse(readFileSync(join(fixtures, 'resize-bounds.json'), 'utf8')) as {
        resize: { basis: string; changes: { pod: string }[] };
      };
      assert.equal(json.resize.basis, 'bounds');
      const same = await plan(['--policy', base, '--base', base]);
      assert.equal(same.code, 0, same.err);
      assert.match(same.out, /No resize target changes \(4 -> 4 managed pods\)/);
    },
  );

  await t.test(
    'resize: with a real Prometheus the usage-driven targets that a narrower max changes are shown (exit 3)',
    async () => {
      prom = await startPrometheus({ scrapeIntervalMs: 500 });
      // Above the scale-up threshold: web-0, web-1; below scale-down: web-2; between: web-3.
      const queue: Record<string, number> = { 'web-0': 500, 'web-1': 500, 'web-2': 5, 'web-3': 50 };
      for (const [pod, value] of Object.entries(queue))
        prom.exporter.set('plan_queue_length', { namespace: resizeNamespace, pod }, value);
      for (const [pod, value] of Object.entries(queue))
        await waitForSeries(prom.url, `plan_queue_length{pod="${pod}"}`, value);
      // The policy window is 4 s: samples must cover all of it before the plan asks.
      await sleep(5_500);
      const base = join(fixtures, 'resize-base');
      const proposed = variant(
        (s) => s.replace("max: '2'", "max: '1'"),
        'resize/web.yaml',
        'resize-base',
      );
      const outputs: Record<string, string> = {};
      for (const output of ['text', 'markdown', 'json']) {
        const r = await plan(
          ['--policy', proposed, '--base', base, '--prometheus-url', prom.url, '--output', output],
          {},
          new Date().toISOString(),
        );
        assert.equal(r.code, 3, r.err);
        outputs[output] = r.out;
      }
      const text = outputs.text as string;
      assert.doesNotMatch(text, /not computed/);
      // web-1 would step up to 1250m under the base, stays at the new max 1; web-2 would
      // step down to 1250m under the base, to the max 1 under the proposal. web-0 steps to
      // 750m either way; web-3's signal holds, so no pass resizes it although it is above 1.
      const listed = [...text.matchAll(/^ {2}(plan-rz\/[\w-]+) \[/gm)].map((m) => m[1]);
      assert.deepEqual(listed, ['plan-rz/web-1', 'plan-rz/web-2']);
      golden('resize-usage.txt', text);
      golden('resize-usage.md', outputs.markdown as string);
      golden('resize-usage.json', outputs.json as string);
      // At an instant Prometheus has no data for (a day before it started), nothing is
      // resized and the plan says why.
      const dayBefore = new Date(Date.now() - 86_400_000).toISOString();
      const past = await plan(
        ['--policy', proposed, '--base', base, '--prometheus-url', prom.url],
        {},
        dayBefore,
      );
      assert.equal(past.code, 0, past.err);
      assert.match(
        past.out,
        /Signals without data covering the window \(they hold, targets stay current\) for 4 pod\(s\): plan-rz\/web-0, plan-rz\/web-1, plan-rz\/web-2, plan-rz\/web-3\n/,
      );
    },
  );

  await t.test(
    'resize: an unreachable Prometheus exits 2 naming the URL and the error',
    async () => {
      const base = join(fixtures, 'resize-base');
      // A port nothing listens on: bound, then closed.
      const probe = createServer();
      await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
      const { port } = probe.address() as AddressInfo;
      await new Promise((resolve) => probe.close(resolve));
      const url = `http://127.0.0.1:${port}`;
      const r = await plan(['--policy', base, '--base', base, '--prometheus', url]);
      assert.equal(r.code, 2, r.out);
      assert.ok(r.err.includes(`Prometheus ${url} unreachable: `), r.err);
      assert.match(r.err, /ECONNREFUSED/);
    },
  );
});
