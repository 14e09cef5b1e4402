import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decidePodResize,
  type PodResizeInput,
  type PodResizePlan,
} from '../../../src/decide/resize-plan.ts';
import {
  lastGoodAnnotation,
  pausedAnnotation,
  stateAnnotation,
} from '../../../src/decide/resize-state.ts';
import type { Approval } from '../../../src/policy/model.ts';
import {
  aNode,
  aResizePolicy,
  aRunningPod,
  sealedValue,
  series,
  steady,
  testStateKeys,
} from '../../builders/resize.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);

function plan(input: Partial<PodResizeInput> & Pick<PodResizeInput, 'pod'>): PodResizePlan {
  return decidePodResize({
    policy: aResizePolicy(),
    commit: 'c0ffee',
    readings: [],
    approvals: [],
    now,
    stepMs: 15_000,
    stateKeys: testStateKeys,
    ...input,
  });
}

const high = [{ signal: 'queue', samples: steady(500, now) }];
const low = [{ signal: 'queue', samples: steady(1, now) }];
const web = () =>
  aRunningPod('web-0', 'team-a').container(
    'app',
    { cpu: '500m', memory: '256Mi' },
    { cpu: '1', memory: '512Mi' },
  );

function resizeOf(p: PodResizePlan) {
  const w = p.writes.find((x) => x.op.type === 'resize');
  return w?.op.type === 'resize' ? w.op : undefined;
}
function annotationsOf(p: PodResizePlan) {
  const w = p.writes.find((x) => x.op.type === 'annotate');
  return w?.op.type === 'annotate' ? w.op.annotations : undefined;
}
function stateJson(extra: Record<string, unknown>) {
  return JSON.stringify({ attempts: 1, ...extra });
}
/** web-0 whose last step, to its current resources, was requested at `requestedAt`. */
function webResizedAt(requestedAt: number) {
  const target = {
    containers: {
      app: { requests: { cpu: '500m', memory: '256Mi' }, limits: { cpu: '1', memory: '512Mi' } },
    },
  };
  return web().sealed(stateAnnotation, stateJson({ requestedAt, target })).obj();
}

