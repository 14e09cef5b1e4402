/**
 * Rollback and pause end to end, with the policy in a real Git repository read by the
 * real policy source: tollgate lowers a container's memory, the container is OOMKilled,
 * tollgate restores the last good memory, pauses the workload (both in the audit trail
 * on the Git server), leaves it alone while paused, and resumes when an Approval commit
 * lands in the policy repository.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventsV1Api } from '@kubernetes/client-node';
import { eventually } from '../../support/eventually.ts';
import { pushTree } from '../../support/git-server.ts';
import { PolicySource } from '../../../src/policy/source.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { lastGoodAnnotation, pausedAnnotation } from '../../../src/decide/resize-state.ts';
import {
  runWorkerLoweredOneStep,
  startResizeWorld,
  storedState,
  type ResizeWorld,
} from './harness.ts';
import { actualMemoryOf, cpuOf, memoryOf, workerPod } from './pods.ts';

const queueMetric = 'tollgate_test_queue_length';
const errorMetric = 'tollgate_test_error_ratio';
let world: ResizeWorld;
let source: PolicySource;
let policyRepo: string;

const Mi = 2 ** 20;

function policyFiles(namespace: string): Record<string, string> {
  return {
    'tollgate.yaml': [
      'apiVersion: tollgate.io/v1alpha1',
      'kind: Settings',
      'metadata: { name: tollgate }',
      'spec:',
      '  cluster: e2e',
      '',
    ].join('\n'),
    'tenants/team-a.yaml': [
      'apiVersion: tollgate.io/v1alpha1',
      'kind: Tenant',
      'metadata: { name: team-a }',
      'spec:',
      `  namespaces: [${namespace}]`,
      '  gatePrefixes: [team-a.tollgate.io/]',
      '',
    ].join('\n'),
    'resize/oomy.yaml': [
      'apiVersion: tollgate.io/v1alpha1',
      'kind: ResizePolicy',
      'metadata: { name: oomy }',
      'spec:',
      '  tenant: team-a',
      '  selector: { matchLabels: { app: oomy } }',
      '  containers:',
      '    app:',
      '      memory: { min: 128Mi, max: 1Gi, step: 128Mi }',
      '  signals:',
      '    - name: queue',
      `      query: ${queueMetric}{namespace="$namespace",pod="$pod"}`,
      '      scaleUpAbove: 100',
      '      scaleDownBelow: 20',
      '  window: 2s',
      '  hysteresis: 0.1',
      '  cooldown: 3s',
      '  deferredTimeout: 30s',
      '  maxAttempts: 3',
      '  rollback: { onOOMKilled: true, pauseForReview: true }',
      '  allowRestart: false',
      '',
    ].join('\n'),
    'resize/crashy.yaml': [
      'apiVersion: tollgate.io/v1alpha1',
      'kind: ResizePolicy',
      'metadata: { name: crashy }',
      'spec:',
      '  tenant: team-a',
      '  selector: { matchLabels: { app: crashy } }',
      '  containers:',
      '    app:',
      '      cpu: { min: 250m, max: 2, step: 250m }',
      '  signals:',
      '    - name: queue',
      `      query: ${queueMetric}{namespace="$namespace",pod="$pod"}`,
      '      scaleUpAbove: 100',
      '      scaleDownBelow: 20',
      '  window: 2s',
      '  cooldown: 3s',
      '  pause: { onRestarts: 3, onStuckFor: 10m, onUnreadableFor: 1h }',
      '',
    ].join('\n'),
    'resize/slo.yaml': [
      'apiVersion: tollgate.io/v1alpha1',
      'kind: ResizePolicy',
      'metadata: { name: slo }',
      'spec:',
      '  tenant: team-a',
      '  selector: { matchLabels: { app: slo } }',
      '  containers:',
      '    app:',
      '      cpu: { min: 250m, max: 2, step: 250m }',
      '  signals:',
      '    - name: queue',
      `      query: ${queueMetric}{namespace="$namespace",pod="$pod"}`,
      '      scaleUpAbove: 100',
      '      scaleDownBelow: 20',
      '  slo:',
      `    query: max(${errorMetric}{namespace="$namespace",pod="$pod"})`,
      '    above: 0.05',
      '    for: 3s',
      '  window: 2s',
      '  hysteresis: 0.1',
      '  cooldown: 60s',
      '  deferredTimeout: 30s',
      '  maxAttempts: 3',
      '  rollback: { onOOMKilled: true, pauseForReview: true }',
      '  allowRestart: false',
      '',
    ].join('\n'),
  };
}

before(async () => {
  world = await startResizeWorld('rollback', { 'rz-oom-node': { cpu: '4', memory: '8Gi' } });
  policyRepo = world.git.createRepo('policy-rollback');
  await pushTree(world.git, policyRepo, policyFiles(world.namespace), {
    message: 'resize policy for oomy',
    branch: 'main',
  });
  source = new PolicySource({
    location: policyRepo,
    ref: 'main',
    token: world.git.token,
    cacheDir: mkdtempSync(join(tmpdir(), 'tollgate-policy-rollback-')),
    intervalMs: 500,
  });
  const first = await source.start();
  assert.equal(first.kind, 'applied', JSON.stringify(first));
  world.loop(() => source.current());
});

after(async () => {
  source?.stop();
  await world?.stop();
});

test('an OOMKilled container after a memory decrease is rolled back and paused, visibly in Git, and an approval commit resumes automation', async () => {
  const setQueue = (value: number) =>
    world.prom.set(queueMetric, { namespace: world.namespace, pod: 'oomy-0' }, value);
  // A quiet queue: tollgate lowers memory one step.
  const lowered = await runWorkerLoweredOneStep(world, queueMetric, {
    name: 'oomy-0',
    app: 'oomy',
    node: 'rz-oom-node',
  });
  assert.deepEqual(
    (storedState(lowered, lastGoodAnnotation) as { containers: { app: { requests: unknown } } })
      .containers.app.requests,
    {
      cpu: '100m',
      memory: '512Mi',
    },
  );

  // The container runs out of memory: rollback to 512Mi and pause.
  await world.kubelet.oomKill(world.namespace, 'oomy-0', 'app');
  const rolledBack = await eventually(
    'memory restored to 512Mi and the workload paused',
    async () => {
      const pod = await world.pod('oomy-0');
      return memoryOf(pod) === 512 * Mi &&
        actualMemoryOf(pod) === 512 * Mi &&
        pod.metadata?.annotations?.[pausedAnnotation]
        ? pod
        : undefined;
    },
    { timeoutMs: 30_000 },
  );
  assert.match(String(storedState(rolledBack, pausedAnnotation).reason), /OOMKilled/);
  await world.assertInPlace('oomy-0', 1);

  const records = (await world.auditRecords()).filter(
    (r) => (r.target as { name: string }).name === 'oomy-0',
  );
  const rollback = records.find(
    (r) => r.kind === 'Rollback' && (r.outcome as { result: string }).result === 'succeeded',
  );
  const pause = records.find(
    (r) => r.kind === 'Pause' && (r.outcome as { result: string }).result === 'succeeded',
  );
  assert.ok(rollback, 'the rollback and its outcome are on the audit branch');
  assert.ok(pause, 'the pause is on the audit branch');
  assert.match(String(pause.reason), /OOMKilled.*paused for oomy until an Approval/);
  assert.equal(
    (rollback.policy as { commit: string }).commit,
    source.current()?.commit,
    'the record names the policy commit',
  );
  assert.match(
    await registry.getSingleMetricAsString('tollgate_resize_rollbacks_total'),
    /reason="OOMKilled"\} 1/,
  );
  assert.match(
    await registry.getSingleMetricAsString('tollgate_resize_paused_workloads'),
    /tollgate_resize_paused_workloads 1/,
  );

  await world.events.flush();
  const podEvents = await world.cp
    .kubeConfig('admin')
    .makeApiClient(EventsV1Api)
    .listNamespacedEvent({ namespace: world.namespace, fieldSelector: 'regarding.name=oomy-0' });
  const reasons = podEvents.items.map((e) => `${e.type}/${e.reason}`);
  assert.ok(
    reasons.includes('Warning/TollgateResizeRollback'),
    `events on the pod: ${reasons.join(', ')}`,
  );
  assert.ok(
    reasons.includes('Warning/TollgateResizePaused'),
    `events on the pod: ${reasons.join(', ')}`,
  );

  // Paused: a quiet queue for several windows and cooldowns changes nothing.
  const generation = (await world.pod('oomy-0')).metadata?.generation;
  setQueue(5);
  await new Promise((resolve) => setTimeout(resolve, 7000));
  assert.equal(
    (await world.pod('oomy-0')).metadata?.generation,
    generation,
    'no resize while paused',
  );

  // A reviewer merges an Approval: automation resumes and the quiet queue lowers memory again.
  const approvalCommit = await pushTree(
    world.git,
    policyRepo,
    {
      'approvals/resume-oomy.yaml': [
        'apiVersion: tollgate.io/v1alpha1',
        'kind: Approval',
        'metadata: { name: resume-oomy }',
        'spec:',
        '  action: Resume',
        `  target: { kind: ResizePolicy, name: oomy, namespace: ${world.namespace} }`,
        '  approvedBy: reviewer@example.com',
        '  reason: the OOM came from a leak fixed in build 42; lowering memory is safe again',
        '',
      ].join('\n'),
    },
    { message: 'approve resuming oomy', branch: 'main' },
  );
  await eventually(
    'the approval commit in force',
    async () => source.current()?.commit === approvalCommit,
    { timeoutMs: 15_000 },
  );
  await eventually(
    'the pause lifted',
    async () => !(await world.pod('oomy-0')).metadata?.annotations?.[pausedAnnotation],
    { timeoutMs: 15_000 },
  );
  await eventually(
    'memory lowered again after the resume',
    async () => memoryOf(await world.pod('oomy-0')) === 384 * Mi,
    { timeoutMs: 20_000 },
  );

  const after = (await world.auditRecords()).filter(
    (r) => (r.target as { name: string }).name === 'oomy-0',
  );
  const resume = after.find(
    (r) => r.kind === 'Resume' && (r.outcome as { result: string }).result === 'succeeded',
  );
  assert.ok(resume, 'the resume is on the audit branch');
  assert.match(String(resume.reason), /resume-oomy by reviewer@example.com/);
  assert.equal((resume.policy as { commit: string }).commit, approvalCommit);
  assert.match(
    await registry.getSingleMetricAsString('tollgate_resize_paused_workloads'),
    /tollgate_resize_paused_workloads 0/,
  );
});

test('an SLO breached for longer than the policy allows after a resize rolls it back and pauses the workload', async () => {
  const labels = { namespace: world.namespace, pod: 'slo-0' };
  world.prom.set(queueMetric, labels, 50);
  world.prom.set(errorMetric, labels, 0.01);
  await world.runPod(workerPod('slo-0', 'slo', 'rz-oom-node', { cpu: '1', memory: '128Mi' }));
  world.prom.set(queueMetric, labels, 5);
  await eventually(
    'cpu lowered one step to 750m',
    async () => cpuOf(await world.pod('slo-0')) === 750,
    { timeoutMs: 20_000 },
  );
  world.prom.set(queueMetric, labels, 50);

  // A short blip does not count; a breach lasting longer than `for` (3s) does.
  world.prom.set(errorMetric, labels, 0.5);
  await new Promise((resolve) => setTimeout(resolve, 1000));
  world.prom.set(errorMetric, labels, 0.01);
  await new Promise((resolve) => setTimeout(resolve, 4000));
  assert.equal(cpuOf(await world.pod('slo-0')), 750, 'a one-second blip is not a breach');

  world.prom.set(errorMetric, labels, 0.5);
  const pod = await eventually(
    'cpu restored to 1 and the workload paused',
    async () => {
      const current = await world.pod('slo-0');
      return cpuOf(current) === 1000 && current.metadata?.annotations?.[pausedAnnotation]
        ? current
        : undefined;
    },
    { timeoutMs: 20_000 },
  );
  assert.match(String(storedState(pod, pausedAnnotation).reason), /SLO breached/);
  await world.assertInPlace('slo-0');
  const records = (await world.auditRecords()).filter(
    (r) => (r.target as { name: string }).name === 'slo-0',
  );
  assert.ok(
    records.some((r) => r.kind === 'Rollback' && /SLO breached/.test(String(r.reason))),
    'the SLO rollback is in Git',
  );
  assert.match(
    await registry.getSingleMetricAsString('tollgate_resize_rollbacks_total'),
    /reason="SLO"\} 1/,
  );
});

test('containers restarting after a resize pause the workload, with the cause in Git, an Event and a metric; the pod is never replaced', async () => {
  const labels = { namespace: world.namespace, pod: 'crashy-0' };
  world.prom.set(queueMetric, labels, 50);
  await world.runPod(
    workerPod('crashy-0', 'crashy', 'rz-oom-node', { cpu: '500m', memory: '128Mi' }),
  );
  world.prom.set(queueMetric, labels, 500);
  await eventually(
    'cpu raised one step to 750m',
    async () => cpuOf(await world.pod('crashy-0')) === 750,
    {
      timeoutMs: 20_000,
    },
  );
  world.prom.set(queueMetric, labels, 50);
  for (let kill = 0; kill < 3; kill += 1)
    await world.kubelet.oomKill(world.namespace, 'crashy-0', 'app');
  const paused = await eventually(
    'the workload paused on restarts',
    async () => {
      const pod = await world.pod('crashy-0');
      return pod.metadata?.annotations?.[pausedAnnotation] ? pod : undefined;
    },
    { timeoutMs: 20_000 },
  );
  assert.equal(storedState(paused, pausedAnnotation).cause, 'restarts');
  assert.equal(cpuOf(paused), 750, 'a pause resizes nothing');
  await world.assertInPlace('crashy-0', 3);
  const pause = (await world.auditRecords()).find(
    (r) =>
      (r.target as { name: string }).name === 'crashy-0' &&
      r.kind === 'Pause' &&
      (r.outcome as { result: string }).result === 'succeeded',
  );
  assert.ok(pause, 'the pause is on the audit branch');
  assert.match(String(pause.reason), /restarted 3 times since tollgate's last resize/);
  assert.match(JSON.stringify(pause.inputs), /"cause":"restarts"/);
  assert.match(
    await registry.getSingleMetricAsString('tollgate_resize_pauses_total'),
    /cause="restarts"\} 1/,
  );
  await world.events.flush();
  const events = await world.cp
    .kubeConfig('admin')
    .makeApiClient(EventsV1Api)
    .listNamespacedEvent({ namespace: world.namespace, fieldSelector: 'regarding.name=crashy-0' });
  const reasons = events.items.map((e) => `${e.type}/${e.reason}`);
  assert.ok(reasons.includes('Warning/TollgateResizePaused'), reasons.join(', '));
});
