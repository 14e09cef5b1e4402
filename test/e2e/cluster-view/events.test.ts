/** Kubernetes Events written by the `tollgate` identity: aggregated and rate limited. */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CoreV1Api, EventsV1Api, type V1Pod } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { createEventRecorder, reportingController } from '../../../src/cluster/events.ts';
import { createLogger } from '../../../src/observe/log.ts';

const namespace = 'events-e2e';
let cp: ControlPlane;
let admin: CoreV1Api;

before(async () => {
  cp = await sharedControlPlane();
  admin = cp.kubeConfig('admin').makeApiClient(CoreV1Api);
  await admin.createNamespace({ body: { metadata: { name: namespace } } });
});
after(async () => {
  await admin.deleteNamespace({ name: namespace }).catch(() => undefined);
});

test('repeated decisions on a pod become one Event with a series count; a mass of pods is rate limited', async () => {
  const pods: V1Pod[] = [];
  for (let i = 0; i < 12; i++) {
    pods.push(
      await admin.createNamespacedPod({
        namespace,
        body: {
          metadata: { name: `p-${i}` },
          spec: {
            schedulingGates: [{ name: 'tollgate.io/gate' }],
            containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }],
          },
        },
      }),
    );
  }
  const recorder = createEventRecorder(cp.kubeConfig('tollgate'), {
    ratePerSecond: 10,
    burst: 2,
    logger: createLogger({ level: 'warn' }),
  });
  const subject = (i: number) => ({ namespace, name: `p-${i}`, uid: pods[i]?.metadata?.uid ?? '' });
  const started = Date.now();
  recorder.record(subject(0), {
    type: 'Normal',
    reason: 'GateHeld',
    action: 'Hold',
    note: 'waiting for ConfigMap switch',
  });
  await recorder.flush();
  for (let n = 0; n < 3; n++)
    recorder.record(subject(0), {
      type: 'Normal',
      reason: 'GateHeld',
      action: 'Hold',
      note: 'still waiting',
    });
  for (let i = 1; i < 12; i++)
    recorder.record(subject(i), {
      type: 'Normal',
      reason: 'GateReleased',
      action: 'Release',
      note: 'conditions hold',
    });
  await recorder.flush(AbortSignal.timeout(20_000));
  const elapsed = Date.now() - started;
  await recorder.close();

  const events = await cp
    .kubeConfig('admin')
    .makeApiClient(EventsV1Api)
    .listNamespacedEvent({ namespace });
  const ours = events.items.filter((e) => e.reportingController === reportingController);
  const held = ours.filter((e) => e.regarding?.name === 'p-0' && e.reason === 'GateHeld');
  assert.equal(held.length, 1, 'one Event per (pod, reason)');
  assert.equal(held[0]?.series?.count, 4);
  assert.equal(
    held[0]?.note,
    'waiting for ConfigMap switch',
    'the first note stays (the API makes it immutable)',
  );
  assert.equal(ours.filter((e) => e.reason === 'GateReleased').length, 11);
  // 13 writes with a burst of 2 at 10/s need at least ~1.1 s.
  assert.ok(elapsed >= 1000, `13 writes took only ${elapsed} ms: not rate limited`);
});
