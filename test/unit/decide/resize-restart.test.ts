/**
 * A Deferred resize survives a tollgate restart: the re-check schedule (generation,
 * checks so far, next check time, reason) is kept in the sealed state on the pod, not
 * only in the loop's memory, so a new process neither re-checks early nor restarts the
 * backoff, and the deadline still counts from the original request.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { PodResizeInput } from '../../../src/decide/resize-plan.ts';
import { lastGoodAnnotation, stateAnnotation } from '../../../src/decide/resize-state.ts';
import {
  aResizePolicy,
  aRunningPod,
  decideResizeFor,
  sealedValue,
  steady,
} from '../../builders/resize.ts';
import { now } from '../../builders/resize-pause.ts';

const requestedAt = now - 10_000;

/** A pod whose tollgate step to 1 CPU the kubelet Deferred, with `deferred` as stored. */
function deferredPod(deferred?: Record<string, unknown>, generation = 2) {
  return aRunningPod('web-0', 'team-a')
    .container('app', { cpu: '1', memory: '256Mi' })
    .actual({ cpu: '500m', memory: '256Mi' })
    .generation(generation, generation)
    .condition('PodResizePending', 'Deferred', 'no room beside the other pods', generation)
    .sealed(stateAnnotation, {
      attempts: 1,
      requestedAt,
      direction: { cpu: 'up' },
      target: { containers: { app: { requests: { cpu: '1', memory: '256Mi' } } } },
      ...(deferred ? { deferred } : {}),
    })
    .sealed(lastGoodAnnotation, {
      containers: { app: { requests: { cpu: '500m', memory: '256Mi' } } },
    })
    .obj();
}

function plan(input: Pick<PodResizeInput, 'pod'> & Partial<PodResizeInput>) {
  return decideResizeFor(now, { policy: aResizePolicy({ deferredTimeoutMs: 300_000 }), ...input });
}

function storedDeferred(p: ReturnType<typeof plan>) {
  const write = p.writes.find((w) => w.op.type === 'annotate');
  const text = write?.op.type === 'annotate' ? write.op.annotations[stateAnnotation] : undefined;
  return sealedValue('uid-web-0', stateAnnotation, text)?.deferred;
}

test('a new process does not re-check a Deferred resize before the stored next check', () => {
  const p = plan({
    pod: deferredPod({ generation: 2, checks: 1, nextCheckAt: now + 4000, reason: 'Deferred' }),
  });
  assert.deepEqual(
    p.decisions.map((d) => d.kind),
    [],
    'nothing recorded again right after a restart',
  );
  assert.match(p.skip ?? '', new RegExp(`next check at ${now + 4000}`));
  assert.equal(p.pending, 'Deferred');
});

test('each re-check stores its schedule on the pod: checks, next check time, reason, generation', () => {
  const cases: {
    name: string;
    deferred?: Record<string, unknown>;
    generation?: number;
    stored: Record<string, unknown>;
  }[] = [
    {
      name: 'the first check of an episode',
      stored: { generation: 2, checks: 0, nextCheckAt: now + 5000, reason: 'Deferred' },
    },
    {
      name: 'a due check after a restart continues the backoff',
      deferred: { generation: 2, checks: 1, nextCheckAt: now, reason: 'Deferred' },
      stored: { generation: 2, checks: 2, nextCheckAt: now + 20_000, reason: 'Deferred' },
    },
    {
      name: 'a schedule stored for an older generation starts a new episode',
      deferred: { generation: 1, checks: 3, nextCheckAt: now + 60_000, reason: 'Deferred' },
      generation: 2,
      stored: { generation: 2, checks: 0, nextCheckAt: now + 5000, reason: 'Deferred' },
    },
  ];
  for (const c of cases) {
    const p = plan({ pod: deferredPod(c.deferred, c.generation) });
    assert.deepEqual(
      p.decisions.map((d) => d.kind),
      ['Defer'],
      c.name,
    );
    assert.deepEqual(storedDeferred(p), c.stored, c.name);
    assert.equal(
      p.writes.filter((w) => w.op.type === 'resize').length,
      0,
      `${c.name}: a check writes state, never a resize`,
    );
  }
});

test('past the deadline counted from the stored request, the resize is reverted whatever the process saw', () => {
  const p = plan({
    pod: deferredPod({ generation: 2, checks: 2, nextCheckAt: now + 60_000, reason: 'Deferred' }),
    now: requestedAt + 300_000,
  });
  assert.deepEqual(
    p.decisions.map((d) => d.kind),
    ['Defer'],
  );
  assert.match(p.decisions[0]?.reason ?? '', /past deferredTimeout/);
  const resize = p.writes.find((w) => w.op.type === 'resize')?.op;
  assert.ok(resize?.type === 'resize');
  assert.deepEqual(resize.containers[0]?.resources.requests, { cpu: '500m', memory: '256Mi' });
});

test('writes per decision: a step is an annotation write and a resize (pods/resize drops metadata); checks and pauses are one write', () => {
  const stepping = aRunningPod('web-0', 'team-a')
    .container('app', { cpu: '500m', memory: '256Mi' })
    .obj();
  const cases: { name: string; plan: ReturnType<typeof plan>; writes: string[] }[] = [
    {
      name: 'a signal-driven step',
      plan: plan({ pod: stepping, readings: [{ signal: 'queue', samples: steady(500, now) }] }),
      writes: ['annotate', 'resize'],
    },
    { name: 'a Deferred re-check', plan: plan({ pod: deferredPod() }), writes: ['annotate'] },
    {
      name: 'a revert past the deadline',
      plan: plan({ pod: deferredPod(), now: requestedAt + 300_000 }),
      writes: ['annotate', 'resize'],
    },
  ];
  for (const c of cases)
    assert.deepEqual(
      c.plan.writes.map((w) => w.op.type),
      c.writes,
      c.name,
    );
});
