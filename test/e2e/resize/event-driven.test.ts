/**
 * Event-driven resize, end to end: the loop's timer is an hour, so nothing the test
 * does not ask for happens by timer. The test drives the step down itself (one pass at
 * a time); after that it never calls a pass again, and the OOM kill the kubelet reports
 * is rolled back all the same: the pod's own change woke the loop. The pod keeps its
 * uid, and its restart count moves only by the OOM kill itself.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { eventually } from '../../support/eventually.ts';
import { aResizePolicy } from '../../builders/resize.ts';
import { toStoredAmount } from '../../../src/lib/quantity.ts';
import { registry } from '../../../src/observe/metrics.ts';
import type { ResizeLoop } from '../../../src/loops/resize.ts';
import { policyFor, startResizeWorld, type ResizeWorld } from './harness.ts';

const queueMetric = 'tollgate_test_queue_length';
const Mi = 2 ** 20;

const policy = aResizePolicy({
  name: 'wake',
  source: { file: 'resize/wake.yaml', document: 0 },
  selector: { matchLabels: { app: 'wake' }, matchExpressions: [] },
  containers: { app: { memory: { min: 128 * Mi, max: 2 ** 30, step: 128 * Mi } } },
  signals: [
    {
      name: 'queue',
      query: `${queueMetric}{namespace="$namespace",pod="$pod"}`,
      scaleUpAbove: 100,
      scaleDownBelow: 20,
    },
  ],
  windowMs: 2000,
  hysteresis: 0.1,
  cooldownMs: 3_600_000,
  rollback: { onOOMKilled: true, pauseForReview: true },
});

/** cpu and memory bounds, a neutral signal: only an OOM kill asks for anything. */
const oomPolicy = aResizePolicy({
  ...policy,
  name: 'oomup',
  source: { file: 'resize/oomup.yaml', document: 0 },
  selector: { matchLabels: { app: 'oomup' }, matchExpressions: [] },
  // An OOM kill counts while it is inside the window: wide enough for a loaded machine.
  windowMs: 30_000,
  containers: {
    app: {
      cpu: { min: 100, max: 2000, step: 100 },
      memory: { min: 128 * Mi, max: 2 ** 30, step: 128 * Mi },
    },
  },
});

let world: ResizeWorld;
let loop: ResizeLoop;

before(async () => {
  world = await startResizeWorld('wake', { 'rz-wake-node': { cpu: '4', memory: '8Gi' } });
  loop = world.loop(() => policyFor(world.namespace, [policy, oomPolicy]), {
    intervalMs: 3_600_000,
  });
});

after(async () => {
  await world?.stop();
});

function memory(pod: V1Pod): { desired: number; actual: number } {
  return {
    desired: toStoredAmount('memory', pod.spec?.containers[0]?.resources?.requests?.memory ?? '0'),
    actual: toStoredAmount(
      'memory',
      pod.status?.containerStatuses?.[0]?.resources?.requests?.memory ?? '0',
    ),
  };
}

async function wakeups(cause: string): Promise<number> {
  const metric = await registry.getSingleMetric('tollgate_resize_wakeups_total')?.get();
  return metric?.values.find((v) => v.labels.cause === cause)?.value ?? 0;
}

test('an OOM kill after a decrease is rolled back on the pod change, with no timer pass and no pass asked for', async () => {
  world.prom.set(queueMetric, { namespace: world.namespace, pod: 'wake-0' }, 5);
  const started = await world.runPod({
    metadata: { name: 'wake-0', labels: { app: 'wake' } },
    spec: {
      nodeName: 'rz-wake-node',
      containers: [
        {
          name: 'app',
          image: 'registry.example/worker:1',
          resources: { requests: { cpu: '100m', memory: '512Mi' } },
        },
      ],
    },
  });
  // The test drives the decrease: passes until memory is one step down and actuated
  // (a wake-up on the pod's own changes may take that step first; either is fine).
  const lowered = await eventually(
    'memory lowered to 384Mi and actuated',
    async () => {
      await loop.pass();
      const pod = await world.pod('wake-0');
      const m = memory(pod);
      return m.desired === 384 * Mi && m.actual === 384 * Mi ? pod : undefined;
    },
    { timeoutMs: 30_000 },
  );
  assert.equal(lowered.metadata?.uid, started.metadata?.uid);
  assert.equal(
    lowered.status?.containerStatuses?.[0]?.restartCount,
    0,
    'resized without a restart',
  );
  const restartWakeups = await wakeups('restart');

  // From here on no pass is asked for, and the timer is an hour away.
  await world.kubelet.oomKill(world.namespace, 'wake-0', 'app');
  const rolledBack = await eventually(
    'memory restored to 512Mi by the wake-up alone',
    async () => {
      const pod = await world.pod('wake-0');
      const m = memory(pod);
      return m.desired === 512 * Mi && m.actual === 512 * Mi ? pod : undefined;
    },
    { timeoutMs: 30_000 },
  );
  assert.ok((await wakeups('restart')) > restartWakeups, 'the restart woke the loop');
  assert.equal(rolledBack.metadata?.uid, started.metadata?.uid, 'the same pod');
  assert.equal(
    rolledBack.status?.containerStatuses?.[0]?.restartCount,
    1,
    'one restart: the OOM kill; the rollback restarted nothing',
  );
  const rollback = (await world.auditRecords()).find(
    (r) => r.kind === 'Rollback' && (r.outcome as { result: string }).result === 'succeeded',
  );
  assert.ok(rollback, 'the rollback and its outcome are on the audit branch');
});

test('an OOM kill tollgate did not cause raises memory one step, on the pod change alone; cpu stays', async () => {
  world.prom.set(queueMetric, { namespace: world.namespace, pod: 'oomup-0' }, 50);
  const started = await world.runPod({
    metadata: { name: 'oomup-0', labels: { app: 'oomup' } },
    spec: {
      nodeName: 'rz-wake-node',
      containers: [
        {
          name: 'app',
          image: 'registry.example/worker:1',
          resources: { requests: { cpu: '200m', memory: '256Mi' } },
        },
      ],
    },
  });
  // No pass is asked for in this test; the timer is an hour away.
  await world.kubelet.oomKill(world.namespace, 'oomup-0', 'app');
  const raised = await eventually(
    'memory one step up (384Mi) and actuated',
    async () => {
      const pod = await world.pod('oomup-0');
      const m = memory(pod);
      return m.desired === 384 * Mi && m.actual === 384 * Mi ? pod : undefined;
    },
    { timeoutMs: 30_000 },
  );
  assert.equal(
    raised.spec?.containers[0]?.resources?.requests?.cpu,
    '200m',
    'cpu is decided on its own signals: unchanged',
  );
  assert.equal(raised.metadata?.uid, started.metadata?.uid, 'the same pod');
  assert.equal(raised.status?.containerStatuses?.[0]?.restartCount, 1, 'the OOM kill only');
  const resize = (await world.auditRecords()).find(
    (r) => r.kind === 'Resize' && (r.target as { name: string }).name === 'oomup-0',
  );
  assert.match(String(resize?.reason), /OOMKilled/, 'the record says why');
});
