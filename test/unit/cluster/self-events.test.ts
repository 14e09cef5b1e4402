/**
 * tollgate's own Events (the write path fell back, the stale-guard degraded) must not be
 * lost to the fallback they report: in synchronous mode the dispatcher holds one write,
 * and a pod Event that meets a full dispatcher is dropped by design. A recorder made
 * with `waitForRoom` waits for room instead, up to its deadline.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createEventRecorder } from '../../../src/cluster/events.ts';
import type { Dispatcher, WriteRequest } from '../../../src/dispatch/types.ts';

const lease = {
  namespace: 'tollgate-system',
  name: 'tollgate',
  uid: '',
  kind: 'Lease',
  apiVersion: 'coordination.k8s.io/v1',
};
const degraded = {
  type: 'Warning' as const,
  reason: 'WritePathDegraded',
  action: 'FallBack',
  note: 'fell back',
};

/** Full for the first `fullFor` tries; room comes each time `whenNotFull` is awaited. */
function busyDispatcher(fullFor: number) {
  const sent: WriteRequest[] = [];
  let tries = 0;
  let waits = 0;
  const dispatcher: Dispatcher = {
    enqueue(request) {
      tries += 1;
      if (tries <= fullFor) return { accepted: false, reason: 'full' };
      sent.push(request);
      return {
        accepted: true,
        coalesced: false,
        done: Promise.resolve({ result: 'succeeded', resourceVersion: '1' }),
      };
    },
    whenNotFull: async () => void (waits += 1),
    cancel: () => undefined,
    depth: 1,
    close: () => Promise.resolve(),
  };
  return { dispatcher, sent, waits: () => waits };
}
const fast = { ratePerSecond: 1000, burst: 1000, clock: { now: () => 5_000 } };

const rows: { name: string; waitForRoom: boolean; written: number; waits: number }[] = [
  {
    name: 'a recorder that waits for room writes the Event once the dispatcher has room',
    waitForRoom: true,
    written: 1,
    waits: 3,
  },
  {
    name: 'the pod Events recorder drops it instead (it never holds the queue)',
    waitForRoom: false,
    written: 0,
    waits: 0,
  },
];

for (const row of rows) {
  test(row.name, async () => {
    const busy = busyDispatcher(3);
    const recorder = createEventRecorder(busy.dispatcher, {
      ...fast,
      waitForRoom: row.waitForRoom,
    });
    recorder.record(lease, degraded);
    await recorder.flush();
    assert.equal(busy.sent.length, row.written);
    assert.equal(busy.waits(), row.waits);
  });
}

test('an Event about the Lease regards the Lease, without a uid', async () => {
  const busy = busyDispatcher(0);
  const recorder = createEventRecorder(busy.dispatcher, fast);
  recorder.record(lease, degraded);
  await recorder.flush();
  const op = busy.sent[0]?.op;
  assert.ok(op?.type === 'event' && op.event.action === 'create');
  assert.deepEqual(op.event.body.regarding, {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    namespace: 'tollgate-system',
    name: 'tollgate',
  });
});
