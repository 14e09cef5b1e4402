/**
 * Opting in with a label: the API server itself adds the tenant's gate.
 *
 * `tollgate admission-params --opt-in` renders, from the policy, a MutatingAdmissionPolicy
 * per GatePolicy (pods created with `tollgate.io/gate-policy: <name>` in the tenant's
 * namespaces get the policy's gate) and ValidatingAdmissionPolicies that refuse what would
 * skip the gate. On the real control plane (kube-apiserver 1.37, the Job controller of
 * kube-controller-manager):
 * - a Job whose pod template carries only the opt-in label gets pods gated by the API
 *   server, tollgate holds them while the condition is unmet, and releases them after;
 * - a pod opting in to a policy whose selector it does not match is refused, naming why;
 * - a pod opting in to a policy that does not exist (a typo) is refused, naming the
 *   policies it may opt in to.
 *
 * Run: node --test --test-concurrency=1 test/e2e/opt-in/opt-in.test.ts
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  BatchV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  type KubernetesObject,
  type V1Pod,
} from '@kubernetes/client-node';
import { eventually } from '../../support/eventually.ts';
import { policyFiles, startWorld, type PolicyState, type World } from '../isolation/world.ts';

const execFileAsync = promisify(execFile);
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const namespace = 'optin-batch';
const outside = 'optin-outside';
const gate = 'batch.tollgate.io/nightly';
const optIn = 'tollgate.io/gate-policy';

const policy: PolicyState = {
  tenants: [{ name: 'batch', namespaces: [namespace], gatePrefixes: ['batch.tollgate.io/'] }],
  gatePolicies: [
    {
      name: 'nightly',
      tenant: 'batch',
      gate,
      // Held until the ConfigMap says the input data is there.
      conditions: [
        {
          type: 'ObjectCondition',
          object: { apiVersion: 'v1', kind: 'ConfigMap', name: 'inputs' },
          field: 'data.ready',
          equals: 'true',
        },
      ],
    },
    {
      // A gang (JobSet-like labels): released together once all its pods exist.
      name: 'gang',
      tenant: 'batch',
      gate: 'batch.tollgate.io/gang',
      conditions: [
        {
          type: 'GangComplete',
          groupLabel: 'jobset.sigs.k8s.io/jobset-name',
          sizeAnnotation: 'batch.tollgate.io/gang-size',
        },
      ],
    },
    {
      name: 'gpu',
      tenant: 'batch',
      gate: 'batch.tollgate.io/gpu',
      selector: { matchLabels: { accelerator: 'gpu' } },
    },
  ],
};

/** Writes the policy as files and renders the admission objects the way an operator does. */
let policyDir = '';

function renderOptIn(work: string): KubernetesObject[] {
  const dir = join(work, 'policy-dir');
  policyDir = dir;
  for (const [file, text] of Object.entries(policyFiles(policy))) {
    if (text === null) continue;
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    writeFileSync(join(dir, file), text);
  }
  const stdout = execFileSync(
    process.execPath,
    [join(repoRoot, 'src/cli/main.ts'), 'admission-params', dir, '--opt-in', '-o', 'json'],
    { encoding: 'utf8', cwd: repoRoot },
  );
  return (JSON.parse(stdout) as { items: KubernetesObject[] }).items;
}

const labelledPod = (name: string, ns: string, labels: Record<string, string>): V1Pod => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: ns, labels },
  spec: { containers: [{ name: 'main', image: 'busybox:1.36' }] },
});

