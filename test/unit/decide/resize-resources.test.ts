import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  actualResources,
  desiredResources,
  moveRequest,
  qosClass,
  sameResources,
  stepWithin,
} from '../../../src/decide/resize-resources.ts';
import { aRunningPod } from '../../builders/resize.ts';

test('QoS class as the API server computes it', () => {
  const cases: {
    name: string;
    pod: ReturnType<ReturnType<typeof aRunningPod>['obj']>;
    want: string;
  }[] = [
    {
      name: 'requests equal to limits for cpu and memory is Guaranteed',
      pod: aRunningPod('p', 'ns').guaranteed('app', '1', '1Gi').obj(),
      want: 'Guaranteed',
    },
    {
      name: 'limits only are defaulted to requests and so Guaranteed',
      pod: aRunningPod('p', 'ns').container('app', {}, { cpu: '1', memory: '1Gi' }).obj(),
      want: 'Guaranteed',
    },
    {
      name: 'requests without limits is Burstable',
      pod: aRunningPod('p', 'ns').container('app', { cpu: '1' }).obj(),
      want: 'Burstable',
    },
    {
      name: 'one Guaranteed and one Burstable container is Burstable',
      pod: aRunningPod('p', 'ns').guaranteed('a', '1', '1Gi').container('b', { cpu: '1' }).obj(),
      want: 'Burstable',
    },
    {
      name: 'nothing set is BestEffort',
      pod: aRunningPod('p', 'ns').container('app', {}).obj(),
      want: 'BestEffort',
    },
    {
      name: 'pod-level requests equal to limits is Guaranteed',
      pod: aRunningPod('p', 'ns')
        .container('app', {})
        .podResources({ cpu: '2', memory: '2Gi' }, { cpu: '2', memory: '2Gi' })
        .obj(),
      want: 'Guaranteed',
    },
  ];
  for (const c of cases) assert.equal(qosClass(desiredResources(c.pod)), c.want, c.name);
});

test('moving a request keeps the QoS shape', () => {
  const guaranteed = { requests: { cpu: 500 }, limits: { cpu: 500 } };
  assert.deepEqual(moveRequest(guaranteed, 'cpu', 750), {
    requests: { cpu: 750 },
    limits: { cpu: 750 },
  });
  const burstable = { requests: { cpu: 500 }, limits: { cpu: 1000 } };
  assert.deepEqual(moveRequest(burstable, 'cpu', 750), {
    requests: { cpu: 750 },
    limits: { cpu: 1250 },
  });
  assert.deepEqual(moveRequest(burstable, 'cpu', 250), {
    requests: { cpu: 250 },
    limits: { cpu: 750 },
  });
  const noLimit = { requests: { memory: 100 }, limits: {} };
  assert.deepEqual(moveRequest(noLimit, 'memory', 200), { requests: { memory: 200 }, limits: {} });
});

test('stepping stays within bounds', () => {
  const bounds = { min: 250, max: 1000, step: 250 };
  const cases: { name: string; from: number; dir: 'up' | 'down'; want: number }[] = [
    { name: 'one step up from the middle', from: 500, dir: 'up', want: 750 },
    { name: 'a step up past max stops at max', from: 900, dir: 'up', want: 1000 },
    { name: 'a step down past min stops at min', from: 300, dir: 'down', want: 250 },
    { name: 'at max a step up stays at max', from: 1000, dir: 'up', want: 1000 },
    {
      name: 'a value above max is brought to max even when stepping up',
      from: 3000,
      dir: 'up',
      want: 1000,
    },
  ];
  for (const c of cases) assert.equal(stepWithin(c.from, c.dir, bounds), c.want, c.name);
});

test('desired and actual resources are kept apart', () => {
  const pod = aRunningPod('p', 'ns')
    .container('app', { cpu: '750m' })
    .actual({ cpu: '500m' })
    .obj();
  const desired = desiredResources(pod);
  const actual = actualResources(pod);
  assert.ok(actual);
  assert.equal(desired.containers.app?.requests.cpu, 750);
  assert.equal(actual.containers.app?.requests.cpu, 500);
  assert.equal(sameResources(desired, actual), false);
});

test('a pod whose kubelet reported no resources has no actual resources', () => {
  const pod = aRunningPod('p', 'ns').container('app', { cpu: '1' }).obj();
  const statuses = pod.status?.containerStatuses ?? [];
  for (const s of statuses) delete s.resources;
  assert.equal(actualResources(pod), undefined);
});
