import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  EventAggregator,
  createEventRecorder,
  eventPriority,
  reportingController,
} from '../../../src/cluster/events.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { objectKey } from '../../../src/cluster/types.ts';
import type { Dispatcher, WriteRequest, WriteResult } from '../../../src/dispatch/types.ts';

const pod = (uid: string) => ({ namespace: 'team-a', name: `pod-${uid}`, uid });
const released = {
  type: 'Normal' as const,
  reason: 'GateReleased',
  action: 'Release',
  note: 'conditions hold',
};
const held = { type: 'Normal' as const, reason: 'GateHeld', action: 'Hold', note: 'waiting' };

test('repeats of one (pod, reason) inside the window merge into one pending write with a count', () => {
  const aggregator = new EventAggregator(60_000, 100);
  for (let i = 0; i < 5; i++) aggregator.add(pod('a'), held, 1000 + i);
  assert.equal(aggregator.backlog, 1);
  const series = aggregator.next();
  assert.equal(series?.count, 5);
  assert.equal(aggregator.next(), undefined);
});

test('different reasons or different pods are separate Events', () => {
  const aggregator = new EventAggregator(60_000, 100);
  aggregator.add(pod('a'), held, 0);
  aggregator.add(pod('a'), released, 0);
  aggregator.add(pod('b'), held, 0);
  assert.equal(aggregator.backlog, 3);
});

test('a repeat after the window starts a new Event instead of extending the old series', () => {
  const aggregator = new EventAggregator(60_000, 100);
  aggregator.add(pod('a'), held, 0);
  const first = aggregator.next();
  if (first) first.name = 'pod-a.1';
  aggregator.add(pod('a'), held, 120_000);
  const second = aggregator.next();
  assert.equal(second?.count, 1);
  assert.equal(second?.name, undefined);
});

test('a full backlog drops new Events and counts them, but still merges repeats of queued ones', () => {
  const aggregator = new EventAggregator(60_000, 2);
  assert.equal(aggregator.add(pod('a'), held, 0), true);
  assert.equal(aggregator.add(pod('b'), held, 0), true);
  assert.equal(aggregator.add(pod('c'), held, 0), false);
  assert.equal(aggregator.add(pod('a'), held, 1), true);
  assert.equal(aggregator.dropped, 1);
  assert.equal(aggregator.backlog, 2);
});

test('series outside their window are forgotten once written', () => {
  const aggregator = new EventAggregator(1000, 10);
  aggregator.add(pod('a'), held, 0);
  aggregator.next();
  aggregator.expire(5000);
  aggregator.add(pod('a'), held, 5000);
  assert.equal(aggregator.next()?.count, 1);
});

// ---- the recorder hands Events to the write dispatcher

/** A dispatcher that records what it is given and answers from a script. */
function recordingDispatcher(answers: WriteResult[] = []) {
  const requests: WriteRequest[] = [];
  const dispatcher: Dispatcher = {
    enqueue(request) {
      requests.push(request);
      return {
        accepted: true,
        coalesced: false,
        done: Promise.resolve(answers.shift() ?? { result: 'succeeded', resourceVersion: '1' }),
      };
    },
    whenNotFull: () => Promise.resolve(),
    cancel: () => undefined,
    depth: 0,
    close: () => Promise.resolve(),
  };
  return { dispatcher, requests };
}
const fast = { ratePerSecond: 1000, burst: 1000, clock: { now: () => 5_000 } };

test('an Event is a dispatcher write of the lowest priority, under its own key, never the pod key', async () => {
  const { dispatcher, requests } = recordingDispatcher();
  const recorder = createEventRecorder(dispatcher, { ...fast, deadlineMs: 30_000 });
  recorder.record(pod('a'), released);
  await recorder.flush();
  assert.equal(requests.length, 1);
  const [request] = requests;
  assert.equal(request?.op.type, 'event');
  assert.equal(request?.priority, eventPriority);
  assert.ok(eventPriority < -1_000_000, 'below the lowest GatePolicy priority');
  assert.equal(request?.key, 'event/a|GateReleased');
  assert.notEqual(request?.key, objectKey('team-a', 'pod-a'));
  assert.equal(request?.deadline, 35_000);
  assert.equal(request?.target.namespace, 'team-a');
  assert.equal(request?.target.uid, 'a');
  assert.ok(request?.op.type === 'event' && request.op.event.action === 'create');
  assert.equal(request.op.event.body.regarding?.name, 'pod-a');
  assert.equal(request.op.event.body.reportingController, reportingController);
});

test('a repeat after the Event was created bumps its series under the same Event name', async () => {
  const { dispatcher, requests } = recordingDispatcher();
  const recorder = createEventRecorder(dispatcher, fast);
  recorder.record(pod('a'), held);
  await recorder.flush();
  recorder.record(pod('a'), held);
  await recorder.flush();
  const [create, bump] = requests;
  assert.ok(create?.op.type === 'event' && bump?.op.type === 'event');
  assert.equal(bump.op.event.action, 'series');
  assert.equal(bump.op.event.action === 'series' && bump.op.event.count, 2);
  assert.equal(bump.target.name, create.target.name);
});

test('a series update answered 404 (the Event expired on the server) creates the Event again', async () => {
  const { dispatcher, requests } = recordingDispatcher([
    { result: 'succeeded', resourceVersion: '1' },
    { result: 'failed', code: 404, message: 'not found' },
  ]);
  const recorder = createEventRecorder(dispatcher, fast);
  recorder.record(pod('a'), held);
  await recorder.flush();
  recorder.record(pod('a'), held);
  await recorder.flush();
  assert.deepEqual(
    requests.map((r) => (r.op.type === 'event' ? r.op.event.action : r.op.type)),
    ['create', 'series', 'create'],
  );
});

async function failedEvents(): Promise<number> {
  const metric = registry.getSingleMetric('tollgate_events_written_total');
  const values = (await metric?.get())?.values ?? [];
  return values.find((v) => v.labels.result === 'failed')?.value ?? 0;
}

test('an Event the dispatcher refuses, expires or fails is dropped and counted, not retried in a loop', async () => {
  const before = await failedEvents();
  for (const answer of [
    { result: 'expired', message: 'deadline passed' },
    { result: 'failed', code: 403, message: 'forbidden' },
    { result: 'cancelled', message: 'leadership lost' },
  ] as WriteResult[]) {
    const { dispatcher, requests } = recordingDispatcher([answer]);
    const recorder = createEventRecorder(dispatcher, fast);
    recorder.record(pod('a'), released);
    await recorder.flush();
    assert.equal(requests.length, 1, `${answer.result}: one attempt`);
  }
  const full: Dispatcher = {
    ...recordingDispatcher().dispatcher,
    enqueue: () => ({ accepted: false, reason: 'full' }),
  };
  const recorder = createEventRecorder(full, fast);
  recorder.record(pod('a'), released);
  await recorder.flush();
  assert.equal((await failedEvents()) - before, 4);
});
