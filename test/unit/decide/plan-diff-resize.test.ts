import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import {
  boundsOnlyNote,
  diffPlans,
  formatMarkdown,
  formatText,
  hasDifferences,
  usageNote,
  withResize,
} from '../../../src/decide/plan-diff.ts';
import {
  observeOnlyPolicies,
  planResize,
  type SignalsFor,
} from '../../../src/decide/plan-resize.ts';
import { snapshotOf } from '../../../src/decide/objects.ts';
import type { Policy, ResizePolicy } from '../../../src/policy/model.ts';
import { aPolicy, aTenant } from '../../builders/policy.ts';
import { aNode, aResizePolicy, aRunningPod, steady } from '../../builders/resize.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const Mi = 2 ** 20;

function policy(commit: string, ...resizePolicies: ResizePolicy[]): Policy {
  return {
    ...aPolicy().commit(commit).tenant(aTenant('team-a').namespaces('team-a')).obj(),
    resizePolicies,
  };
}

/** The web policy with the app container's cpu bounds replaced (millicores). */
function web(cpu: { min: number; max: number; step: number }, extra: Partial<ResizePolicy> = {}) {
  return aResizePolicy({
    containers: { app: { cpu, memory: { min: 128 * Mi, max: 1024 * Mi, step: 128 * Mi } } },
    ...extra,
  });
}

const wide = { min: 250, max: 2000, step: 250 };
const narrow = { min: 250, max: 1000, step: 250 };

function pod(name: string, cpu: string, limit?: string): V1Pod {
  return aRunningPod(name, 'team-a')
    .container('app', { cpu, memory: '256Mi' }, limit ? { cpu: limit } : {})
    .obj();
}

function labelled(p: V1Pod, app: string): V1Pod {
  return { ...p, metadata: { ...p.metadata, labels: { app } } };
}

const nodes = [aNode('node-a', '8', '16Gi')];

/** Readings per pod name: a constant queue length over the whole window. */
function queue(values: Record<string, number>): SignalsFor {
  return (rp, key) => {
    const name = key.split('/')[1] ?? '';
    const value = values[name];
    return {
      readings:
        value === undefined
          ? [{ signal: 'queue', error: 'connection refused' }]
          : [{ signal: 'queue', samples: steady(value, now, rp.windowMs, 15_000) }],
      stepMs: 15_000,
    };
  };
}

