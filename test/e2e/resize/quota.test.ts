/**
 * Resize within the namespace ResourceQuota, end to end: the real kube-apiserver (its
 * ResourceQuota admission on pods/resize) and quota controller, tollgate's live view
 * watching ResourceQuotas as the unprivileged `tollgate` identity (RBAC from deploy/),
 * and the resize loop wired with the view's quotas as `tollgate run` wires it
 * (`quotasFromView`).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { eventually } from '../../support/eventually.ts';
import { aResizePolicy } from '../../builders/resize.ts';
import { quotasFromView } from '../../../src/loops/resize.ts';
import { LiveClusterView } from '../../../src/cluster/view.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { mergePatch, policyFor, startResizeWorld, type ResizeWorld } from './harness.ts';
import { cpuOf } from './pods.ts';

const queueMetric = 'tollgate_test_queue_length';
const policy = aResizePolicy({
  name: 'quota',
  source: { file: 'resize/quota.yaml', document: 0 },
  selector: { matchLabels: { app: 'quota' }, matchExpressions: [] },
  signals: [
    {
      name: 'queue',
      query: `${queueMetric}{namespace="$namespace",pod="$pod"}`,
      scaleUpAbove: 100,
      scaleDownBelow: 20,
    },
  ],
  windowMs: 3000,
  hysteresis: 0.1,
  cooldownMs: 1000,
  deferredTimeoutMs: 30_000,
  containers: { app: { cpu: { min: 250, max: 1000, step: 250 } } },
});

let world: ResizeWorld;

async function api403s(): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find(
    (m) => m.name === 'tollgate_api_requests_total',
  );
  const values = (metric?.values ?? []) as {
    labels: Record<string, string | number>;
    value: number;
  }[];
  return values.filter((v) => String(v.labels.code) === '403').reduce((s, v) => s + v.value, 0);
}

before(async () => {
  world = await startResizeWorld('quota', { 'rz-quota-node': { cpu: '8', memory: '16Gi' } });
});

after(async () => {
  await world?.stop();
});

test('a ResourceQuota with room for one step of two wanted: one pod steps, the other is held naming the quota, and no write the API server refuses for quota is sent', async () => {
  const { admin, namespace } = world;
  // 2 x 250m used, 900m hard: room 400m, one 250m step fits, two do not.
  await admin.createNamespacedResourceQuota({
    namespace,
    body: { metadata: { name: 'compute' }, spec: { hard: { 'requests.cpu': '900m' } } },
  });
  await eventually('the quota controller to count the quota', async () => {
    const q = await admin.readNamespacedResourceQuota({ namespace, name: 'compute' });
    return q.status?.hard?.['requests.cpu'] ? q : undefined;
  });
  for (const name of ['quota-0', 'quota-1']) {
    world.prom.set(queueMetric, { namespace, pod: name }, 500);
    await world.runPod({
      metadata: { name, labels: { app: 'quota' } },
      spec: {
        nodeName: 'rz-quota-node',
        containers: [
          {
            name: 'app',
            image: 'registry.example/worker:1',
            resources: { requests: { cpu: '250m', memory: '64Mi' } },
          },
        ],
      },
    });
  }
  await eventually('the view to hold the quota with 500m used', async () => {
    const [q] = world.view.resourceQuotas(namespace);
    return q?.status?.used?.['requests.cpu'] === '500m' ? q : undefined;
  });
  const forbiddenBefore = await api403s();

  const loop = world.loop(() => policyFor(namespace, [policy]), quotasFromView(world.view));
  const stepped = await eventually(
    'one pod to step up to 500m',
    async () => {
      const cpus = await Promise.all(
        ['quota-0', 'quota-1'].map(async (n) => cpuOf(await world.pod(n))),
      );
      return cpus.includes(500) ? cpus : undefined;
    },
    { timeoutMs: 45_000 },
  );
  // Let several passes run with the signal still high: nothing more may be sent.
  await new Promise((resolve) => setTimeout(resolve, 5000));
  const summary = await loop.pass();
  const cpus = await Promise.all(
    ['quota-0', 'quota-1'].map(async (n) => cpuOf(await world.pod(n))),
  );
  assert.deepEqual(
    [...cpus].sort((a, b) => a - b),
    [250, 500],
    `one step of the two wanted; the first seen was ${JSON.stringify(stepped)}`,
  );
  const held = cpus[0] === 250 ? 'quota-0' : 'quota-1';
  const stayed = cpus[0] === 250 ? 'quota-1' : 'quota-0';
  assert.match(
    summary.skipped.get(`${namespace}/${held}`) ?? '',
    /increase 250 exceeds ResourceQuota compute requests\.cpu room -?\d+/,
    'the pod left at 250m is held by the quota, which is named',
  );
  assert.match(
    summary.skipped.get(`${namespace}/${stayed}`) ?? '',
    /exceeds ResourceQuota compute/,
    'the pod at 500m wants more and is held by the quota too',
  );

  const quota = await admin.readNamespacedResourceQuota({ namespace, name: 'compute' });
  assert.equal(quota.status?.used?.['requests.cpu'], '750m');
  assert.equal(await api403s(), forbiddenBefore, 'tollgate sent no write the API server refused');
  const refused = (await world.auditRecords()).filter((r) => {
    const outcome = r.outcome as { result: string; code?: number };
    return outcome.result === 'failed' && outcome.code === 403;
  });
  assert.deepEqual(refused, [], 'no audit record of a refused write');

  // The control: the same step sent past tollgate is refused by quota admission, so the
  // check above could fail.
  await assert.rejects(
    admin.patchNamespacedPodResize(
      {
        namespace,
        name: held,
        body: {
          spec: {
            containers: [{ name: 'app', resources: { requests: { cpu: '500m', memory: '64Mi' } } }],
          },
        },
      },
      mergePatch,
    ),
    (error: { code?: number; body?: unknown }) =>
      error.code === 403 && /exceeded quota/.test(String(error.body)),
  );
  for (const name of ['quota-0', 'quota-1']) await world.assertInPlace(name);
});

test('the view keeps ResourceQuotas of the managed namespaces only, following the managed set as the policy changes it', async () => {
  const { admin, namespace, cp } = world;
  const view = new LiveClusterView({ kubeConfig: cp.kubeConfig('tollgate'), namespaces: [] });
  view.start();
  try {
    await view.whenSynced(AbortSignal.timeout(30_000));
    assert.deepEqual(
      view.resourceQuotas(namespace),
      [],
      'an unmanaged namespace has none in the view',
    );
    view.setNamespaces([namespace]);
    const [quota] = await eventually(
      'the quota to appear once its namespace is managed',
      async () => {
        const quotas = view.resourceQuotas(namespace);
        return quotas.length > 0 ? quotas : undefined;
      },
    );
    assert.equal(quota?.metadata?.name, 'compute');
    assert.equal(
      quota?.metadata?.managedFields,
      undefined,
      'trimmed like every object of the view',
    );
    await admin.patchNamespacedResourceQuota(
      { namespace, name: 'compute', body: { spec: { hard: { 'requests.cpu': '2' } } } },
      mergePatch,
    );
    await eventually('a quota change to reach the view', async () =>
      view.resourceQuotas(namespace)[0]?.spec?.hard?.['requests.cpu'] === '2' ? true : undefined,
    );
    view.setNamespaces(['somewhere-else']);
    await eventually('the quota to leave with its namespace', async () =>
      view.resourceQuotas(namespace).length === 0 ? true : undefined,
    );
  } finally {
    await view.stop();
  }
});
