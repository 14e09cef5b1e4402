/**
 * Pauses beyond OOM and SLO, end to end on the real control plane with a real Prometheus:
 *
 * - a resize the kubelet never carries out (its node's kubelet died after the request)
 *   pauses the workload once `pause.onStuckFor` has passed since the request;
 * - a signal that stays unreadable pauses the workload once `pause.onUnreadableFor` has
 *   passed, counted from when it first became unreadable, across a restart of tollgate
 *   (a new loop: its memory is gone; the clock is on the pod, sealed).
 *
 * A signal that reads again before that clears the stored time: recorded in Git, told
 * with a Normal Event (a recovery), never a Warning that the pod is held.
 *
 * Each pause is in Git (Pause record with its cause), an Event and the pauses metric,
 * and a new Resume approval lifts it. Time is an injected clock the test moves: passes
 * are driven by the test (the loop's timer is an hour); nothing waits for a deadline.
 * The clock moves by a minute at most, inside Prometheus's 5-minute lookback, so the
 * readable signals still read at the moved time.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { EventsV1Api } from '@kubernetes/client-node';
import { eventually } from '../../support/eventually.ts';
import { aResizePolicy } from '../../builders/resize.ts';
import { anApproval } from '../../builders/policy.ts';
import { registry } from '../../../src/observe/metrics.ts';
import type { Clock } from '../../../src/lib/clock.ts';
import { pausedAnnotation, stateAnnotation } from '../../../src/decide/resize-state.ts';
import type { ResizePolicy } from '../../../src/policy/model.ts';
import { policyFor, startResizeWorld, storedState, type ResizeWorld } from './harness.ts';
import { actualCpuOf, cpuOf, workerPod } from './pods.ts';

const queueMetric = 'tollgate_test_pause_queue';
const minute = 60_000;

function policyNamed(name: string, extra: Partial<ResizePolicy> = {}): ResizePolicy {
  return aResizePolicy({
    name,
    source: { file: `resize/${name}.yaml`, document: 0 },
    selector: { matchLabels: { app: name }, matchExpressions: [] },
    containers: { app: { cpu: { min: 250, max: 2000, step: 250 } } },
    signals: [
      {
        name: 'queue',
        query: `${queueMetric}{namespace="$namespace",pod="$pod"}`,
        scaleUpAbove: 100,
        scaleDownBelow: 20,
        resources: ['cpu'],
      },
    ],
    windowMs: 3000,
    cooldownMs: 1000,
    pause: { restarts: 5, stuckMs: minute, unreadableMs: minute },
    ...extra,
  });
}

/** The wall clock moved forward by what the test says. */
class MovedClock implements Clock {
  offsetMs = 0;
  now(): number {
    return Date.now() + this.offsetMs;
  }
}

let world: ResizeWorld;

before(async () => {
  world = await startResizeWorld('pause', {
    'rz-pause-dying': { cpu: '8', memory: '16Gi' },
    'rz-pause-well': { cpu: '8', memory: '16Gi' },
  });
});

after(async () => {
  await world?.stop();
});

async function pauseRecords(pod: string) {
  return (await world.auditRecords()).filter(
    (r) =>
      (r.target as { name: string }).name === pod &&
      r.kind === 'Pause' &&
      (r.outcome as { result: string }).result === 'succeeded',
  );
}

/** The pod's Events, as the API server holds them. */
async function podEvents(pod: string) {
  await world.events.flush();
  const events = await world.cp
    .kubeConfig('admin')
    .makeApiClient(EventsV1Api)
    .listNamespacedEvent({ namespace: world.namespace, fieldSelector: `regarding.name=${pod}` });
  return events.items;
}

async function eventReasons(pod: string): Promise<string[]> {
  return (await podEvents(pod)).map((e) => `${e.type}/${e.reason}`);
}

/** The pod's Events as `type/reason: note`. */
async function eventsOf(pod: string): Promise<string[]> {
  return (await podEvents(pod)).map((e) => `${e.type}/${e.reason}: ${e.note ?? ''}`);
}

async function pausesMetric(cause: string): Promise<number> {
  const metric = await registry.getSingleMetric('tollgate_resize_pauses_total')?.get();
  return metric?.values.find((v) => v.labels.cause === cause)?.value ?? 0;
}

