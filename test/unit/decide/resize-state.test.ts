/**
 * Resize state lives in pod annotations that anyone with pod patch can edit. Nothing
 * read back from them may widen a decision: a forged last-good or target is clamped
 * to the ResizePolicy bounds (2 CPU / 1 GiB here) and the forgery is recorded on the
 * decision. The scenario is the reported one: forged annotations plus one OOM kill.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decidePodResize, type PodResizePlan } from '../../../src/decide/resize-plan.ts';
import { lastGoodAnnotation, stateAnnotation } from '../../../src/decide/resize-state.ts';
import { aResizePolicy, aRunningPod, steady, testStateKeys } from '../../builders/resize.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const low = [{ signal: 'queue', samples: steady(1, now) }];

function forgedAfterMemoryDecrease(lastGood: Record<string, unknown>) {
  return aRunningPod('web-0', 'team-a')
    .container('app', { cpu: '500m', memory: '128Mi' })
    .sealed(lastGoodAnnotation, JSON.stringify(lastGood))
    .sealed(
      stateAnnotation,
      JSON.stringify({
        attempts: 1,
        requestedAt: now - 200_000,
        direction: { memory: 'down' },
        restarts: { app: 0 },
        target: { containers: { app: { requests: { cpu: '500m', memory: '128Mi' } } } },
      }),
    )
    .oomKilled('app', new Date(now - 5000).toISOString())
    .obj();
}

function plan(pod: ReturnType<typeof forgedAfterMemoryDecrease>): PodResizePlan {
  return decidePodResize({
    policy: aResizePolicy(),
    commit: 'c0ffee',
    readings: low,
    approvals: [],
    now,
    stepMs: 15_000,
    stateKeys: testStateKeys,
    pod,
  });
}

function resizeOf(p: PodResizePlan) {
  const w = p.writes.find((x) => x.op.type === 'resize');
  return w?.op.type === 'resize' ? w.op : undefined;
}

test('a forged last-good of 32 CPU / 64 Gi rolls back no further than the policy maximum', () => {
  const p = plan(
    forgedAfterMemoryDecrease({
      containers: {
        app: { requests: { cpu: '32', memory: '64Gi' }, limits: { cpu: '32', memory: '64Gi' } },
      },
    }),
  );
  const rollback = p.decisions.find((d) => d.kind === 'Rollback');
  assert.ok(rollback, p.decisions.map((d) => d.kind).join());
  const resources = resizeOf(p)?.containers[0]?.resources;
  assert.deepEqual(resources?.requests, { cpu: '2', memory: '1Gi' });
  for (const limit of Object.values(resources?.limits ?? {})) {
    assert.doesNotMatch(String(limit), /^(32|64Gi)$/, 'limits are not taken from the annotation');
  }
  const recorded = rollback.inputs.find((i) => i.condition === 'StoredState');
  assert.ok(recorded, 'the forgery is recorded on the decision');
  assert.match(String(recorded.value), /resize-last-good.*outside the policy bounds/);
});

test('a forged last-good for a container the policy does not govern changes nothing there', () => {
  const p = plan(
    forgedAfterMemoryDecrease({
      containers: {
        app: { requests: { cpu: '500m', memory: '256Mi' } },
        sidecar: { requests: { cpu: '16', memory: '32Gi' } },
      },
    }),
  );
  const containers = resizeOf(p)?.containers ?? [];
  assert.deepEqual(
    containers.map((c) => c.name),
    ['app'],
  );
  assert.deepEqual(containers[0]?.resources.requests, { cpu: '500m', memory: '256Mi' });
});

test('an honest last-good within bounds rolls back exactly, with no problem recorded', () => {
  const p = plan(
    forgedAfterMemoryDecrease({
      containers: { app: { requests: { cpu: '500m', memory: '256Mi' } } },
    }),
  );
  assert.deepEqual(resizeOf(p)?.containers[0]?.resources.requests, {
    cpu: '500m',
    memory: '256Mi',
  });
  const rollback = p.decisions.find((d) => d.kind === 'Rollback');
  assert.equal(
    rollback?.inputs.find((i) => i.condition === 'StoredState'),
    undefined,
  );
});