test('signal-driven steps', () => {
  const cases: {
    name: string;
    input: Partial<PodResizeInput> & Pick<PodResizeInput, 'pod'>;
    kinds: string[];
    container?: { requests?: Record<string, string>; limits?: Record<string, string> };
    skip?: RegExp;
  }[] = [
    {
      name: 'a high signal for the whole window steps cpu and memory up once, limits following',
      input: { pod: web().obj(), readings: high },
      kinds: ['Resize'],
      container: {
        requests: { cpu: '750m', memory: '384Mi' },
        limits: { cpu: '1250m', memory: '640Mi' },
      },
    },
    {
      name: 'a low signal for the whole window steps down once',
      input: { pod: web().obj(), readings: low },
      kinds: ['Resize'],
      container: {
        requests: { cpu: '250m', memory: '128Mi' },
        limits: { cpu: '750m', memory: '384Mi' },
      },
    },
    {
      name: 'an oscillating signal does nothing',
      input: {
        pod: web().obj(),
        readings: [{ signal: 'queue', samples: series([500, 1, 500, 1, 500], now) }],
      },
      kinds: [],
      skip: /signals hold/,
    },
    {
      name: 'a failed query holds (the Hold stores since when it is unreadable)',
      input: { pod: web().obj(), readings: [{ signal: 'queue', error: 'timed out' }] },
      kinds: ['Hold'],
      skip: /signals hold/,
    },
    {
      name: 'at the max bound nothing changes',
      input: {
        pod: aRunningPod('web-0', 'team-a').container('app', { cpu: '2', memory: '1Gi' }).obj(),
        readings: high,
      },
      kinds: [],
      skip: /at the max bound/,
    },
    {
      name: 'a Guaranteed pod stays Guaranteed: limits move with requests',
      input: {
        pod: aRunningPod('web-0', 'team-a').guaranteed('app', '500m', '256Mi').obj(),
        readings: high,
      },
      kinds: ['Resize'],
      container: {
        requests: { cpu: '750m', memory: '384Mi' },
        limits: { cpu: '750m', memory: '384Mi' },
      },
    },
    {
      name: 'a BestEffort pod is left untouched',
      input: { pod: aRunningPod('web-0', 'team-a').container('app', {}).obj(), readings: high },
      kinds: [],
      skip: /BestEffort/,
    },
    {
      name: 'a memory change that would restart the container is skipped when restarts are not allowed',
      input: {
        pod: aRunningPod('web-0', 'team-a')
          .container('app', { cpu: '500m', memory: '256Mi' }, {}, [
            { resourceName: 'memory', restartPolicy: 'RestartContainer' },
          ])
          .obj(),
        readings: high,
      },
      kinds: ['Resize'],
      container: { requests: { cpu: '750m', memory: '256Mi' } },
    },
    {
      name: 'a memory change that restarts the container happens where the policy allows restarts',
      input: {
        policy: aResizePolicy({ allowRestart: true }),
        pod: aRunningPod('web-0', 'team-a')
          .container('app', { cpu: '500m', memory: '256Mi' }, {}, [
            { resourceName: 'memory', restartPolicy: 'RestartContainer' },
          ])
          .obj(),
        readings: high,
      },
      kinds: ['Resize'],
      container: { requests: { cpu: '750m', memory: '384Mi' } },
    },
    {
      name: 'a step beyond the node allocatable is not taken for that resource',
      input: { pod: web().obj(), readings: high, node: aNode('node-a', '600m', '8Gi') },
      kinds: ['Resize'],
      container: { requests: { cpu: '500m', memory: '384Mi' } },
    },
    {
      name: 'a step the namespace quota has no room for is not taken',
      input: {
        pod: web().obj(),
        readings: high,
        quotas: [
          {
            metadata: { name: 'q' },
            status: {
              hard: { 'requests.memory': '1Gi', 'limits.cpu': '4' },
              used: { 'requests.memory': '1000Mi', 'limits.cpu': '1' },
            },
          },
        ],
      },
      kinds: ['Resize'],
      container: { requests: { cpu: '750m', memory: '256Mi' } },
    },
    {
      name: 'a resize during the cooldown is not made',
      input: {
        pod: webResizedAt(now - 60_000),
        readings: high,
      },
      kinds: [],
      skip: /cooldown/,
    },
    {
      name: 'a recorded target that never reached the spec does not start a cooldown',
      input: {
        pod: web()
          .sealed(
            stateAnnotation,
            stateJson({
              requestedAt: now - 60_000,
              target: { containers: { app: { requests: { cpu: '2', memory: '256Mi' } } } },
            }),
          )
          .obj(),
        readings: high,
      },
      kinds: ['Resize'],
    },
    {
      name: 'after the cooldown the next step is made',
      input: {
        pod: webResizedAt(now - 130_000),
        readings: high,
      },
      kinds: ['Resize'],
    },
    {
      name: 'a pod that is not running is left alone',
      input: { pod: web().phase('Pending').obj(), readings: high },
      kinds: [],
      skip: /not running/,
    },
  ];
  for (const c of cases) {
    const p = plan(c.input);
    assert.deepEqual(
      p.decisions.map((d) => d.kind),
      c.kinds,
      c.name,
    );
    if (c.skip) assert.match(p.skip ?? '', c.skip, c.name);
    if (c.container) {
      const op = resizeOf(p);
      assert.ok(op, `${c.name}: a resize write`);
      const app = op.containers.find((x) => x.name === 'app');
      if (c.container.requests)
        assert.deepEqual(app?.resources.requests, c.container.requests, c.name);
      if (c.container.limits) assert.deepEqual(app?.resources.limits, c.container.limits, c.name);
    }
  }
});