test('a resize the kubelet never carries out pauses the workload past pause.onStuckFor, visibly, and a Resume approval lifts the pause', async () => {
  const policy = policyNamed('stuck');
  const clock = new MovedClock();
  let approvals = [] as ReturnType<typeof anApproval>[];
  const loop = world.loop(() => policyFor(world.namespace, [policy], { approvals }), {
    intervalMs: 3_600_000,
    clock,
  });
  const labels = { namespace: world.namespace, pod: 'stuck-0' };
  world.prom.set(queueMetric, labels, 50);
  await world.runPod(
    workerPod('stuck-0', 'stuck', 'rz-pause-dying', { cpu: '1', memory: '256Mi' }),
  );
  // The node's kubelet dies: whatever tollgate asks of it now is never carried out.
  await world.kubelet.failNode('rz-pause-dying');
  world.prom.set(queueMetric, labels, 500);
  const requested = await eventually(
    'a step up requested (and never actuated)',
    async () => {
      await loop.pass();
      const pod = await world.pod('stuck-0');
      return cpuOf(pod) === 1250 ? pod : undefined;
    },
    { timeoutMs: 30_000 },
  );
  assert.equal(actualCpuOf(requested), 1000, 'the kubelet did not carry it out');
  const requestedAt = Number(storedState(requested, stateAnnotation).requestedAt);

  // Just short of the deadline: still waiting, no pause.
  clock.offsetMs = requestedAt + minute - 2000 - Date.now();
  const waiting = await loop.pass();
  assert.deepEqual(
    waiting.decisions.filter((d) => d.target.name === 'stuck-0'),
    [],
    'waiting for the kubelet decides nothing',
  );
  assert.equal((await world.pod('stuck-0')).metadata?.annotations?.[pausedAnnotation], undefined);

  // Past it: paused, with the cause on the pod, in Git, an Event and the metric.
  clock.offsetMs = requestedAt + minute + 1000 - Date.now();
  const paused = await eventually(
    'the workload paused as stuck',
    async () => {
      await loop.pass();
      const pod = await world.pod('stuck-0');
      return pod.metadata?.annotations?.[pausedAnnotation] ? pod : undefined;
    },
    { timeoutMs: 20_000 },
  );
  assert.equal(storedState(paused, pausedAnnotation).cause, 'stuck');
  assert.equal(cpuOf(paused), 1250, 'a pause resizes nothing');
  assert.equal(paused.metadata?.uid, requested.metadata?.uid, 'the same pod');
  const [pause] = await pauseRecords('stuck-0');
  assert.ok(pause, 'the pause is on the audit branch');
  assert.match(String(pause.reason), /still not carried out .*pause\.onStuckFor 60000 ms/);
  assert.match(JSON.stringify(pause.inputs), /"cause":"stuck"/);
  assert.equal(await pausesMetric('stuck'), 1);
  assert.ok((await eventReasons('stuck-0')).includes('Warning/TollgateResizePaused'));

  // A reviewer's Resume approval lifts it.
  approvals = [anApproval('Resume', { kind: 'ResizePolicy', name: 'stuck' })];
  await eventually(
    'the pause lifted by the approval',
    async () => {
      await loop.pass();
      return !(await world.pod('stuck-0')).metadata?.annotations?.[pausedAnnotation];
    },
    { timeoutMs: 20_000 },
  );
  assert.ok(
    (await world.auditRecords()).some(
      (r) => (r.target as { name: string }).name === 'stuck-0' && r.kind === 'Resume',
    ),
    'the resume is on the audit branch',
  );
  await loop.stop();
});