describe('workloads opt in with a label; the API server adds the gate', () => {
  let world: World;

  before(async () => {
    world = await startWorld('opt-in', policy);
    await world.createNamespaces(namespace, outside);
    const objects = world.kc.makeApiClient(KubernetesObjectApi);
    const rendered = renderOptIn(mkdtempSync(join(tmpdir(), 'tollgate-opt-in-')));
    assert.ok(
      rendered.some((o) => o.kind === 'MutatingAdmissionPolicy'),
      'a MutatingAdmissionPolicy is rendered',
    );
    for (const object of rendered)
      await objects.patch(
        object,
        undefined,
        undefined,
        'tollgate-admission-params',
        true,
        PatchStrategy.ServerSideApply,
      );
    // Admission policies take effect once the API server's policy informer has them: a
    // dry-run create shows when the gate is injected.
    await eventually(
      'the opt-in policy is in effect',
      async () => {
        const probe = await world.core.createNamespacedPod({
          namespace,
          body: labelledPod('probe', namespace, { [optIn]: 'nightly' }),
          dryRun: 'All',
        });
        return (probe.spec?.schedulingGates ?? []).some((g) => g.name === gate) || undefined;
      },
      { timeoutMs: 30_000 },
    );
    await world.startTollgate();
  });

  after(async () => {
    await world?.stop();
  });

  test('a Job with only the opt-in label is gated by the API server, held, then released', async () => {
    const batch = world.kc.makeApiClient(BatchV1Api);
    await batch.createNamespacedJob({
      namespace,
      body: {
        metadata: { name: 'nightly-load', namespace },
        spec: {
          template: {
            metadata: { labels: { [optIn]: 'nightly' } },
            spec: {
              restartPolicy: 'Never',
              containers: [{ name: 'load', image: 'busybox:1.36' }],
            },
          },
        },
      },
    });
    const pod = await eventually('the Job controller created its pod', async () => {
      const pods = await world.core.listNamespacedPod({
        namespace,
        labelSelector: 'job-name=nightly-load',
      });
      return pods.items[0];
    });
    assert.deepEqual(
      pod.spec?.schedulingGates?.map((g) => g.name),
      [gate],
      'the API server added exactly the policy gate',
    );

    // Anyone with read access sees why it waits: `tollgate explain` and `tollgate queue`.
    // Run asynchronously: the Git server serving the audit branch lives in this process.
    const cli = async (args: string[], env: NodeJS.ProcessEnv = process.env): Promise<string> =>
      (
        await execFileAsync(
          process.execPath,
          [
            join(repoRoot, 'src/cli/main.ts'),
            ...args,
            '--policy-dir',
            policyDir,
            '--kubeconfig',
            world.cp.tollgateKubeconfig,
            '-o',
            'json',
          ],
          { encoding: 'utf8', cwd: repoRoot, env },
        )
      ).stdout;
    const podRef = `${namespace}/${pod.metadata!.name!}`;
    const explained = JSON.parse(await cli(['explain', podRef])) as {
      policy: string;
      waiting: string;
      position: number;
      conditions: { condition: string; met: boolean }[];
      estimate: { releaseAt: string | null };
    };
    assert.equal(explained.policy, 'nightly');
    assert.equal(explained.waiting, 'conditions');
    assert.equal(explained.position, 1);
    assert.deepEqual(
      explained.conditions.map((c) => [c.condition, c.met]),
      [['ObjectCondition', false]],
    );
    assert.equal(explained.estimate.releaseAt, null, 'no pace-based time while a condition fails');
    // tollgate held it, and the Hold is in the audit branch (strict mode: pushed in its
    // batch; a Hold is recorded once per reason, by the loop's own pass); explain reads it.
    await eventually(
      'explain shows the Hold from the audit branch',
      async () => {
        const withAudit = JSON.parse(
          await cli(['explain', podRef, '--audit', world.auditUrl], {
            ...process.env,
            TOLLGATE_GIT_TOKEN: world.git.token,
          }),
        ) as { decisions: { kind: string; reason: string }[] };
        return withAudit.decisions.find(
          (d) => d.kind === 'Hold' && d.reason === 'waiting for ObjectCondition',
        );
      },
      { timeoutMs: 60_000 },
    );
    const stillGated = await world.core.readNamespacedPod({ namespace, name: pod.metadata!.name! });
    assert.deepEqual(
      stillGated.spec?.schedulingGates?.map((g) => g.name),
      [gate],
    );
    const queued = JSON.parse(await cli(['queue', '--tenant', 'batch'])) as {
      items: { pod: string }[];
    };
    assert.deepEqual(
      queued.items.map((e) => e.pod),
      [`${namespace}/${pod.metadata!.name!}`],
    );

    await world.core.createNamespacedConfigMap({
      namespace,
      body: { metadata: { name: 'inputs', namespace }, data: { ready: 'true' } },
    });
    await eventually(
      'tollgate releases the pod and the scheduler binds it',
      async () => {
        const now = await world.core.readNamespacedPod({ namespace, name: pod.metadata!.name! });
        return ((now.spec?.schedulingGates ?? []).length === 0 && now.spec?.nodeName) || undefined;
      },
      { timeoutMs: 30_000 },
    );
  });

  const refusal = async (body: V1Pod): Promise<string> => {
    try {
      await world.core.createNamespacedPod({ namespace: body.metadata!.namespace!, body });
      return 'created';
    } catch (error) {
      // The API server's Status message: what a user sees from kubectl.
      const body = (error as { body?: unknown }).body;
      try {
        return (JSON.parse(String(body)) as { message: string }).message;
      } catch {
        return String(body ?? error);
      }
    }
  };

  test('a pod opting in to a policy whose selector it does not match is refused, with the reason', async () => {
    const answer = await refusal(labelledPod('no-gpu', namespace, { [optIn]: 'gpu' }));
    assert.match(answer, /GatePolicy gpu/);
    assert.match(answer, /batch\.tollgate\.io\/gpu/);
    assert.match(answer, /selector/);
    // With the label the selector wants, the same pod is gated and admitted.
    const gpu = await world.core.createNamespacedPod({
      namespace,
      body: labelledPod('with-gpu', namespace, { [optIn]: 'gpu', accelerator: 'gpu' }),
    });
    assert.deepEqual(
      gpu.spec?.schedulingGates?.map((g) => g.name),
      ['batch.tollgate.io/gpu'],
    );
  });

  test('a pod opting in to no policy of its namespace is refused, naming those it may use', async () => {
    const typo = await refusal(labelledPod('typo', namespace, { [optIn]: 'nigthly' }));
    assert.match(typo, /"nigthly"/);
    assert.match(typo, /gang, gpu, nightly/);
    const elsewhere = await refusal(labelledPod('elsewhere', outside, { [optIn]: 'nightly' }));
    assert.match(elsewhere, new RegExp(`no tenant owns namespace ${outside}`));
    // Pods that do not opt in are left alone.
    const plain = await world.core.createNamespacedPod({
      namespace,
      body: labelledPod('plain', namespace, {}),
    });
    assert.equal(plain.spec?.schedulingGates, undefined);
  });

  test('a gang opting in with JobSet-like labels is gated by the API server and released together', async () => {
    const member = (i: number): V1Pod => {
      const pod = labelledPod(`trainer-${i}`, namespace, {
        [optIn]: 'gang',
        'jobset.sigs.k8s.io/jobset-name': 'train',
      });
      pod.metadata!.annotations = { 'batch.tollgate.io/gang-size': '3' };
      return pod;
    };
    const gatesOf = async (i: number) =>
      (
        await world.core.readNamespacedPod({ namespace, name: `trainer-${i}` })
      ).spec?.schedulingGates?.map((g) => g.name) ?? [];
    for (const i of [0, 1]) await world.core.createNamespacedPod({ namespace, body: member(i) });
    assert.deepEqual(await gatesOf(0), ['batch.tollgate.io/gang']);
    // Two of three: tollgate holds them, and the audit branch says why.
    await eventually(
      'the incomplete gang is held',
      async () => {
        const { stdout } = await execFileAsync(
          process.execPath,
          [
            join(repoRoot, 'src/cli/main.ts'),
            'explain',
            `${namespace}/trainer-0`,
            '--policy-dir',
            policyDir,
            '--kubeconfig',
            world.cp.tollgateKubeconfig,
            '--audit',
            world.auditUrl,
            '-o',
            'json',
          ],
          {
            encoding: 'utf8',
            cwd: repoRoot,
            env: { ...process.env, TOLLGATE_GIT_TOKEN: world.git.token },
          },
        );
        const explained = JSON.parse(stdout) as { waiting: string; decisions: { kind: string }[] };
        return (
          explained.waiting === 'conditions' && explained.decisions.some((d) => d.kind === 'Hold')
        );
      },
      { timeoutMs: 60_000 },
    );
    assert.deepEqual(await gatesOf(1), ['batch.tollgate.io/gang'], 'still held');
    await world.core.createNamespacedPod({ namespace, body: member(2) });
    await eventually(
      'the whole gang released',
      async () => (await Promise.all([0, 1, 2].map(gatesOf))).every((g) => g.length === 0),
      { timeoutMs: 30_000 },
    );
  });
});
