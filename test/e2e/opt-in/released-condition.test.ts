/**
 * Why a pod waits, with plain kubectl: the `tollgate.io/Released` pod condition.
 *
 * On the real control plane, tollgate (the unprivileged `tollgate` identity, deploy/'s
 * RBAC, pods/status included) holds a pod first for its ObjectCondition, then for its
 * tenant's budget, then releases it. `kubectl get pod -o jsonpath` reads the condition
 * at each step (status False with the Hold's reason and message, then True), and the
 * condition writes tollgate sends number exactly one per reason change: passes that
 * change nothing (a label touched on the pod, the hold's re-checks) write nothing.
 *
 * And `tollgate explain` tells a released pod that no node fits (the real scheduler's
 * PodScheduled False, Unschedulable) from a held one, naming the policy's Git remote and
 * commit from the checkout it reads.
 *
 * Run: node --test --test-concurrency=1 test/e2e/opt-in/released-condition.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { V1Pod } from '@kubernetes/client-node';
import { eventually } from '../../support/eventually.ts';
import { startGateReleaseStack, type GateReleaseStack } from '../../support/gate-release-stack.ts';
import { createLogger } from '../../../src/observe/log.ts';
import { policyFiles, startWorld, type PolicyState, type World } from '../isolation/world.ts';

const execFileAsync = promisify(execFile);
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const namespace = 'released-condition';
const wide = 'explain-states';
const prefix = 'rc.tollgate.io/';

const policy: PolicyState = {
  tenants: [
    { name: 'rc', namespaces: [namespace], gatePrefixes: [prefix], budget: { pods: 1 } },
    { name: 'wide', namespaces: [wide], gatePrefixes: ['wide.tollgate.io/'] },
  ],
  gatePolicies: [
    // Takes the tenant's one budgeted pod at once.
    { name: 'first', tenant: 'rc', gate: `${prefix}first` },
    { name: 'wide', tenant: 'wide', gate: 'wide.tollgate.io/run' },
    {
      name: 'nightly',
      tenant: 'rc',
      gate: `${prefix}nightly`,
      conditions: [
        {
          type: 'ObjectCondition',
          object: { apiVersion: 'v1', kind: 'ConfigMap', name: 'inputs' },
          field: 'data.ready',
          equals: 'true',
        },
        { type: 'Budget' },
      ],
      // Re-checks every 200 ms: passes that change nothing, which must write nothing.
      recheck: { initial: '200ms', max: '200ms', maxAttempts: 100 },
    },
  ],
};

const gatedPod = (name: string, gate: string, ns = namespace, cpu?: string): V1Pod => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: ns },
  spec: {
    schedulingGates: [{ name: gate }],
    containers: [
      {
        name: 'main',
        image: 'busybox:1.36',
        ...(cpu ? { resources: { requests: { cpu } } } : {}),
      },
    ],
  },
});

/** The policy as a Git checkout whose `origin` is the repository users know. */
function policyCheckout(dir: string, origin: string): string {
  for (const [file, text] of Object.entries(policyFiles(policy))) {
    if (text === null) continue;
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    writeFileSync(join(dir, file), text);
  }
  const git = (...args: string[]) =>
    execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8' }).trim();
  git('init', '-q');
  git('add', '-A');
  git('-c', 'user.name=e2e', '-c', 'user.email=e2e@example.com', 'commit', '-qm', 'policy');
  git('remote', 'add', 'origin', origin);
  return git('rev-parse', 'HEAD');
}

/** The condition as a user reads it: `kubectl get pod -o jsonpath`. */
async function kubectlCondition(world: World, pod: string): Promise<string> {
  const jsonpath =
    '{range .status.conditions[?(@.type=="tollgate.io/Released")]}{.status}|{.reason}|{.message}{end}';
  const { stdout } = await execFileAsync('kubectl', [
    '--kubeconfig',
    world.cp.adminKubeconfig,
    'get',
    'pod',
    '-n',
    namespace,
    pod,
    '-o',
    `jsonpath=${jsonpath}`,
  ]);
  return stdout;
}