test('a resize writes its state annotation first, then the resize, with last good resources and inputs', () => {
  const p = plan({ pod: web().obj(), readings: high });
  assert.deepEqual(
    p.writes.map((w) => w.op.type),
    ['annotate', 'resize'],
  );
  const annotations = annotationsOf(p) ?? {};
  assert.deepEqual(
    sealedValue('uid-web-0', lastGoodAnnotation, annotations[lastGoodAnnotation]) ?? {},
    {
      containers: {
        app: { requests: { cpu: '500m', memory: '256Mi' }, limits: { cpu: '1', memory: '512Mi' } },
      },
    },
  );
  const state = sealedValue('uid-web-0', stateAnnotation, annotations[stateAnnotation]) ?? {};
  assert.equal(state.requestedAt, now);
  assert.deepEqual(state.direction, { cpu: 'up', memory: 'up' });
  const d = p.decisions[0];
  assert.equal(d?.outcome.result, 'pending');
  assert.equal(d?.id, `resize:Resize:uid-web-0:100:${now}`);
  assert.ok(
    d?.inputs.some((i) => i.condition === 'signal:queue' && i.met),
    'the signal value is an input',
  );
  assert.ok(
    d?.inputs.some((i) => i.condition === 'target'),
    'the target is an input',
  );
  assert.ok(p.writes.every((w) => w.decisionId === d?.id));
});

test('a resize decided again on the same resourceVersion is a new decision (its first intent was not pushed, so its write never went and its outcome is recorded cancelled)', () => {
  const first = plan({ pod: web().obj(), readings: high });
  const again = plan({ pod: web().obj(), readings: high, now: now + 15_000 });
  const ids = [first, again].map((p) => p.decisions.map((d) => d.id));
  assert.deepEqual(ids, [
    [`resize:Resize:uid-web-0:100:${now}`],
    [`resize:Resize:uid-web-0:100:${now + 15_000}`],
  ]);
  assert.ok(again.writes.every((w) => w.decisionId === again.decisions[0]?.id));
});

test('a pod-level budget is resized through spec.resources', () => {
  const policy = aResizePolicy({
    containers: {},
    pod: { cpu: { min: 500, max: 4000, step: 500 } },
  });
  const pod = aRunningPod('web-0', 'team-a')
    .container('app', {})
    .podResources({ cpu: '1', memory: '1Gi' })
    .obj();
  const p = plan({ policy, pod, readings: high });
  const op = resizeOf(p);
  assert.deepEqual(op?.pod, { requests: { cpu: '1500m', memory: '1Gi' } });
  assert.deepEqual(op?.containers, []);
});

test('a per-container signal resizes only its container', () => {
  const policy = aResizePolicy({
    containers: {
      app: { cpu: { min: 100, max: 2000, step: 100 } },
      cache: { cpu: { min: 100, max: 2000, step: 100 } },
    },
    signals: [
      {
        name: 'throttle',
        query: 'throttled{pod="$pod",container="$container"}',
        scaleUpAbove: 0.5,
      },
    ],
  });
  const pod = aRunningPod('web-0', 'team-a')
    .container('app', { cpu: '500m' })
    .container('cache', { cpu: '200m' })
    .obj();
  const p = plan({
    policy,
    pod,
    readings: [
      { signal: 'throttle', container: 'app', samples: steady(0.1, now) },
      { signal: 'throttle', container: 'cache', samples: steady(0.9, now) },
    ],
  });
  assert.deepEqual(resizeOf(p)?.containers, [
    { name: 'cache', resources: { requests: { cpu: '300m' } } },
  ]);
});

const inflight = () =>
  aRunningPod('web-0', 'team-a')
    .container('app', { cpu: '1', memory: '256Mi' })
    .actual({ cpu: '500m', memory: '256Mi' })
    .sealed(
      stateAnnotation,
      stateJson({
        requestedAt: now - 10_000,
        target: { containers: { app: { requests: { cpu: '1', memory: '256Mi' } } } },
      }),
    )
    .sealed(
      lastGoodAnnotation,
      JSON.stringify({ containers: { app: { requests: { cpu: '500m', memory: '256Mi' } } } }),
    );

