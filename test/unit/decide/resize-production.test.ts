/**
 * Resize decisions an SRE can trust on a production service: an unreadable signal or
 * SLO never lets anything shrink; cpu and memory move on the signals that speak for
 * them (an OOM kill asks for memory); pod-level changes respect the containers'
 * resizePolicy; a target over the pod-level budget is never sent.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decidePodResize,
  type PodResizeInput,
  type PodResizePlan,
  type SignalReading,
} from '../../../src/decide/resize-plan.ts';
import type { ResizePolicy, Signal } from '../../../src/policy/model.ts';
import { aResizePolicy, aRunningPod, steady, testStateKeys } from '../../builders/resize.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);

const cpuSignal: Signal = {
  name: 'cpu-usage',
  query: 'cpu_usage{namespace="$namespace",pod="$pod"}',
  scaleUpAbove: 0.8,
  scaleDownBelow: 0.2,
};
const memorySignal: Signal = {
  name: 'memory-ws',
  query: 'memory_ws{namespace="$namespace",pod="$pod"}',
  scaleUpAbove: 0.8,
};
const slo = { query: 'p99{namespace="$namespace",pod="$pod"}', above: 0.5, forMs: 60_000 };

function plan(input: Partial<PodResizeInput> & Pick<PodResizeInput, 'pod'>): PodResizePlan {
  return decidePodResize({
    policy: aResizePolicy({ signals: [cpuSignal, memorySignal] }),
    commit: 'c0ffee',
    readings: [],
    approvals: [],
    now,
    stepMs: 15_000,
    stateKeys: testStateKeys,
    ...input,
  });
}

const web = () =>
  aRunningPod('web-0', 'team-a').container(
    'app',
    { cpu: '500m', memory: '256Mi' },
    { cpu: '1', memory: '512Mi' },
  );

const cpuLow: SignalReading = { signal: 'cpu-usage', samples: steady(0.05, now) };
const cpuHigh: SignalReading = { signal: 'cpu-usage', samples: steady(0.95, now) };
const memoryQuiet: SignalReading = { signal: 'memory-ws', samples: steady(0.5, now) };
const memoryFailed: SignalReading = { signal: 'memory-ws', error: 'HTTP 503: query timed out' };
const memoryEmpty: SignalReading = { signal: 'memory-ws', samples: [] };
const memoryHigh: SignalReading = { signal: 'memory-ws', samples: steady(0.95, now) };

function resizeOf(p: PodResizePlan) {
  const w = p.writes.find((x) => x.op.type === 'resize');
  return w?.op.type === 'resize' ? w.op : undefined;
}

function inputOf(p: PodResizePlan, condition: string) {
  return p.decisions[0]?.inputs.find((i) => i.condition === condition)?.value as
    Record<string, unknown> | undefined;
}

test('an unreadable signal or SLO holds every step-down, recorded with how it could not be read', () => {
  const cases: {
    name: string;
    policy?: ResizePolicy;
    readings: SignalReading[];
    slo?: PodResizeInput['slo'];
    unreadable: { condition: string; read: string; error?: RegExp };
  }[] = [
    {
      name: 'a failed memory query with a low cpu signal shrinks nothing',
      readings: [cpuLow, memoryFailed],
      unreadable: { condition: 'signal:memory-ws', read: 'error', error: /503/ },
    },
    {
      name: 'a memory query with no samples and a low cpu signal shrinks nothing',
      readings: [cpuLow, memoryEmpty],
      unreadable: { condition: 'signal:memory-ws', read: 'no-samples' },
    },
    {
      name: 'a failed SLO query holds a step-down',
      policy: aResizePolicy({ signals: [cpuSignal], slo }),
      readings: [cpuLow],
      slo: { error: 'HTTP 422: execution: many-to-many matching not allowed' },
      unreadable: { condition: 'SLO', read: 'error', error: /many-to-many/ },
    },
    {
      name: 'an SLO query with no samples holds a step-down',
      policy: aResizePolicy({ signals: [cpuSignal], slo }),
      readings: [cpuLow],
      slo: { samples: [] },
      unreadable: { condition: 'SLO', read: 'no-samples' },
    },
  ];
  for (const c of cases) {
    const p = plan({
      ...(c.policy ? { policy: c.policy } : {}),
      pod: web().obj(),
      readings: c.readings,
      ...(c.slo ? { slo: c.slo } : {}),
    });
    assert.equal(resizeOf(p), undefined, `${c.name}: no resize is sent`);
    assert.deepEqual(
      p.decisions.map((d) => [d.kind, d.outcome.result]),
      [
        ['Hold', 'recorded'],
        ['Hold', 'pending'],
      ],
      `${c.name}: the held step-down is one recorded Hold; the time the signal became unreadable is stored on the pod (an intent)`,
    );
    assert.match(p.decisions[0]?.reason ?? '', /step-down of .* held/, c.name);
    const value = inputOf(p, c.unreadable.condition);
    assert.equal(value?.read, c.unreadable.read, `${c.name}: the input says how it was read`);
    if (c.unreadable.error) assert.match(String(value?.error), c.unreadable.error, c.name);
  }
});

test('a readable low signal with every other signal read still steps down', () => {
  const p = plan({ pod: web().obj(), readings: [cpuLow, memoryQuiet] });
  assert.deepEqual(
    p.decisions.map((d) => d.kind),
    ['Resize'],
  );
  assert.equal(inputOf(p, 'signal:memory-ws')?.read, 'ok');
});

test('an unreadable signal does not hold a step-up another signal asks for, and is an input of it', () => {
  const p = plan({
    policy: aResizePolicy({
      signals: [
        { ...cpuSignal, resources: ['cpu'] },
        { ...memorySignal, resources: ['memory'] },
      ],
    }),
    pod: web().obj(),
    readings: [cpuHigh, memoryFailed],
  });
  assert.deepEqual(
    p.decisions.map((d) => d.kind),
    ['Resize'],
  );
  assert.deepEqual(resizeOf(p)?.containers[0]?.resources.requests, {
    cpu: '750m',
    memory: '256Mi',
  });
  assert.equal(inputOf(p, 'signal:memory-ws')?.read, 'error');
});

test('cpu and memory are decided on the signals bound to them', () => {
  const bound = aResizePolicy({
    signals: [
      { ...cpuSignal, resources: ['cpu'] },
      { ...memorySignal, resources: ['memory'] },
    ],
  });
  const cases: {
    name: string;
    policy: ResizePolicy;
    readings: SignalReading[];
    requests: Record<string, string> | undefined;
  }[] = [
    {
      name: 'a high cpu signal raises cpu only',
      policy: bound,
      readings: [cpuHigh, memoryQuiet],
      requests: { cpu: '750m', memory: '256Mi' },
    },
    {
      name: 'a high memory signal raises memory only',
      policy: bound,
      readings: [{ ...cpuHigh, samples: steady(0.5, now) }, memoryHigh],
      requests: { cpu: '500m', memory: '384Mi' },
    },
    {
      name: 'a signal without resources speaks for both (compatibility)',
      policy: aResizePolicy({ signals: [cpuSignal, memorySignal] }),
      readings: [cpuHigh, memoryQuiet],
      requests: { cpu: '750m', memory: '384Mi' },
    },
  ];
  for (const c of cases) {
    const p = plan({ policy: c.policy, pod: web().obj(), readings: c.readings });
    assert.deepEqual(resizeOf(p)?.containers[0]?.resources.requests, c.requests, c.name);
  }
});

test('an OOM kill tollgate did not cause asks for one memory step up, within bounds', () => {
  const neutral = [
    { signal: 'cpu-usage', samples: steady(0.5, now) },
    { signal: 'memory-ws', samples: steady(0.5, now) },
  ];
  const oom = plan({
    pod: web()
      .oomKilled('app', new Date(now - 20_000).toISOString())
      .obj(),
    readings: neutral,
  });
  assert.deepEqual(
    oom.decisions.map((d) => d.kind),
    ['Resize'],
  );
  assert.deepEqual(resizeOf(oom)?.containers[0]?.resources.requests, {
    cpu: '500m',
    memory: '384Mi',
  });
  assert.match(oom.decisions[0]?.reason ?? '', /OOMKilled/);

  const atMax = plan({
    pod: aRunningPod('web-0', 'team-a')
      .container('app', { cpu: '500m', memory: '1Gi' })
      .oomKilled('app', new Date(now - 20_000).toISOString())
      .obj(),
    readings: neutral,
  });
  assert.equal(resizeOf(atMax), undefined, 'at the memory max an OOM kill changes nothing');

  const old = plan({
    pod: web()
      .oomKilled('app', new Date(now - 10 * 60_000).toISOString())
      .obj(),
    readings: neutral,
  });
  assert.equal(resizeOf(old), undefined, 'an OOM kill before the window is not a signal');
});

test('a pod-level change respects the containers resizePolicy like a container-level one', () => {
  const policy = aResizePolicy({
    containers: {},
    pod: {
      cpu: { min: 500, max: 4000, step: 500 },
      memory: { min: 256 * 2 ** 20, max: 4 * 2 ** 30, step: 256 * 2 ** 20 },
    },
    signals: [cpuSignal],
  });
  const pod = () =>
    aRunningPod('web-0', 'team-a')
      .container('app', {}, {}, [{ resourceName: 'memory', restartPolicy: 'RestartContainer' }])
      .podResources({ cpu: '1', memory: '1Gi' });
  const blocked = plan({ policy, pod: pod().obj(), readings: [cpuHigh] });
  assert.deepEqual(resizeOf(blocked)?.pod, { requests: { cpu: '1500m', memory: '1Gi' } });
  const allowed = plan({
    policy: { ...policy, allowRestart: true },
    pod: pod().obj(),
    readings: [cpuHigh],
  });
  assert.deepEqual(resizeOf(allowed)?.pod, { requests: { cpu: '1500m', memory: '1280Mi' } });
});

test('a target above the pod-level budget is never sent', () => {
  const policy = aResizePolicy({
    containers: { app: { cpu: { min: 100, max: 2000, step: 500 } } },
    signals: [cpuSignal],
  });
  const cases: { name: string; pod: PodResizeInput['pod']; requests?: Record<string, string> }[] = [
    {
      name: 'a container request over the pod-level cpu request',
      pod: aRunningPod('web-0', 'team-a')
        .container('app', { cpu: '900m' })
        .podResources({ cpu: '1' })
        .obj(),
    },
    {
      name: 'the sum of container requests over the pod-level request',
      pod: aRunningPod('web-0', 'team-a')
        .container('app', { cpu: '400m' })
        .container('sidecar', { cpu: '300m' })
        .podResources({ cpu: '1' })
        .obj(),
    },
    {
      name: 'a container limit over the pod-level limit',
      pod: aRunningPod('web-0', 'team-a')
        .container('app', { cpu: '200m' }, { cpu: '800m' })
        .podResources({ cpu: '2' }, { cpu: '1' })
        .obj(),
    },
    {
      name: 'a step inside the pod-level budget is sent',
      pod: aRunningPod('web-0', 'team-a')
        .container('app', { cpu: '400m' })
        .podResources({ cpu: '1' })
        .obj(),
      requests: { cpu: '900m' },
    },
  ];
  for (const c of cases) {
    const p = plan({ policy, pod: c.pod, readings: [cpuHigh] });
    if (c.requests) {
      assert.deepEqual(resizeOf(p)?.containers[0]?.resources.requests, c.requests, c.name);
      continue;
    }
    assert.equal(resizeOf(p), undefined, `${c.name}: nothing sent`);
    assert.match(p.skip ?? '', /pod-level/, `${c.name}: the reason names the pod-level budget`);
  }
});

test('a step the namespace quota has no room for is recorded as a Hold naming the quota, keyed for once per change', () => {
  const full = [
    {
      metadata: { name: 'team-quota' },
      status: {
        hard: { 'requests.cpu': '4', 'requests.memory': '1Gi' },
        used: { 'requests.cpu': '3900m', 'requests.memory': '1000Mi' },
      },
    },
  ];
  const p = plan({ pod: web().obj(), readings: [cpuHigh, memoryQuiet], quotas: full });
  assert.equal(resizeOf(p), undefined, 'nothing sent');
  assert.deepEqual(
    p.decisions.map((d) => [d.kind, d.outcome.result]),
    [['Hold', 'recorded']],
  );
  assert.match(p.decisions[0]?.reason ?? '', /ResourceQuota team-quota/);
  const again = plan({ pod: web().obj(), readings: [cpuHigh, memoryQuiet], quotas: full });
  assert.equal(again.holdKey, p.holdKey, 'the same hold has the same key');
  assert.ok(p.holdKey?.includes('team-quota'));
});
