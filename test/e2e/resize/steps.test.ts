/**
 * Signal-driven in-place resize end to end: real kube-apiserver (pods/resize
 * validation), the simulated kubelet actuating resizes, real Prometheus scraping an
 * exporter the test drives, tollgate's real view, dispatcher, writer and Git audit.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { eventually } from '../../support/eventually.ts';
import { aResizePolicy } from '../../builders/resize.ts';
import type { ResizePolicy } from '../../../src/policy/model.ts';
import { toStoredAmount } from '../../../src/lib/quantity.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { policyFor, startResizeWorld, type ResizeWorld } from './harness.ts';
import { cpuOf } from './pods.ts';

const queueMetric = 'tollgate_test_queue_length';
const queueQuery = `${queueMetric}{namespace="$namespace",pod="$pod"}`;
const cooldownMs = 5000;

let world: ResizeWorld;

function policyNamed(name: string, overrides: Partial<ResizePolicy>): ResizePolicy {
  return aResizePolicy({
    name,
    source: { file: `resize/${name}.yaml`, document: 0 },
    selector: { matchLabels: { app: name }, matchExpressions: [] },
    signals: [{ name: 'queue', query: queueQuery, scaleUpAbove: 100, scaleDownBelow: 20 }],
    windowMs: 3000,
    hysteresis: 0.1,
    cooldownMs,
    deferredTimeoutMs: 30_000,
    ...overrides,
  });
}

const policies = [
  policyNamed('worker', { containers: { app: { cpu: { min: 250, max: 1000, step: 250 } } } }),
  policyNamed('osc', { containers: { app: { cpu: { min: 250, max: 1000, step: 250 } } } }),
  policyNamed('plevel', {
    containers: {},
    pod: {
      cpu: { min: 500, max: 2000, step: 500 },
      memory: { min: 256 * 2 ** 20, max: 2 ** 30, step: 256 * 2 ** 20 },
    },
  }),
];

function setQueue(pod: string, value: number): void {
  world.prom.set(queueMetric, { namespace: world.namespace, pod }, value);
}

before(async () => {
  world = await startResizeWorld('steps', { 'rz-steps-node': { cpu: '8', memory: '16Gi' } });
  world.loop(() => policyFor(world.namespace, policies));
});

after(async () => {
  await world?.stop();
});

test('a rising queue length resizes the app container up in steps to its max, a falling one back to its min, each step a cooldown apart; the sidecar is never touched', async () => {
  setQueue('worker-0', 50);
  const started = await world.runPod({
    metadata: { name: 'worker-0', labels: { app: 'worker' } },
    spec: {
      nodeName: 'rz-steps-node',
      containers: [
        {
          name: 'app',
          image: 'registry.example/worker:1',
          resources: {
            requests: { cpu: '250m', memory: '128Mi' },
            limits: { cpu: '500m', memory: '256Mi' },
          },
        },
        {
          name: 'cache',
          image: 'registry.example/cache:1',
          resources: { requests: { cpu: '100m', memory: '64Mi' } },
        },
      ],
    },
  });
  const seen: { at: number; cpu: number; actual: number }[] = [];
  const watch = setInterval(() => {
    const pod = world.view.pod(world.namespace, 'worker-0');
    if (!pod) return;
    const cpu = cpuOf(pod);
    const actual = toStoredAmount(
      'cpu',
      pod.status?.containerStatuses?.find((s) => s.name === 'app')?.resources?.requests?.cpu ?? '0',
    );
    const last = seen.at(-1);
    if (!last || last.cpu !== cpu || last.actual !== actual)
      seen.push({ at: Date.now(), cpu, actual });
  }, 100);
  try {
    // Neutral for longer than the window: nothing happens.
    await new Promise((resolve) => setTimeout(resolve, 4000));
    assert.equal(cpuOf(await world.pod('worker-0')), 250, 'a neutral signal changes nothing');

    setQueue('worker-0', 500);
    const up = Date.now();
    await eventually(
      'cpu at its max of 1000m, actuated',
      async () => {
        const pod = await world.pod('worker-0');
        const actual = pod.status?.containerStatuses?.find((s) => s.name === 'app')?.resources
          ?.requests?.cpu;
        return (
          cpuOf(pod) === 1000 && actual !== undefined && toStoredAmount('cpu', actual) === 1000
        );
      },
      { timeoutMs: 45_000, describe: () => JSON.stringify(seen) },
    );
    const upSeconds = (Date.now() - up) / 1000;
    // Held at max while the signal stays high.
    await new Promise((resolve) => setTimeout(resolve, cooldownMs + 1000));
    assert.equal(cpuOf(await world.pod('worker-0')), 1000, 'the max bound holds');

    setQueue('worker-0', 5);
    await eventually(
      'cpu back at its min of 250m',
      async () => cpuOf(await world.pod('worker-0')) === 250,
      {
        timeoutMs: 45_000,
        describe: () => JSON.stringify(seen),
      },
    );
    await eventually('the view to show 250m too', async () => seen.at(-1)?.cpu === 250, {
      timeoutMs: 5000,
    });
    const pod = await world.pod('worker-0');
    const cache = pod.spec?.containers.find((c) => c.name === 'cache');
    assert.deepEqual(
      cache?.resources?.requests,
      { cpu: '100m', memory: '64Mi' },
      'the sidecar outside the policy is untouched',
    );
    assert.equal(pod.status?.qosClass, 'Burstable');
    assert.equal(pod.metadata?.uid, started.metadata?.uid, 'resized in place: the same pod');
    assert.deepEqual(
      pod.status?.containerStatuses?.map((s) => s.restartCount),
      [0, 0],
      'six resizes restarted no container',
    );

    const desired = seen.map((s) => s.cpu).filter((cpu, i, all) => i === 0 || all[i - 1] !== cpu);
    assert.deepEqual(
      desired,
      [250, 500, 750, 1000, 750, 500, 250],
      'one step at a time, within bounds',
    );

    const records = (await world.auditRecords()).filter(
      (r) => r.kind === 'Resize' && (r.target as { name: string }).name === 'worker-0',
    );
    const intents = records.filter((r) => (r.outcome as { result: string }).result === 'pending');
    const succeeded = records.filter(
      (r) => (r.outcome as { result: string }).result === 'succeeded',
    );
    assert.equal(intents.length, 6, 'six intents in Git');
    assert.equal(succeeded.length, 6, 'six outcomes in Git');
    const times = intents.map((r) => r.at as number).sort((a, b) => a - b);
    for (let i = 1; i < times.length; i += 1) {
      assert.ok(
        (times[i] as number) - (times[i - 1] as number) >= cooldownMs,
        `step ${i} came ${(times[i] as number) - (times[i - 1] as number)} ms after the one before (cooldown ${cooldownMs})`,
      );
    }
    const first = intents[0] as { inputs: { condition: string; value: unknown }[]; reason: string };
    assert.ok(
      first.inputs.some((i) => i.condition === 'signal:queue'),
      'the signal values are recorded',
    );
    assert.ok(
      first.inputs.some((i) => i.condition === 'target'),
      'the target is recorded',
    );
    const metrics = await registry.getSingleMetricAsString('tollgate_resizes_total');
    assert.match(metrics, /tollgate_resizes_total\{result="succeeded"\} ([6-9]|\d\d)/);
    // The last step's actuation is measured when the kubelet's report of it reaches the
    // loop, which may come after the spec change the waits above saw: wait for it in order.
    const sixActuations = /tollgate_resize_actuation_seconds_count ([6-9]|\d\d)/;
    await eventually(
      'six actuations measured',
      async () =>
        sixActuations.test(
          await registry.getSingleMetricAsString('tollgate_resize_actuation_seconds'),
        ),
      { timeoutMs: 15_000 },
    );
    const actuation = await registry.getSingleMetricAsString('tollgate_resize_actuation_seconds');
    assert.match(actuation, sixActuations);
    process.stderr.write(
      `[resize e2e] up 250m->1000m in ${upSeconds.toFixed(1)} s; timeline ${JSON.stringify(seen.map((s) => [s.at - up, s.cpu, s.actual]))}\n`,
    );
  } finally {
    clearInterval(watch);
  }
});

test('an oscillating signal never resizes the pod', async () => {
  setQueue('osc-0', 50);
  await world.runPod({
    metadata: { name: 'osc-0', labels: { app: 'osc' } },
    spec: {
      nodeName: 'rz-steps-node',
      containers: [
        {
          name: 'app',
          image: 'registry.example/worker:1',
          resources: { requests: { cpu: '500m', memory: '128Mi' } },
        },
      ],
    },
  });
  const until = Date.now() + 12_000;
  let high = true;
  while (Date.now() < until) {
    setQueue('osc-0', high ? 500 : 5);
    high = !high;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  const pod = await world.pod('osc-0');
  assert.equal(cpuOf(pod), 500);
  assert.equal(pod.metadata?.generation, 1, 'no resize was ever written');
  const resizes = (await world.auditRecords()).filter(
    (r) => r.kind === 'Resize' && (r.target as { name: string }).name === 'osc-0',
  );
  assert.deepEqual(resizes, []);
});

test('a pod-level budget (spec.resources) is resized in place through pods/resize', async () => {
  setQueue('plevel-0', 50);
  const started = await world.runPod({
    metadata: { name: 'plevel-0', labels: { app: 'plevel' } },
    spec: {
      nodeName: 'rz-steps-node',
      resources: { requests: { cpu: '1', memory: '512Mi' }, limits: { cpu: '1', memory: '512Mi' } },
      containers: [{ name: 'app', image: 'registry.example/worker:1' }],
    },
  });
  setQueue('plevel-0', 500);
  const pod = await eventually(
    'the pod-level budget one step up and actuated',
    async () => {
      const current = await world.pod('plevel-0');
      const status = current.status?.resources?.requests;
      return current.spec?.resources?.requests?.cpu === '1500m' && status?.cpu === '1500m'
        ? current
        : undefined;
    },
    { timeoutMs: 30_000 },
  );
  assert.deepEqual(
    pod.spec?.resources?.limits,
    { cpu: '1500m', memory: '768Mi' },
    'Guaranteed: limits follow requests',
  );
  assert.equal(pod.spec?.resources?.requests?.memory, '768Mi');
  assert.equal(pod.status?.qosClass, 'Guaranteed');
  assert.equal(pod.metadata?.uid, started.metadata?.uid, 'resized in place: the same pod');
  assert.equal(pod.status?.containerStatuses?.[0]?.restartCount, 0, 'no restart');
  assert.equal(
    pod.spec?.containers[0]?.resources?.requests,
    undefined,
    'containers keep no own resources',
  );
});

test("pod-level budget: a container's RestartContainer keeps pod-level memory where it is, and a container target over the pod-level request is never sent", async () => {
  const refusedBefore = await registry.getSingleMetricAsString('tollgate_resizes_total');
  // A loop of its own with an hour-long timer: passes are the test's or wake-ups on
  // the pods' own changes.
  const own = world.loop(
    () =>
      policyFor(world.namespace, [
        policyNamed('podrestart', {
          containers: {},
          pod: {
            cpu: { min: 500, max: 2000, step: 500 },
            memory: { min: 256 * 2 ** 20, max: 2 ** 30, step: 256 * 2 ** 20 },
          },
        }),
        policyNamed('overbudget', {
          containers: { app: { cpu: { min: 100, max: 2000, step: 500 } } },
        }),
      ]),
    { intervalMs: 3_600_000 },
  );
  setQueue('podrestart-0', 500);
  setQueue('overbudget-0', 500);
  const restartStarted = await world.runPod({
    metadata: { name: 'podrestart-0', labels: { app: 'podrestart' } },
    spec: {
      nodeName: 'rz-steps-node',
      resources: { requests: { cpu: '1', memory: '512Mi' }, limits: { cpu: '1', memory: '512Mi' } },
      containers: [
        {
          name: 'app',
          image: 'registry.example/worker:1',
          resizePolicy: [
            { resourceName: 'cpu', restartPolicy: 'NotRequired' },
            { resourceName: 'memory', restartPolicy: 'RestartContainer' },
          ],
        },
      ],
    },
  });
  const budgetStarted = await world.runPod({
    metadata: { name: 'overbudget-0', labels: { app: 'overbudget' } },
    spec: {
      nodeName: 'rz-steps-node',
      resources: { requests: { cpu: '1', memory: '512Mi' } },
      containers: [
        {
          name: 'app',
          image: 'registry.example/worker:1',
          resources: { requests: { cpu: '900m', memory: '256Mi' } },
        },
      ],
    },
  });
  const restarted = await eventually(
    'pod-level cpu one step up and actuated',
    async () => {
      await own.pass();
      const pod = await world.pod('podrestart-0');
      return pod.status?.resources?.requests?.cpu === '1500m' ? pod : undefined;
    },
    { timeoutMs: 30_000 },
  );
  const pass = await own.pass();
  assert.match(
    pass.skipped.get(`${world.namespace}/overbudget-0`) ?? '',
    /container requests 1400m above the pod-level request 1 \(pod-level budget\)/,
    'the over-budget step is not taken, and the reason names the budget',
  );
  assert.deepEqual(
    restarted.spec?.resources?.requests,
    { cpu: '1500m', memory: '512Mi' },
    'memory stays: the container would restart and the policy does not allow restarts',
  );
  assert.equal(restarted.metadata?.uid, restartStarted.metadata?.uid);
  assert.equal(restarted.status?.containerStatuses?.[0]?.restartCount, 0, 'no restart');

  const budget = await world.pod('overbudget-0');
  assert.equal(budget.metadata?.generation, 1, 'no resize was ever sent for the over-budget pod');
  assert.equal(budget.metadata?.uid, budgetStarted.metadata?.uid);
  assert.equal(
    await registry
      .getSingleMetricAsString('tollgate_resizes_total')
      .then((m) => /result="failed"\} (\d+)/.exec(m)?.[1]),
    /result="failed"\} (\d+)/.exec(refusedBefore)?.[1],
    'the API server refused nothing',
  );
});