test('Infeasible: recorded, then one step smaller, then marked and reverted', () => {
  const first = plan({
    pod: inflight()
      .generation(2, 2)
      .condition('PodResizePending', 'Infeasible', "Node didn't have enough capacity", 2)
      .obj(),
  });
  assert.deepEqual(
    first.decisions.map((d) => [d.kind, d.outcome.result]),
    [
      ['Infeasible', 'recorded'],
      ['Resize', 'pending'],
    ],
  );
  assert.deepEqual(resizeOf(first)?.containers[0]?.resources.requests, {
    cpu: '750m',
    memory: '256Mi',
  });
  assert.equal(first.pending, 'Infeasible');

  const exhausted = plan({
    pod: inflight()
      .sealed(
        stateAnnotation,
        stateJson({
          attempts: 2,
          requestedAt: now - 10_000,
          target: { containers: { app: { requests: { cpu: '1', memory: '256Mi' } } } },
        }),
      )
      .generation(3, 3)
      .condition('PodResizePending', 'Infeasible', 'too big', 3)
      .obj(),
  });
  assert.deepEqual(
    exhausted.decisions.map((d) => d.kind),
    ['Infeasible', 'Infeasible'],
  );
  assert.match(exhausted.decisions[1]?.reason ?? '', /attempts exhausted/);
  assert.deepEqual(resizeOf(exhausted)?.containers[0]?.resources.requests, {
    cpu: '500m',
    memory: '256Mi',
  });
  const state =
    sealedValue('uid-web-0', stateAnnotation, annotationsOf(exhausted)?.[stateAnnotation]) ?? {};
  assert.ok(state.infeasible, 'the workload is marked');

  const marked = plan({
    pod: web()
      .sealed(
        stateAnnotation,
        stateJson({
          requestedAt: now - 500_000,
          infeasible: { at: now - 500_000, reason: 'too big' },
        }),
      )
      .obj(),
    readings: high,
  });
  assert.deepEqual(marked.decisions, [], 'a marked workload is left alone on scale-up');
  assert.match(marked.skip ?? '', /scale-up left alone/);
});

test('an Infeasible condition for an older generation is not acted on', () => {
  const p = plan({
    pod: inflight().generation(3, 2).condition('PodResizePending', 'Infeasible', 'old', 2).obj(),
  });
  assert.deepEqual(p.decisions, []);
  assert.match(p.skip ?? '', /not observed generation 3/);
});

test('Deferred: recorded with backoff (its schedule stored on the pod), then reverted past the deadline', () => {
  const pod = inflight()
    .generation(2, 2)
    .condition('PodResizePending', 'Deferred', 'no room', 2)
    .obj();
  const first = plan({ pod });
  assert.deepEqual(
    first.decisions.map((d) => d.kind),
    ['Defer'],
  );
  assert.deepEqual(
    first.writes.map((w) => w.op.type),
    ['annotate'],
    'a check stores its schedule on the pod, and resizes nothing',
  );
  assert.equal(first.pending, 'Deferred');
  assert.ok(first.memo?.nextDeferredCheck && first.memo.nextDeferredCheck > now);

  const again = plan({ pod, memo: first.memo, now: now + 1000 });
  assert.deepEqual(again.decisions, [], 'no new record before the backoff elapses');
  const later = plan({ pod, memo: first.memo, now: (first.memo?.nextDeferredCheck ?? 0) + 1 });
  assert.deepEqual(
    later.decisions.map((d) => d.kind),
    ['Defer'],
  );
  assert.ok(
    (later.memo?.nextDeferredCheck ?? 0) - ((first.memo?.nextDeferredCheck ?? 0) + 1) > 5000,
    'backoff grows',
  );

  const late = plan({ pod, memo: later.memo, now: now + 300_000 });
  assert.deepEqual(
    late.decisions.map((d) => [d.kind, d.outcome.result]),
    [['Defer', 'pending']],
  );
  assert.match(late.decisions[0]?.reason ?? '', /past deferredTimeout/);
  assert.deepEqual(resizeOf(late)?.containers[0]?.resources.requests, {
    cpu: '500m',
    memory: '256Mi',
  });
});

test('an actuation Error is re-checked like a Deferred resize', () => {
  const p = plan({
    pod: inflight()
      .generation(2, 2)
      .condition('PodResizeInProgress', 'Error', 'cgroup write failed', 2)
      .obj(),
  });
  assert.deepEqual(
    p.decisions.map((d) => d.kind),
    ['Defer'],
  );
  assert.match(p.decisions[0]?.reason ?? '', /failed to actuate/);
});