test('resize targets in the plan, bounds only (no Prometheus)', async (t) => {
  const pods = [pod('w2', '1500m', '3'), pod('w0', '500m'), pod('w1', '1'), pod('w3', '2')];
  const cases: {
    name: string;
    base: Policy;
    proposed: Policy;
    pods: V1Pod[];
    expect: [string, string | null, string | null, string, string | null, string | null][];
  }[] = [
    {
      name: 'a narrower max lists exactly the pods whose request lies above it, in name order, limits following',
      base: policy('b', web(wide)),
      proposed: policy('p', web(narrow)),
      pods,
      expect: [
        ['team-a/w2', 'web-resize', 'web-resize', '1500m', '1500m', '1'],
        ['team-a/w3', 'web-resize', 'web-resize', '2', '2', '1'],
      ],
    },
    {
      name: 'bounds that contain every request list nothing',
      base: policy('b', web(wide)),
      proposed: policy('p', web({ min: 100, max: 4000, step: 100 })),
      pods,
      expect: [],
    },
    {
      name: 'a higher min lists the pods below it, raised to the min',
      base: policy('b', web(wide)),
      proposed: policy('p', web({ min: 750, max: 2000, step: 250 })),
      pods,
      expect: [['team-a/w0', 'web-resize', 'web-resize', '500m', '500m', '750m']],
    },
    {
      name: 'a pod newly matched is listed with the base as not managed',
      base: policy('b', web(narrow)),
      proposed: policy('p', web(narrow, { selector: { matchLabels: {}, matchExpressions: [] } })),
      pods: [labelled(pod('other', '3'), 'batch')],
      expect: [['team-a/other', null, 'web-resize', '3', null, '1']],
    },
    {
      name: 'a pod no longer matched is listed with the proposed as not managed',
      base: policy('b', web(narrow)),
      proposed: policy('p'),
      pods: [pod('w3', '2')],
      expect: [['team-a/w3', 'web-resize', null, '2', '1', null]],
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => {
      const plan = planResize(c.base, c.proposed, c.pods, nodes, now);
      assert.equal(plan.basis, 'bounds');
      assert.deepEqual(
        plan.changes.map((ch) => [
          ch.pod,
          ch.basePolicy,
          ch.proposedPolicy,
          ch.units[0]?.current.requests?.cpu,
          ch.units[0]?.base?.requests?.cpu ?? null,
          ch.units[0]?.proposed?.requests?.cpu ?? null,
        ]),
        c.expect,
      );
    });
  }

  await t.test('a Burstable limit moves by the same delta as the request', () => {
    const plan = planResize(policy('b', web(wide)), policy('p', web(narrow)), pods, nodes, now);
    const w2 = plan.changes.find((ch) => ch.pod === 'team-a/w2');
    assert.deepEqual(w2?.units[0]?.proposed, {
      requests: { cpu: '1', memory: '256Mi' },
      limits: { cpu: '2500m' },
    });
  });

  await t.test('a paused workload keeps its resources under any bounds', () => {
    const paused = aRunningPod('w9', 'team-a')
      .container('app', { cpu: '2', memory: '256Mi' })
      .annotation('tollgate.io/resize-paused', JSON.stringify({ reason: 'OOMKilled', since: 1 }))
      .obj();
    const plan = planResize(policy('b', web(wide)), policy('p', web(narrow)), [paused], nodes, now);
    assert.deepEqual(plan.changes, []);
  });

  await t.test(
    'a container whose cpu resize restarts it is left alone without allowRestart',
    () => {
      const restarts = aRunningPod('w8', 'team-a')
        .container('app', { cpu: '2', memory: '256Mi' }, {}, [
          { resourceName: 'cpu', restartPolicy: 'RestartContainer' },
        ])
        .obj();
      const plan = planResize(
        policy('b', web(wide)),
        policy('p', web(narrow)),
        [restarts],
        nodes,
        now,
      );
      assert.deepEqual(plan.changes, []);
    },
  );

  await t.test(
    'every output says the targets are bounds-only, and a change counts as a difference',
    () => {
      const snapshot = snapshotOf([], []);
      const base = policy('b', web(wide));
      const proposed = policy('p', web(narrow));
      const diff = withResize(
        diffPlans(base, proposed, snapshot, now),
        planResize(base, proposed, pods, nodes, now),
      );
      assert.equal(hasDifferences(diff), true);
      assert.ok(formatText(diff).includes(boundsOnlyNote));
      assert.ok(formatMarkdown(diff).includes(boundsOnlyNote));
      assert.equal(diff.resize?.note, boundsOnlyNote);
      assert.match(
        formatText(diff),
        /team-a\/w2 \[web-resize\]\n {4}app: cpu 1500m \(limit 3\), memory 256Mi -> cpu 1500m \(limit 3\), memory 256Mi -> cpu 1 \(limit 2500m\), memory 256Mi/,
      );
    },
  );

  await t.test('output is byte-identical whatever the order of the pods', () => {
    const base = policy('b', web(wide));
    const proposed = policy('p', web(narrow));
    const a = planResize(base, proposed, pods, nodes, now);
    const b = planResize(base, proposed, [...pods].reverse(), nodes, now);
    assert.equal(JSON.stringify(a), JSON.stringify(b));
  });
});

