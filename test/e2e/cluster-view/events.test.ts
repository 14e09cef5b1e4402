/**
 * Kubernetes Events written by the `tollgate` identity: aggregated and rate limited.
 * The rate limit is judged by counting at the API server (the Events' creationTimestamp,
 * which the server sets, per second of its clock), never by the test's elapsed time;
 * test/unit/cluster/events-rate.test.ts proves the pacing itself on an injected clock.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CoreV1Api, EventsV1Api, type V1Pod } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../../support/control-plane.ts';
import { createEventRecorder, reportingController } from '../../../src/cluster/events.ts';
import { eventDispatcher } from '../../support/event-writes.ts';
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
  const rate = { ratePerSecond: 2, burst: 1 };
  const recorder = createEventRecorder(eventDispatcher(cp.kubeConfig('tollgate')), {
    ...rate,
    logger: createLogger({ level: 'warn' }),
  });
  const subject = (i: number) => ({ namespace, name: `p-${i}`, uid: pods[i]?.metadata?.uid ?? '' });
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
  await recorder.flush(AbortSignal.timeout(120_000));
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
  // The recorder writes one at a time and takes a token before each write, so the writes
  // the API server received within one second of its clock were all sent within that
  // second, but the first: at most burst + rate + 1. Unlimited, the 12 creates land in
  // one or two seconds (6 or more in one).
  const perSecond = new Map<number, number>();
  for (const e of ours) {
    const second = Math.floor((e.metadata?.creationTimestamp?.getTime() ?? NaN) / 1000);
    perSecond.set(second, (perSecond.get(second) ?? 0) + 1);
  }
  const most = Math.max(...perSecond.values());
  assert.ok(
    most <= rate.burst + rate.ratePerSecond + 1,
    `the API server created ${most} of tollgate's Events within one second (by second: ${JSON.stringify([...perSecond])}): not rate limited to ${rate.ratePerSecond}/s`,
  );
});
