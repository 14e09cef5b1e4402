/**
 * Resize state a tenant writes is not honoured, on the real control plane: tollgate
 * lowers a container's memory (storing a sealed last-good), someone with pod patch
 * replaces the last-good with 1Gi (inside the policy bounds, so clamping alone would
 * honour it), and the container is OOMKilled. tollgate ignores the forged value: no
 * rollback to 1Gi; the OOM kill raises memory one step; the rejection is on the audit
 * branch, an Event on the pod and counted once in tollgate_resize_state_rejected_total.
 * The pod keeps its uid, and its restart count moves only by the OOM kill.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { EventsV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { eventually } from '../../support/eventually.ts';
import { aResizePolicy } from '../../builders/resize.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { lastGoodAnnotation } from '../../../src/decide/resize-state.ts';
import {
  mergePatch,
  policyFor,
  runWorkerLoweredOneStep,
  startResizeWorld,
  type ResizeWorld,
} from './harness.ts';
import { actualMemoryOf, memoryOf, workerPod } from './pods.ts';

const queueMetric = 'tollgate_test_queue_length';
const Mi = 2 ** 20;
let world: ResizeWorld;

async function rejectedUnsigned(): Promise<number> {
  const metric = await registry.getSingleMetric('tollgate_resize_state_rejected_total')?.get();
  return metric?.values.find((v) => v.labels.reason === 'unsigned')?.value ?? 0;
}

before(async () => {
  world = await startResizeWorld('forged', { 'rz-forged-node': { cpu: '4', memory: '8Gi' } });
  const policy = policyFor(world.namespace, [
    aResizePolicy({
      name: 'forged',
      selector: { matchLabels: { app: 'forged' }, matchExpressions: [] },
      containers: { app: { memory: { min: 128 * Mi, max: 1024 * Mi, step: 128 * Mi } } },
      signals: [
        {
          name: 'queue',
          query: `${queueMetric}{namespace="$namespace",pod="$pod"}`,
          scaleUpAbove: 100,
          scaleDownBelow: 20,
        },
      ],
      windowMs: 2000,
      cooldownMs: 3000,
    }),
  ]);
  world.loop(() => policy);
});

after(async () => {
  await world?.stop();
});

test('a last-good written by hand is ignored, recorded once, and an OOM kill raises memory one step instead', async () => {
  await runWorkerLoweredOneStep(world, queueMetric, {
    name: 'forged-0',
    app: 'forged',
    node: 'rz-forged-node',
  });
  const before = await rejectedUnsigned();

  // Someone with pod patch forges the rollback target: 1Gi, inside the bounds.
  const forged = JSON.stringify({
    containers: { app: { requests: { cpu: '100m', memory: '1Gi' }, limits: {} } },
  });
  await world.admin.patchNamespacedPod(
    {
      namespace: world.namespace,
      name: 'forged-0',
      body: { metadata: { annotations: { [lastGoodAnnotation]: forged } } },
    },
    mergePatch,
  );
  await world.kubelet.oomKill(world.namespace, 'forged-0', 'app');

  const raised = await eventually(
    'memory raised one step (512Mi) after the OOM kill',
    async () => {
      const pod = await world.pod('forged-0');
      return memoryOf(pod) === 512 * Mi && actualMemoryOf(pod) === 512 * Mi ? pod : undefined;
    },
    { timeoutMs: 30_000 },
  );
  assert.equal(memoryOf(raised), 512 * Mi);
  await world.assertInPlace('forged-0', 1);

  const records = (await world.auditRecords()).filter(
    (r) => (r.target as { name: string }).name === 'forged-0',
  );
  const rejections = records.filter((r) =>
    /resize state on the pod ignored/.test(String(r.reason)),
  );
  assert.equal(rejections.length, 1, 'recorded once, not once per pass');
  assert.match(JSON.stringify(rejections[0]?.inputs), /resize-last-good.*unsigned/);
  assert.equal(
    records.filter((r) => r.kind === 'Rollback').length,
    0,
    'no rollback to the forged size',
  );
  for (const r of records) {
    const target = (r.inputs as { condition: string; value: unknown }[]).find(
      (i) => i.condition === 'target',
    );
    assert.doesNotMatch(JSON.stringify(target?.value ?? {}), /1Gi/, `${String(r.kind)} target`);
  }
  assert.equal((await rejectedUnsigned()) - before, 1, 'counted once');

  await world.events.flush();
  const events = await world.cp
    .kubeConfig('admin')
    .makeApiClient(EventsV1Api)
    .listNamespacedEvent({ namespace: world.namespace, fieldSelector: 'regarding.name=forged-0' });
  const reasons = events.items.map((e) => `${e.type}/${e.reason}`);
  assert.ok(reasons.includes('Warning/TollgateResizeStateRejected'), reasons.join(', '));
});

test('state cannot ride on the resize write: the API server drops metadata changes sent to pods/resize, by patch or server-side apply, so a step takes an annotation write and a resize', async () => {
  world.prom.set(queueMetric, { namespace: world.namespace, pod: 'ride-0' }, 50);
  await world.runPod(
    workerPod('ride-0', 'not-governed', 'rz-forged-node', { cpu: '100m', memory: '256Mi' }),
  );
  const answer = await world.admin.patchNamespacedPodResize(
    {
      namespace: world.namespace,
      name: 'ride-0',
      body: {
        metadata: { annotations: { [lastGoodAnnotation]: '{"containers":{}}' } },
        spec: { containers: [{ name: 'app', resources: { requests: { memory: '384Mi' } } }] },
      },
    },
    setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
  );
  assert.equal(memoryOf(answer), 384 * Mi, 'the resize itself is applied');
  assert.equal(
    answer.metadata?.annotations?.[lastGoodAnnotation],
    undefined,
    'the annotation sent with it is dropped',
  );
  // Server-side apply to pods/resize goes through the same subresource: it also resizes and
  // drops the annotation.
  const applied = await world.admin.patchNamespacedPodResize(
    {
      namespace: world.namespace,
      name: 'ride-0',
      fieldManager: 'tollgate-e2e',
      force: true,
      body: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: 'ride-0',
          namespace: world.namespace,
          annotations: { [lastGoodAnnotation]: '{"containers":{}}' },
        },
        spec: { containers: [{ name: 'app', resources: { requests: { memory: '320Mi' } } }] },
      },
    },
    setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
  );
  assert.equal(memoryOf(applied), 320 * Mi, 'the applied resize is applied');
  assert.equal(
    applied.metadata?.annotations?.[lastGoodAnnotation],
    undefined,
    'the annotation in the applied configuration is dropped',
  );
  assert.equal(
    (await world.pod('ride-0')).metadata?.annotations?.[lastGoodAnnotation],
    undefined,
    'and not stored',
  );
  // Nor can the resize ride on the annotation write: the pod itself refuses a resources change.
  const refused = await world.admin
    .patchNamespacedPod(
      {
        namespace: world.namespace,
        name: 'ride-0',
        body: {
          metadata: { annotations: { [lastGoodAnnotation]: '{"containers":{}}' } },
          spec: { containers: [{ name: 'app', resources: { requests: { memory: '448Mi' } } }] },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    )
    .then(
      () => undefined,
      (error: unknown) => error as { code?: number; body?: string },
    );
  assert.equal(
    refused?.code,
    422,
    `a resources change on the pod itself is refused: ${refused?.body}`,
  );
  const after = await world.pod('ride-0');
  assert.equal(memoryOf(after), 320 * Mi);
  assert.equal(
    after.metadata?.annotations?.[lastGoodAnnotation],
    undefined,
    'nothing of it stored',
  );
  await world.assertInPlace('ride-0');
});