test('a resize in progress is waited for', () => {
  const p = plan({
    pod: inflight().generation(2, 2).condition('PodResizeInProgress').obj(),
    readings: high,
  });
  assert.deepEqual(p.decisions, []);
  assert.match(p.skip ?? '', /in progress/);
});

test('a resize tollgate did not request is not touched', () => {
  const p = plan({ pod: web().actual({ cpu: '100m', memory: '256Mi' }).obj(), readings: high });
  assert.deepEqual(p.decisions, []);
  assert.match(p.skip ?? '', /did not request/);
});

const afterMemoryDecrease = () =>
  aRunningPod('web-0', 'team-a')
    .container('app', { cpu: '500m', memory: '128Mi' })
    .sealed(
      lastGoodAnnotation,
      JSON.stringify({ containers: { app: { requests: { cpu: '500m', memory: '256Mi' } } } }),
    )
    .sealed(
      stateAnnotation,
      JSON.stringify({
        attempts: 1,
        requestedAt: now - 200_000,
        direction: { memory: 'down' },
        restarts: { app: 0 },
        target: { containers: { app: { requests: { cpu: '500m', memory: '128Mi' } } } },
      }),
    );

test('OOMKilled after a memory decrease rolls back and pauses', () => {
  const p = plan({
    pod: afterMemoryDecrease()
      .oomKilled('app', new Date(now - 5000).toISOString())
      .obj(),
    readings: low,
  });
  assert.deepEqual(
    p.decisions.map((d) => d.kind),
    ['Rollback', 'Pause'],
  );
  assert.equal(p.paused, true);
  assert.deepEqual(resizeOf(p)?.containers[0]?.resources.requests, {
    cpu: '500m',
    memory: '256Mi',
  });
  const annotations = annotationsOf(p) ?? {};
  assert.equal(
    (sealedValue('uid-web-0', pausedAnnotation, annotations[pausedAnnotation]) ?? {}).reason,
    'container app was OOMKilled after tollgate lowered its memory',
  );
  assert.equal(p.writes[0]?.priority, 100);
});

test('an OOMKilled container without a tollgate memory decrease is not rolled back', () => {
  const pod = web()
    .oomKilled('app', new Date(now - 5000).toISOString())
    .obj();
  const p = plan({ pod, readings: [] });
  assert.ok(!p.decisions.some((d) => d.kind === 'Rollback'));
});

test('an SLO breach after a resize rolls back; a healthy SLO does not', () => {
  const policy = aResizePolicy({
    slo: { query: 'latency{pod="$pod"}', above: 0.5, forMs: 30_000 },
  });
  const pod = afterMemoryDecrease().obj();
  const breached = plan({ policy, pod, slo: { samples: series([0.9, 0.9, 0.9], now) } });
  assert.deepEqual(
    breached.decisions.map((d) => d.kind),
    ['Rollback', 'Pause'],
  );
  const healthy = plan({ policy, pod, slo: { samples: series([0.9, 0.1, 0.9], now) } });
  assert.ok(!healthy.decisions.some((d) => d.kind === 'Rollback'));
});

const resume = (name: string, extra: Partial<Approval['target']> = {}): Approval => ({
  name,
  source: { file: `approvals/${name}.yaml`, document: 0 },
  action: 'Resume',
  target: { kind: 'ResizePolicy', name: 'web-resize', ...extra } as Approval['target'],
  approvedBy: 'alice',
  reason: 'checked the OOM',
});