describe('the tollgate.io/Released condition says why a pod waits, one write per reason change', () => {
  let world: World;
  let stack: GateReleaseStack;

  before(async () => {
    world = await startWorld('released-condition', policy);
    await world.createNamespaces(namespace, wide);
    await world.core.createNamespacedConfigMap({
      namespace,
      body: { metadata: { name: 'inputs' }, data: { ready: 'false' } },
    });
    stack = await startGateReleaseStack({
      kubeConfig: world.cp.kubeConfig('tollgate'),
      policyUrl: world.policyUrl,
      auditUrl: world.auditUrl,
      token: world.git.token,
      cacheDir: join(world.work, 'tollgate'),
      controller: 'tollgate-1',
      cluster: 'e2e',
      auditMode: 'strict',
      log: createLogger({ name: 'tollgate-1', level: process.env.TOLLGATE_LOG_LEVEL ?? 'warn' }),
      policyIntervalMs: 300,
      dispatcher: { capacity: 100, concurrency: 4, qps: 100, burst: 100 },
      debounceMs: 50,
      releasedConditions: true,
    });
  });

  after(async () => {
    await stack?.stop();
    await world?.stop();
  });

  test('False with the Hold reason while held, True once released; one write per change', async () => {
    await world.createPods([gatedPod('first', `${prefix}first`)]);
    await eventually(
      'the first pod takes the budget',
      async () =>
        (await world.core.readNamespacedPod({ namespace, name: 'first' })).spec?.nodeName ||
        undefined,
      { timeoutMs: 30_000 },
    );
    assert.equal(stack.counters.conditionWrites, 0, 'a pod released at once gets no condition');

    await world.createPods([gatedPod('waiter', `${prefix}nightly`)]);
    const held = await eventually(
      'kubectl shows the pod held for its ObjectCondition',
      async () => {
        const shown = await kubectlCondition(world, 'waiter');
        return shown.startsWith('False|ObjectCondition|') ? shown : undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.equal(held, 'False|ObjectCondition|waiting for ObjectCondition');

    // Passes that change nothing: the pod's labels touched, and a second of re-checks.
    await world.core.patchNamespacedPod({
      namespace,
      name: 'waiter',
      body: [{ op: 'add', path: '/metadata/labels', value: { touched: 'yes' } }],
    });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    assert.equal(stack.counters.conditionWrites, 1, 'no write while the reason stays the same');

    await world.core.patchNamespacedConfigMap({
      namespace,
      name: 'inputs',
      body: [{ op: 'replace', path: '/data/ready', value: 'true' }],
    });
    const budget = await eventually(
      'kubectl shows the pod held for its budget',
      async () => {
        const shown = await kubectlCondition(world, 'waiter');
        return shown.startsWith('False|Budget|') ? shown : undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.equal(budget, 'False|Budget|waiting for Budget');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    assert.equal(stack.counters.conditionWrites, 2, 'one more write for the one reason change');

    await world.core.deleteNamespacedPod({ namespace, name: 'first', gracePeriodSeconds: 0 });
    const released = await eventually(
      'kubectl shows the pod released',
      async () => {
        const shown = await kubectlCondition(world, 'waiter');
        return shown.startsWith('True|') ? shown : undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.match(released, new RegExp(`^True\\|GateRemoved\\|removed gate ${prefix}nightly: `));
    const pod = await world.core.readNamespacedPod({ namespace, name: 'waiter' });
    assert.deepEqual(pod.spec?.schedulingGates ?? [], [], 'the gate is gone');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    assert.equal(stack.counters.conditionWrites, 3, 'three reasons, three writes');
  });

  test('explain tells a released pod no node fits from a held one, naming the policy commit', async () => {
    const dir = join(world.work, 'policy-checkout');
    const origin = 'https://git.example/platform/policy.git';
    const commit = policyCheckout(dir, origin);
    // 500 CPUs: released by tollgate (no budget), then no node fits.
    await world.createPods([gatedPod('huge', 'wide.tollgate.io/run', wide, '500')]);
    const explain = async () => {
      const { stdout } = await execFileAsync(
        process.execPath,
        [
          join(repoRoot, 'src/cli/main.ts'),
          'explain',
          `${wide}/huge`,
          '--policy-dir',
          dir,
          '--kubeconfig',
          world.cp.tollgateKubeconfig,
          '-o',
          'json',
        ],
        { encoding: 'utf8', cwd: repoRoot },
      );
      return JSON.parse(stdout) as {
        life: { state: string; detail: string; since: string | null };
        policySource: string;
        source: { commit: string; file: string };
        podConditions: { type: string; status: string; reason: string | null }[];
      };
    };
    const explained = await eventually(
      'explain says the released pod is unschedulable',
      async () => {
        const e = await explain();
        return e.life.state === 'unschedulable' ? e : undefined;
      },
      { timeoutMs: 60_000 },
    );
    assert.match(explained.life.detail, /^PodScheduled False \(Unschedulable\): 0\/2 nodes/);
    assert.ok(explained.life.since, 'since when, from the condition');
    assert.deepEqual(
      [explained.policySource, explained.source.commit, explained.source.file],
      [origin, commit, 'tenants/wide.yaml'],
    );
  });
});
