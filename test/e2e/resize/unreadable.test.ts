/**
 * A signal that cannot be read never lets a pod shrink, end to end: a real Prometheus
 * answers the memory query with an execution error (duplicate series on one side of a
 * one-to-one match), the cpu signal is low for the whole window, and tollgate records
 * one Hold (with the error in its inputs), meters it, and resizes nothing, pass after
 * pass. Once the memory query reads again, the same pod steps down: the hold was the
 * unreadable signal, not something else.
 *
 * The same world shows an observe-only policy: it records what it would do, once,
 * and writes nothing to the API.
 *
 * Passes are driven by the test (the loop's timer is an hour), so "nothing shrinks over
 * three passes" is a count, not a wait.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { eventually } from '../../support/eventually.ts';
import { aResizePolicy } from '../../builders/resize.ts';
import { toStoredAmount } from '../../../src/lib/quantity.ts';
import { registry } from '../../../src/observe/metrics.ts';
import type { ResizeLoop } from '../../../src/loops/resize.ts';
import { createPrometheusClient } from '../../../src/signals/prometheus.ts';
import { openAuditSource, readAuditHistory } from '../../../src/audit/reader.ts';
import { observedHistory, observedLines } from '../../../src/decide/plan-observed.ts';
import { policyFor, startResizeWorld, type ResizeWorld } from './harness.ts';

const cpuMetric = 'tollgate_test_cpu_ratio';
const memMetric = 'tollgate_test_memory_ratio';
const dupMetric = 'tollgate_test_memory_replica';
const selector = '{namespace="$namespace",pod="$pod"}';

const policy = aResizePolicy({
  name: 'unreadable',
  source: { file: 'resize/unreadable.yaml', document: 0 },
  selector: { matchLabels: { app: 'unreadable' }, matchExpressions: [] },
  containers: {
    app: {
      cpu: { min: 250, max: 2000, step: 250 },
      memory: { min: 128 * 2 ** 20, max: 2 ** 30, step: 128 * 2 ** 20 },
    },
  },
  signals: [
    {
      name: 'cpu',
      query: `${cpuMetric}${selector}`,
      scaleUpAbove: 0.8,
      scaleDownBelow: 0.2,
      resources: ['cpu'],
    },
    {
      // One-to-one match against a helper series: with two replicas of the helper the
      // match group has duplicates and Prometheus fails the query at execution.
      name: 'memory',
      query: `${memMetric}${selector} + on(namespace, pod) (0 * ${dupMetric}${selector})`,
      scaleUpAbove: 0.9,
      scaleDownBelow: 0.3,
      resources: ['memory'],
    },
  ],
  windowMs: 3000,
  hysteresis: 0.1,
  cooldownMs: 1000,
});

let world: ResizeWorld;
let loop: ResizeLoop;

before(async () => {
  world = await startResizeWorld('unreadable', {
    'rz-unreadable-node': { cpu: '8', memory: '16Gi' },
  });
  loop = world.loop(() => policyFor(world.namespace, [policy]), { intervalMs: 3_600_000 });
});

after(async () => {
  await world?.stop();
});

function requests(pod: V1Pod): { cpu: number; memory: number } {
  const r = pod.spec?.containers.find((c) => c.name === 'app')?.resources?.requests ?? {};
  return {
    cpu: toStoredAmount('cpu', r.cpu ?? '0'),
    memory: toStoredAmount('memory', r.memory ?? '0'),
  };
}

function identity(pod: V1Pod): { uid: string; restarts: number[] } {
  return {
    uid: pod.metadata?.uid ?? '',
    restarts: (pod.status?.containerStatuses ?? []).map((s) => s.restartCount ?? 0),
  };
}

async function gauge(labels: Record<string, string>): Promise<number | undefined> {
  const metric = await registry.getSingleMetric('tollgate_resize_signal_unreadable')?.get();
  return metric?.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))
    ?.value;
}

test('a failed memory query with a low cpu signal shrinks nothing; it is recorded once and metered; once the query reads, the pod steps down', async () => {
  const labels = { namespace: world.namespace, pod: 'unreadable-0' };
  world.prom.set(cpuMetric, labels, 0.05);
  world.prom.set(memMetric, labels, 0.1);
  world.prom.set(dupMetric, { ...labels, replica: 'a' }, 1);
  world.prom.set(dupMetric, { ...labels, replica: 'b' }, 1);
  const started = await world.runPod({
    metadata: { name: 'unreadable-0', labels: { app: 'unreadable' } },
    spec: {
      nodeName: 'rz-unreadable-node',
      containers: [
        {
          name: 'app',
          image: 'registry.example/app:1',
          resources: {
            requests: { cpu: '1', memory: '512Mi' },
            limits: { cpu: '2', memory: '1Gi' },
          },
        },
      ],
    },
  });
  const before = requests(started);
  // Prometheus itself fails the memory query (not the client, not a mock).
  const prometheus = createPrometheusClient({ url: world.prom.url, timeoutMs: 3000 });
  const memoryQuery = policy.signals[1]!.query.replaceAll('$namespace', world.namespace).replaceAll(
    '$pod',
    'unreadable-0',
  );
  await eventually(
    'the cpu signal low over the window and the memory query failing in Prometheus',
    async () => {
      const now = Date.now();
      const cpu = await prometheus.range(`${cpuMetric}{pod="unreadable-0"}`, now - 3000, now, 1000);
      const failed = await prometheus.range(memoryQuery, now - 3000, now, 1000).then(
        () => false,
        (error: unknown) => /duplicate series|many-to-many|match group/i.test(String(error)),
      );
      return (cpu[0]?.samples.length ?? 0) >= 4 && failed;
    },
    { timeoutMs: 30_000 },
  );

  // Three passes (the pod's own changes may have woken the loop before: any decision
  // is counted in Git below, whoever made it).
  const passes = [];
  for (let i = 0; i < 3; i += 1) passes.push(await loop.pass());
  assert.deepEqual(
    passes.flatMap((p) => p.decisions.filter((d) => d.kind !== 'Hold')),
    [],
    'nothing but a Hold is decided',
  );
  for (const p of passes)
    assert.match(p.skipped.get(`${world.namespace}/unreadable-0`) ?? '', /^held/);
  assert.match(
    passes[2]?.skipped.get(`${world.namespace}/unreadable-0`) ?? '',
    /^held \(recorded before\)/,
    'the same hold is not recorded again',
  );
  const now = await world.pod('unreadable-0');
  assert.deepEqual(requests(now), before, 'nothing shrank: not cpu, not memory');
  assert.deepEqual(identity(now), identity(started), 'same pod, no restart');
  assert.equal(
    await gauge({ policy: 'unreadable', signal: 'memory', read: 'error' }),
    1,
    'the unreadable memory signal is metered per policy and signal',
  );

  const failedHold = (r: Record<string, unknown>) =>
    r.kind === 'Hold' &&
    (r.inputs as { condition: string; value: { read?: string } }[]).some(
      (i) => i.condition === 'signal:memory' && i.value.read === 'error',
    );
  const holds = (await world.auditRecords()).filter(failedHold);
  assert.equal(holds.length, 1, 'the Hold on the failed memory query is in Git once');
  const inputs = holds[0]?.inputs as { condition: string; value: Record<string, unknown> }[];
  const memory = inputs.find((i) => i.condition === 'signal:memory')?.value;
  assert.equal(memory?.read, 'error');
  assert.match(String(memory?.error), /duplicate series|many-to-many|match group/i);
  assert.equal(inputs.find((i) => i.condition === 'signal:cpu')?.value.direction, 'down');

  // The memory query reads again (one replica of the helper left): the same low signals
  // now step the pod down, so the hold above was the unreadable signal.
  world.prom.delete(dupMetric, { ...labels, replica: 'b' });
  await eventually(
    'the memory query answering again',
    async () => {
      const now = Date.now();
      const result = await prometheus.range(memoryQuery, now - 3000, now, 1000).catch(() => []);
      return (result[0]?.samples.length ?? 0) >= 4;
    },
    { timeoutMs: 30_000 },
  );
  const after = await eventually(
    'a step down once the memory signal reads',
    async () => {
      await loop.pass();
      const pod = await world.pod('unreadable-0');
      return requests(pod).cpu < before.cpu ? pod : undefined;
    },
    { timeoutMs: 30_000 },
  );
  assert.deepEqual(requests(after), { cpu: 750, memory: 384 * 2 ** 20 });
  assert.equal(await gauge({ policy: 'unreadable', signal: 'memory', read: 'error' }), 0);
  assert.deepEqual(identity(after).uid, identity(started).uid, 'resized in place');
});

test('an observe-only policy records what it would do and writes nothing to the API', async () => {
  const observing = {
    ...policy,
    name: 'observing',
    source: { file: 'resize/observing.yaml', document: 0 },
    selector: { matchLabels: { app: 'observing' }, matchExpressions: [] },
    signals: [policy.signals[0]!],
    mode: 'Observe' as const,
  };
  const observer = world.loop(() => policyFor(world.namespace, [observing]), {
    intervalMs: 3_600_000,
  });
  world.prom.set(cpuMetric, { namespace: world.namespace, pod: 'observing-0' }, 0.05);
  const started = await world.runPod({
    metadata: { name: 'observing-0', labels: { app: 'observing' } },
    spec: {
      nodeName: 'rz-unreadable-node',
      containers: [
        {
          name: 'app',
          image: 'registry.example/app:1',
          resources: { requests: { cpu: '1', memory: '512Mi' } },
        },
      ],
    },
  });
  const key = `${world.namespace}/observing-0`;
  await eventually(
    'a pass that would step the pod down (or found it already recorded by a wake-up)',
    async () => {
      const pass = await observer.pass();
      return (
        pass.decisions.some((d) => d.target.name === 'observing-0') ||
        /^observe-only/.test(pass.skipped.get(key) ?? '')
      );
    },
    { timeoutMs: 30_000 },
  );
  const second = await observer.pass();
  assert.deepEqual(
    second.decisions.filter((d) => d.target.name === 'observing-0'),
    [],
    'recorded once, not once per pass',
  );
  const pod = await world.pod('observing-0');
  assert.equal(pod.metadata?.generation, 1, 'no resize written');
  assert.deepEqual(
    Object.keys(pod.metadata?.annotations ?? {}).filter((k) => k.startsWith('tollgate.io/')),
    [],
    'no annotation written',
  );
  assert.deepEqual(requests(pod), requests(started));
  const records = (await world.auditRecords()).filter(
    (r) => (r.target as { name: string }).name === 'observing-0',
  );
  assert.deepEqual(
    records.map((r) => [r.kind, (r.outcome as { result: string }).result]),
    [['Resize', 'recorded']],
    'the would-be decision is in Git, once',
  );
  assert.match(String(records[0]?.reason), /^observe-only: would carry out Resize/);

  // `tollgate plan --audit` reads this history back from the audit branch on the Git server.
  const source = await openAuditSource(world.auditRepo, 'tollgate/audit', {
    token: world.git.token,
  });
  try {
    const commits = await readAuditHistory(source);
    const [history] = observedHistory(
      commits.flatMap((c) => c.records),
      ['observing'],
    );
    assert.equal(history?.decisions, 1, 'one would-be decision, the intent-free record once');
    assert.deepEqual(history?.byKind, { Resize: 1 });
    assert.equal(history?.recent[0]?.pod, `${world.namespace}/observing-0`);
    assert.match(
      observedLines(history as NonNullable<typeof history>)[0] ?? '',
      /^observing: 1 would-be decision\(s\) .*\(1 Resize\); latest:$/,
    );
  } finally {
    source.close();
  }
});