test('resize targets in the plan, usage-driven (signal readings given)', async (t) => {
  const base = policy('b', web(wide));
  const proposed = policy('p', web(narrow));
  const pods = [pod('up', '1'), pod('down', '1'), pod('quiet', '2')];
  const signals = queue({ up: 500, down: 5, quiet: 50 });

  await t.test('a narrower max changes the target of a pod whose signal asks for more', () => {
    const plan = planResize(base, proposed, pods, nodes, now, { base: signals, proposed: signals });
    assert.equal(plan.basis, 'usage');
    assert.deepEqual(
      plan.changes.map((c) => [
        c.pod,
        c.units[0]?.base?.requests?.cpu,
        c.units[0]?.proposed?.requests?.cpu,
      ]),
      [['team-a/up', '1250m', '1']],
    );
  });

  await t.test('a pod outside the new bounds whose signals hold is not resized by a pass', () => {
    const plan = planResize(base, proposed, pods, nodes, now, { base: signals, proposed: signals });
    assert.equal(
      plan.changes.some((c) => c.pod === 'team-a/quiet'),
      false,
    );
  });

  await t.test('a signal whose query failed holds: no target changes on it', () => {
    const failing = queue({});
    const plan = planResize(base, proposed, pods, nodes, now, { base: failing, proposed: failing });
    assert.deepEqual(plan.changes, []);
    assert.deepEqual(plan.uncovered, ['team-a/down', 'team-a/quiet', 'team-a/up']);
  });

  await t.test(
    'pods whose samples do not cover the window are named, and every output says so',
    () => {
      const short: SignalsFor = (rp, key) => ({
        readings: [
          {
            signal: 'queue',
            // The last 15 s of a 60 s window only: too short to count.
            samples: key.endsWith('/up')
              ? steady(500, now, 15_000, 15_000)
              : steady(50, now, rp.windowMs, 15_000),
          },
        ],
        stepMs: 15_000,
      });
      const plan = planResize(base, proposed, pods, nodes, now, { base: short, proposed: short });
      assert.deepEqual(plan.uncovered, ['team-a/up']);
      assert.deepEqual(plan.changes, []);
      const diff = withResize(diffPlans(base, proposed, snapshotOf([], []), now), plan);
      assert.match(
        formatText(diff),
        /Signals without data covering the window .* for 1 pod\(s\): team-a\/up/,
      );
      assert.match(formatMarkdown(diff), /> Signals without data covering the window .*team-a\/up/);
    },
  );

  await t.test('pods whose signals cover the window are not named as uncovered', () => {
    const plan = planResize(base, proposed, pods, nodes, now, { base: signals, proposed: signals });
    assert.deepEqual(plan.uncovered, []);
  });

  await t.test('the outputs say the targets are usage-driven', () => {
    const diff = withResize(
      diffPlans(base, proposed, snapshotOf([], []), now),
      planResize(base, proposed, pods, nodes, now, { base: signals, proposed: signals }),
    );
    assert.ok(formatText(diff).includes(usageNote));
    assert.equal(formatText(diff).includes(boundsOnlyNote), false);
  });
});

test('the plan says per ResizePolicy what its resizes can do on the cluster nodes', () => {
  const nodes = [
    aNode('new', '8', '16Gi'),
    {
      metadata: { name: 'old' },
      status: {
        allocatable: { cpu: '8', memory: '16Gi' },
        nodeInfo: { kubeletVersion: 'v1.35.1' },
      },
    },
  ];
  const withPod = aResizePolicy({ pod: { cpu: { min: 500, max: 4000, step: 500 } } });
  const proposed = policy('p', withPod);
  const diff = withResize(
    diffPlans(proposed, proposed, snapshotOf([], []), Date.UTC(2026, 10, 29, 8)),
    planResize(proposed, proposed, [], nodes, Date.UTC(2026, 10, 29, 8)),
  );
  const text = formatText(diff);
  assert.match(
    text,
    /In-place resize on this cluster's nodes:\n {2}web-resize: container resize: 2 of 2 nodes\n {2}web-resize: pod-level resize: 1 of 2 nodes \(not old: the node does not declare InPlacePodLevelResourcesVerticalScaling\)/,
  );
  assert.match(formatMarkdown(diff), /> - `web-resize`: pod-level resize: 1 of 2 nodes/);
});

test('with the audit trail read, the plan shows what each observe-only policy would have done', () => {
  const observing = policy('p', aResizePolicy({ mode: 'Observe' }));
  assert.deepEqual(observeOnlyPolicies(policy('b', aResizePolicy()), observing), ['web-resize']);
  const at = Date.UTC(2026, 10, 29, 8);
  const resize = {
    ...planResize(observing, observing, [], [aNode('n', '8', '16Gi')], at),
    observed: [
      {
        policy: 'web-resize',
        decisions: 2,
        since: at - 60_000,
        until: at,
        byKind: { Hold: 1, Resize: 1 },
        recent: [
          {
            at,
            pod: 'team-a/web-0',
            kind: 'Resize',
            reason: 'observe-only: would carry out Resize: up',
          },
        ],
      },
    ],
  };
  const diff = withResize(diffPlans(observing, observing, snapshotOf([], []), at), resize);
  assert.match(
    formatText(diff),
    /Observe-only ResizePolicies, what they would have done \(audit trail\):\n {2}web-resize: 2 would-be decision\(s\) from .* \(1 Hold, 1 Resize\); latest:\n {4}2026-11-29T08:00:00.000Z team-a\/web-0 Resize: observe-only: would carry out Resize: up/,
  );
  assert.match(formatMarkdown(diff), /> web-resize: 2 would-be decision\(s\)/);
});