test('a signal unreadable for longer than pause.onUnreadableFor pauses the workload, counted from when it became unreadable even across a restart of tollgate', async () => {
  // The queue metric of this pod is never exported: the query answers with no samples.
  const policy = policyNamed('blind');
  const clock = new MovedClock();
  let approvals = [] as ReturnType<typeof anApproval>[];
  const provider = () => policyFor(world.namespace, [policy], { approvals });
  const first = world.loop(provider, { intervalMs: 3_600_000, clock });
  await world.runPod(workerPod('blind-0', 'blind', 'rz-pause-well', { cpu: '1', memory: '256Mi' }));
  const startedAt = clock.now();
  await first.pass();
  const storedSince = await eventually(
    'since when the signal is unreadable stored on the pod, sealed',
    async () => {
      const since = storedState(await world.pod('blind-0'), stateAnnotation).unreadableSince;
      return typeof since === 'number' ? since : undefined;
    },
    { timeoutMs: 10_000 },
  );
  assert.ok(storedSince <= clock.now(), 'a time already passed');
  // The first tollgate stops; the one after it starts with no memory of the pod.
  await first.stop();
  const second = world.loop(provider, { intervalMs: 3_600_000, clock });
  clock.offsetMs = minute + 2000 + (startedAt - Date.now());
  await eventually(
    'the workload paused as unreadable by the restarted tollgate',
    async () => {
      await second.pass();
      const pod = await world.pod('blind-0');
      return pod.metadata?.annotations?.[pausedAnnotation] !== undefined;
    },
    { timeoutMs: 20_000 },
  );
  const pod = await world.pod('blind-0');
  const stored = storedState(pod, pausedAnnotation);
  assert.equal(stored.cause, 'unreadable');
  assert.equal(cpuOf(pod), 1000, 'a pause resizes nothing');
  await world.assertInPlace('blind-0');
  const [pause] = await pauseRecords('blind-0');
  assert.ok(pause, 'the pause is on the audit branch');
  assert.match(
    String(pause.reason),
    /queue has no samples since .*pause\.onUnreadableFor 60000 ms/,
  );
  const since = (pause.inputs as { condition: string; value: { since?: number } }[]).find(
    (i) => i.condition === 'unreadable',
  )?.value.since;
  assert.equal(
    since,
    storedSince,
    `the clock runs from the first tollgate's pass (${startedAt}), not from the restart`,
  );
  assert.ok(
    (await world.auditRecords()).some(
      (r) =>
        (r.target as { name: string }).name === 'blind-0' &&
        r.kind === 'Hold' &&
        /the time is kept on the pod/.test(String(r.reason)),
    ),
    'storing the time is recorded in Git',
  );
  assert.equal(await pausesMetric('unreadable'), 1);
  assert.ok((await eventReasons('blind-0')).includes('Warning/TollgateResizePaused'));

  // The signal reads again and a reviewer approves: automation resumes.
  world.prom.set(queueMetric, { namespace: world.namespace, pod: 'blind-0' }, 50);
  approvals = [anApproval('Resume', { kind: 'ResizePolicy', name: 'blind' })];
  await eventually(
    'the pause lifted by the approval',
    async () => {
      await second.pass();
      return !(await world.pod('blind-0')).metadata?.annotations?.[pausedAnnotation];
    },
    { timeoutMs: 20_000 },
  );
});

test('a signal that reads again before pause.onUnreadableFor clears the stored time, recorded in Git, with a Normal Event and no Warning', async () => {
  const policy = policyNamed('recovers');
  const clock = new MovedClock();
  const loop = world.loop(() => policyFor(world.namespace, [policy]), {
    intervalMs: 3_600_000,
    clock,
  });
  // The queue metric of this pod is not exported yet: the query answers with no samples.
  await world.runPod(
    workerPod('recovers-0', 'recovers', 'rz-pause-well', { cpu: '1', memory: '256Mi' }),
  );
  await eventually(
    'since when the signal is unreadable stored on the pod',
    async () => {
      await loop.pass();
      const since = storedState(await world.pod('recovers-0'), stateAnnotation).unreadableSince;
      return typeof since === 'number';
    },
    { timeoutMs: 20_000 },
  );
  // The signal reads again (inside the band: nothing to resize).
  world.prom.set(queueMetric, { namespace: world.namespace, pod: 'recovers-0' }, 50);
  await eventually(
    'the stored time cleared',
    async () => {
      await loop.pass();
      const state = storedState(await world.pod('recovers-0'), stateAnnotation);
      return state.unreadableSince === undefined;
    },
    { timeoutMs: 20_000 },
  );
  await loop.stop();
  const cleared = (await world.auditRecords()).filter(
    (r) =>
      (r.target as { name: string }).name === 'recovers-0' &&
      /read again/.test(String(r.reason)) &&
      (r.outcome as { result: string }).result === 'succeeded',
  );
  assert.equal(cleared.length, 1, 'the clock stopping is on the audit branch');
  const told = (await eventsOf('recovers-0')).filter((e) => /read again/.test(e));
  assert.ok(told.length > 0, 'the recovery is told on the pod');
  for (const e of told) assert.match(e, /^Normal\/TollgateResizeSignalsReadable: /);
  assert.equal(
    (await world.pod('recovers-0')).metadata?.annotations?.[pausedAnnotation],
    undefined,
  );
});
