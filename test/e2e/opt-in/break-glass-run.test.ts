/**
 * Break-glass at a real `tollgate run`'s term start (src/run/loops.ts), on the real
 * control plane as tollgate's ServiceAccount: the run holds a pod (its
 * `tollgate.io/Released` condition False), is killed, an operator removes the gate by
 * hand, and the next run's first term records it before deciding anything: a Warning
 * Event GateRemovedOutsideTollgate on the pod, the condition True with reason
 * RemovedOutsideTollgate, `tollgate_break_glass_releases_total` at 1 for the tenant, and
 * a BreakGlass record on the audit branch.
 *
 * Run: node --test --test-concurrency=1 test/e2e/opt-in/break-glass-run.test.ts
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, EventsV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { auditRecords } from '../../support/audit-records.ts';
import { pushTree } from '../../support/git-server.ts';
import { eventually, removeNamespace, runNamespace } from '../../support/eventually.ts';
import { gitServerForFile, startTollgateRun, type RunProcess } from '../security/support.ts';

const git = gitServerForFile('tollgate-break-glass-run-');
const namespace = runNamespace('break-glass-run');
const gate = 'bgrun.tollgate.io/approved';
const leaseName = `tollgate-${namespace}`;
let cp: ControlPlane;
let core: CoreV1Api;
const runs: RunProcess[] = [];

const doc = (kind: string, name: string, spec: string[]) =>
  ['apiVersion: tollgate.io/v1alpha1', `kind: ${kind}`, `metadata: { name: ${name} }`, 'spec:']
    .concat(spec.map((line) => `  ${line}`))
    .join('\n');

const files = {
  'tollgate.yaml': doc('Settings', 'settings', [
    `cluster: ${namespace}`,
    'audit: { mode: strict, batch: { maxDecisions: 50, maxDelay: 100ms } }',
  ]),
  'tenants/bgrun.yaml': doc('Tenant', 'bgrun', [
    `namespaces: [${namespace}]`,
    'gatePrefixes: [bgrun.tollgate.io/]',
  ]),
  // Held until an Approval that never comes.
  'gates/approved.yaml': doc('GatePolicy', 'approved', [
    'tenant: bgrun',
    `gate: ${gate}`,
    'conditions: [{ type: Approved }]',
  ]),
};

before(async () => {
  cp = await sharedControlPlane();
  core = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
});
after(async () => {
  for (const run of runs) if (run.child.exitCode === null) run.child.kill('SIGKILL');
  await removeNamespace(core, namespace);
});

test('a gate removed by hand while tollgate was down is recorded at the next term start', async () => {
  const server = git.server();
  const work = mkdtempSync(join(tmpdir(), 'tollgate-break-glass-run-'));
  const tokenFile = join(work, 'token');
  writeFileSync(tokenFile, server.token);
  const policyUrl = server.createRepo('policy');
  await pushTree(server, policyUrl, files);
  const start = async (n: number) => {
    const dir = join(work, `run-${n}`);
    const run = await startTollgateRun({
      kubeconfig: cp.tollgateKubeconfig,
      work: mkdtempSync(`${dir}-`),
      policy: { url: policyUrl, tokenFile },
      audit: { url: policyUrl, tokenFile },
      leaseName,
    });
    runs.push(run);
    return run;
  };
  const condition = async () =>
    (await core.readNamespacedPod({ namespace, name: 'urgent' })).status?.conditions?.find(
      (c) => c.type === 'tollgate.io/Released',
    );

  const first = await start(1);
  await core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name: 'urgent' },
      spec: { schedulingGates: [{ name: gate }], containers: [{ name: 'main', image: 'busybox' }] },
    },
  });
  await eventually(
    'the first run holds the pod and says so on it',
    async () => ((await condition())?.status === 'False' ? true : undefined),
    { timeoutMs: 60_000 },
  );
  first.child.kill('SIGKILL');
  await new Promise((resolve) => first.child.once('exit', resolve));

  await core.patchNamespacedPod(
    {
      namespace,
      name: 'urgent',
      fieldManager: 'kubectl-patch',
      body: [
        { op: 'test', path: '/spec/schedulingGates/0/name', value: gate },
        { op: 'remove', path: '/spec/schedulingGates/0' },
      ],
    },
    setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
  );

  const second = await start(2);
  const events = cp.kubeConfig('admin').makeApiClient(EventsV1Api);
  const event = await eventually(
    'a GateRemovedOutsideTollgate Event on the pod',
    async () =>
      (await events.listNamespacedEvent({ namespace })).items.find(
        (e) => e.reason === 'GateRemovedOutsideTollgate' && e.regarding?.name === 'urgent',
      ),
    { timeoutMs: 60_000 },
  );
  assert.equal(event.type, 'Warning');
  assert.match(event.note ?? '', /removed outside tollgate \(break-glass\)/);
  await eventually('the condition says it was removed outside tollgate', async () => {
    const shown = await condition();
    return shown?.status === 'True' && shown.reason === 'RemovedOutsideTollgate' ? true : undefined;
  });
  const metrics = await (await fetch(second.metrics)).text();
  assert.match(metrics, /^tollgate_break_glass_releases_total\{tenant="bgrun"\} 1$/m);
  const record = await eventually('a BreakGlass record on the audit branch', async () =>
    (await auditRecords(policyUrl, server.token)).find(
      (r) => r.kind === 'BreakGlass' && r.target.name === 'urgent',
    ),
  );
  assert.equal(record.tenant, 'bgrun');
  assert.equal((record.inputs[0]?.value as { evidence?: string }).evidence, 'held');
});
