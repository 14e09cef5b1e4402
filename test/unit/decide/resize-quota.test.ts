import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chargeQuotas, resizeCharge, type QuotaCharge } from '../../../src/decide/resize-quota.ts';
import { decidePodResize, type PodResizePlan } from '../../../src/decide/resize-plan.ts';
import type { ResourceQuotaLike } from '../../../src/decide/resize-objects.ts';
import { aResizePolicy, aRunningPod, steady, testStateKeys } from '../../builders/resize.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const mi = 2 ** 20;

test('resizeCharge: what a resize adds to the namespace quota', () => {
  const burstable = aRunningPod('web-0', 'team-a')
    .container('app', { cpu: '500m', memory: '256Mi' }, { cpu: '1', memory: '512Mi' })
    .container('cache', { cpu: '100m', memory: '64Mi' })
    .obj();
  const podLevel = aRunningPod('pl-0', 'team-a').container('app', { cpu: '500m' }).obj();
  (podLevel.spec as { resources?: unknown }).resources = {
    requests: { cpu: '1', memory: '1Gi' },
  };
  const cases: {
    name: string;
    pod: typeof burstable;
    op: Parameters<typeof resizeCharge>[1];
    charge: QuotaCharge | undefined;
  }[] = [
    {
      name: 'a container step up charges its request and limit increases, other containers count as they are',
      pod: burstable,
      op: {
        type: 'resize',
        containers: [
          {
            name: 'app',
            resources: {
              requests: { cpu: '750m', memory: '256Mi' },
              limits: { cpu: '1250m', memory: '512Mi' },
            },
          },
        ],
      },
      charge: { requests: { cpu: 250 }, limits: { cpu: 250 } },
    },
    {
      name: 'a step down charges nothing (room frees only once the kubelet has actuated it)',
      pod: burstable,
      op: {
        type: 'resize',
        containers: [{ name: 'app', resources: { requests: { cpu: '250m', memory: '256Mi' } } }],
      },
      charge: undefined,
    },
    {
      name: 'one resource up and another down charges only the one going up',
      pod: burstable,
      op: {
        type: 'resize',
        containers: [
          {
            name: 'app',
            resources: {
              requests: { cpu: '250m', memory: '384Mi' },
              limits: { cpu: '1', memory: '512Mi' },
            },
          },
        ],
      },
      charge: { requests: { memory: 128 * mi }, limits: {} },
    },
    {
      name: 'a pod-level step charges the pod-level requests',
      pod: podLevel,
      op: { type: 'resize', containers: [], pod: { requests: { cpu: '1500m', memory: '1Gi' } } },
      charge: { requests: { cpu: 500 }, limits: {} },
    },
    {
      name: 'an annotation write charges nothing',
      pod: burstable,
      op: { type: 'annotate', annotations: { x: 'y' } } as Parameters<typeof resizeCharge>[1],
      charge: undefined,
    },
  ];
  for (const c of cases) assert.deepEqual(resizeCharge(c.pod, c.op), c.charge, c.name);
});

test('chargeQuotas: the quotas as they will be once the charged steps are admitted', () => {
  const quota: ResourceQuotaLike = {
    metadata: { name: 'compute', namespace: 'team-a' },
    status: {
      hard: { 'requests.cpu': '2', 'limits.memory': '4Gi', pods: '10' },
      used: { 'requests.cpu': '1500m', 'limits.memory': '1Gi', pods: '3' },
    },
  };
  const objectsOnly: ResourceQuotaLike = {
    metadata: { name: 'objects' },
    status: { hard: { pods: '10' }, used: { pods: '3' } },
  };
  const charges: QuotaCharge[] = [
    { requests: { cpu: 250 }, limits: { memory: 128 * mi } },
    { requests: { cpu: 250 }, limits: {} },
  ];
  const [charged, untouched] = chargeQuotas([quota, objectsOnly], charges);
  assert.deepEqual(
    charged?.status?.used,
    { 'requests.cpu': '2', 'limits.memory': '1152Mi', pods: '3' },
    'used rises by the sum of the charges on the keys the quota limits',
  );
  assert.equal(untouched, objectsOnly, 'a quota on keys resize cannot change is passed as is');
  assert.deepEqual(quota.status?.used?.['requests.cpu'], '1500m', 'the input is not changed');
  assert.deepEqual(chargeQuotas([quota], []), [quota], 'no charge, no change');
  const specOnly = chargeQuotas(
    [{ metadata: { name: 'new' }, spec: { hard: { cpu: '1' } } }],
    [{ requests: { cpu: 300 }, limits: {} }],
  );
  assert.deepEqual(
    specOnly[0]?.status,
    { hard: { cpu: '1' }, used: { cpu: '300m' } },
    'a quota the controller has not counted yet starts from zero used',
  );
});

test('two pods of one namespace with room for one step: the second, decided against the charged quota, is held with the quota named', () => {
  const quotas: ResourceQuotaLike[] = [
    {
      metadata: { name: 'compute' },
      status: { hard: { 'requests.cpu': '1250m' }, used: { 'requests.cpu': '1000m' } },
    },
  ];
  const decide = (name: string, q: readonly ResourceQuotaLike[]): PodResizePlan =>
    decidePodResize({
      policy: aResizePolicy({ containers: { app: { cpu: { min: 250, max: 2000, step: 250 } } } }),
      commit: 'c0ffee',
      pod: aRunningPod(name, 'team-a').container('app', { cpu: '500m' }).obj(),
      quotas: q,
      readings: [{ signal: 'queue', samples: steady(500, now) }],
      approvals: [],
      now,
      stepMs: 15_000,
      stateKeys: testStateKeys,
    });
  const first = decide('web-0', quotas);
  const write = first.writes.find((w) => w.op.type === 'resize');
  assert.ok(write, 'the first pod takes the room');
  const charge = resizeCharge(
    aRunningPod('web-0', 'team-a').container('app', { cpu: '500m' }).obj(),
    write.op,
  );
  assert.deepEqual(charge, { requests: { cpu: 250 }, limits: {} });
  const second = decide('web-1', chargeQuotas(quotas, [charge as QuotaCharge]));
  assert.equal(second.writes.length, 0, 'no write for the second pod');
  assert.deepEqual(
    second.decisions.map((d) => [d.kind, d.outcome.result]),
    [['Hold', 'recorded']],
    'the held step is recorded',
  );
  assert.match(
    second.decisions[0]?.reason ?? '',
    /exceeds ResourceQuota compute requests\.cpu room 0/,
  );
  const unchargedSecond = decide('web-1', quotas);
  assert.ok(
    unchargedSecond.writes.some((w) => w.op.type === 'resize'),
    'without the charge the second pod would have been given the same room',
  );
});