test('a paused workload waits for a new Resume approval', () => {
  const pausedPod = web()
    .sealed(
      pausedAnnotation,
      JSON.stringify({ reason: 'OOMKilled', since: now - 1000, approvalsSeen: ['old'] }),
    )
    .obj();
  const cases: { name: string; approvals: Approval[]; kinds: string[] }[] = [
    { name: 'no approval keeps it paused', approvals: [], kinds: [] },
    {
      name: 'an approval that existed when it paused does not resume it',
      approvals: [resume('old')],
      kinds: [],
    },
    {
      name: 'an approval for another policy does not resume it',
      approvals: [{ ...resume('new'), target: { kind: 'ResizePolicy', name: 'other' } }],
      kinds: [],
    },
    {
      name: 'an approval for another pod does not resume it',
      approvals: [resume('new', { pod: 'web-9' })],
      kinds: [],
    },
    {
      name: 'an expired approval does not resume it',
      approvals: [{ ...resume('new'), expiresAt: now - 1 }],
      kinds: [],
    },
    {
      name: 'a new approval for the workload resumes it',
      approvals: [resume('new', { namespace: 'team-a' })],
      kinds: ['Resume'],
    },
  ];
  for (const c of cases) {
    const p = plan({ pod: pausedPod, approvals: c.approvals, readings: high });
    assert.deepEqual(
      p.decisions.map((d) => d.kind),
      c.kinds,
      c.name,
    );
    assert.equal(p.paused, c.kinds.length === 0, c.name);
  }
  const resumed = plan({ pod: pausedPod, approvals: [resume('new')] });
  assert.deepEqual(annotationsOf(resumed)?.[pausedAnnotation], null);
});

test('a malformed state annotation is treated as absent', () => {
  const p = plan({ pod: web().sealed(stateAnnotation, '{not json').obj(), readings: high });
  assert.deepEqual(
    p.decisions.map((d) => d.kind),
    ['Resize'],
  );
});

test('an Infeasible target whose halfway point is under a quarter step is marked, not retried', () => {
  const pod = aRunningPod('web-0', 'team-a')
    .container('app', { cpu: '600m', memory: '256Mi' })
    .actual({ cpu: '500m', memory: '256Mi' })
    .sealed(
      stateAnnotation,
      stateJson({
        requestedAt: now - 10_000,
        target: { containers: { app: { requests: { cpu: '600m', memory: '256Mi' } } } },
      }),
    )
    .generation(2, 2)
    .condition('PodResizePending', 'Infeasible', 'too big', 2)
    .obj();
  const p = plan({ pod });
  assert.deepEqual(
    p.decisions.map((d) => d.kind),
    ['Infeasible', 'Infeasible'],
  );
  assert.match(p.decisions[1]?.reason ?? '', /no smaller target/);
  assert.deepEqual(resizeOf(p)?.containers[0]?.resources.requests, {
    cpu: '500m',
    memory: '256Mi',
  });
});

test('a resize the API server refused is handled like Infeasible: halfway first, then marked', () => {
  const refusedState = (attempts: number) =>
    aRunningPod('web-0', 'team-a')
      .container('app', { cpu: '1', memory: '256Mi' })
      .sealed(
        stateAnnotation,
        stateJson({
          attempts,
          requestedAt: now - 1000,
          target: { containers: { app: { requests: { cpu: '2400m', memory: '256Mi' } } } },
        }),
      )
      .obj();
  const refused = { code: 403, message: "node didn't have enough allocatable resources: cpu" };
  const first = plan({ pod: refusedState(1), refused, readings: high });
  assert.deepEqual(
    first.decisions.map((d) => [d.kind, d.outcome.result]),
    [
      ['Infeasible', 'recorded'],
      ['Resize', 'pending'],
    ],
  );
  assert.match(first.decisions[0]?.reason ?? '', /API server refused/);
  // The stored target (2400m) is above the policy's 2 CPU: it is clamped to 2000m before
  // the retreat, so halfway from 1 CPU is 1500m (state read back never widens a step).
  assert.deepEqual(resizeOf(first)?.containers[0]?.resources.requests, {
    cpu: '1500m',
    memory: '256Mi',
  });

  const last = plan({ pod: refusedState(2), refused, readings: high });
  assert.deepEqual(
    last.decisions.map((d) => d.kind),
    ['Infeasible', 'Infeasible'],
  );
  assert.deepEqual(
    last.writes.map((w) => w.op.type),
    ['annotate'],
    'the spec never changed, so only the mark is written',
  );
  assert.ok(
    (sealedValue('uid-web-0', stateAnnotation, annotationsOf(last)?.[stateAnnotation]) ?? {})
      .infeasible,
  );

  const without = plan({ pod: refusedState(1), readings: high });
  assert.deepEqual(
    without.decisions.map((d) => d.kind),
    ['Resize'],
    'without a refusal the unapplied target is simply decided again',
  );
});
