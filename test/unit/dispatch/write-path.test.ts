/**
 * The dispatcher under stress (issue 18): priority bands, cancel on delete, knobs with
 * validated defaults, latency histograms, read-back before retry, the synchronous mode
 * and its automatic fallback, and fencing that aborts writes in flight. Time is a
 * manual clock; every figure is a count or an ordering.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PriorityDispatcher, type DispatcherOptions } from '../../../src/dispatch/queue.ts';
import { dispatchSettings } from '../../../src/dispatch/settings.ts';
import { monotonicClock } from '../../../src/dispatch/monotonic.ts';
import type {
  ReadBackVerdict,
  WriteOperation,
  WriteRequest,
  WriteResult,
} from '../../../src/dispatch/types.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { ManualTimers, settle } from '../../support/manual-timers.ts';

const release: WriteOperation = { type: 'removeGate', gate: 'tollgate.io/quota', gateIndex: 0 };
const rollback: WriteOperation = {
  type: 'resize',
  containers: [{ name: 'app', resources: { requests: { memory: '256Mi' } } }],
};
const cancelPod: WriteOperation = { type: 'delete', reason: 'expired' };

let ids = 0;
function write(key: string, now: number, fields: Partial<WriteRequest> = {}): WriteRequest {
  const [namespace, name] = key.split('/') as [string, string];
  return {
    key,
    target: { namespace, name, uid: `uid-${name}`, resourceVersion: '7' },
    op: release,
    priority: 0,
    tenant: 'team-a',
    deadline: now + 3_600_000,
    decisionId: `wp${ids++}`,
    ...fields,
  };
}

type Answer = (
  req: WriteRequest,
  signal: AbortSignal,
  attempt: number,
) => Promise<{ resourceVersion: string }>;

const ok: Answer = () => Promise.resolve({ resourceVersion: '8' });
/** Never answers; rejects when aborted (as fetch does). */
const hang: Answer = (_req, signal) =>
  new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason)));

function setup(answer: Answer, options: Partial<DispatcherOptions> = {}) {
  const timers = new ManualTimers();
  const sends: WriteRequest[] = [];
  const attempts = new Map<string, number>();
  const dispatcher = new PriorityDispatcher({
    capacity: 100,
    concurrency: 1,
    qps: 1000,
    burst: 1000,
    clock: timers.clock,
    timers,
    random: () => 0,
    retry: { baseMs: 100, maxMs: 1000, maxAttempts: 4, maxElapsedMs: 10_000 },
    attemptTimeoutMs: 1000,
    executor: (req, signal) => {
      const attempt = (attempts.get(req.decisionId) ?? 0) + 1;
      attempts.set(req.decisionId, attempt);
      sends.push(req);
      return answer(req, signal, attempt);
    },
    ...options,
  });
  return { timers, dispatcher, sends };
}

function accepted(result: ReturnType<PriorityDispatcher['enqueue']>): Promise<WriteResult> {
  assert.ok(result.accepted, `request accepted (${JSON.stringify(result)})`);
  return result.done;
}

async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  return values
    .filter((v) =>
      Object.entries(labels).every(
        ([k, value]) => (v.labels as Record<string, unknown>)[k] === value,
      ),
    )
    .reduce((sum, v) => sum + v.value, 0);
}

/** Lets answers already given be handled at the current time, then moves time on. */
async function advance(timers: ManualTimers, ms: number): Promise<void> {
  await settle();
  await timers.advance(ms);
}

/** A gate that holds the only write slot until opened. */
function blocker() {
  let open!: () => void;
  const opened = new Promise<{ resourceVersion: string }>((resolve) => {
    open = () => resolve({ resourceVersion: '1' });
  });
  return { answer: (() => opened) as Answer, open };
}

// --- Priority bands -------------------------------------------------------------

const bandCases: {
  name: string;
  backlog: Partial<WriteRequest>;
  urgent: Partial<WriteRequest>;
}[] = [
  {
    name: 'a rollback (band safety, priority 100) goes before releases of GatePolicy priority 1,000,000',
    backlog: { op: release, priority: 1_000_000 },
    urgent: { op: rollback, priority: 100, band: 'safety' },
  },
  {
    name: 'a Cancel delete is a safety write by default and goes before higher-priority releases',
    backlog: { op: release, priority: 1_000_000 },
    urgent: { op: cancelPod, priority: -5 },
  },
  {
    name: 'a release goes before Events whatever the Event priority',
    backlog: {
      op: {
        type: 'event',
        event: { action: 'series', count: 2, lastObservedTime: '2026-01-01T00:00:00.000000Z' },
      },
      priority: 1_000_000,
    },
    urgent: { op: release, priority: -1_000_000 },
  },
];
for (const row of bandCases) {
  test(row.name, async () => {
    const gate = blocker();
    const { timers, dispatcher, sends } = setup(
      (req, signal, attempt) =>
        req.key === 'hold/x' ? gate.answer(req, signal, attempt) : ok(req, signal, attempt),
      // An hour-old backlog would make the fallback cancel it; here only the order is judged.
      { fallback: { enabled: false } },
    );
    const now = timers.clock.now();
    void accepted(dispatcher.enqueue(write('hold/x', now)));
    for (let i = 0; i < 50; i++)
      void accepted(dispatcher.enqueue(write(`backlog/p${i}`, now, row.backlog)));
    // The backlog has aged for a long time: aging never crosses a band.
    await advance(timers, 3_600_000 - 1);
    const urgent = accepted(dispatcher.enqueue(write('urgent/u', timers.clock.now(), row.urgent)));
    gate.open();
    assert.equal((await urgent).result, 'succeeded');
    await settle();
    const position = sends.findIndex((s) => s.key === 'urgent/u');
    assert.equal(position, 1, `sent right after the write in flight, got position ${position}`);
  });
}

test('a 10,000-release backlog delays a rollback by at most the one write in flight', async () => {
  const gate = blocker();
  const { timers, dispatcher, sends } = setup(
    (req, signal, attempt) =>
      req.key === 'hold/x' ? gate.answer(req, signal, attempt) : ok(req, signal, attempt),
    { capacity: 10_100, safetyReserve: 50 },
  );
  const now = timers.clock.now();
  void accepted(dispatcher.enqueue(write('hold/x', now)));
  for (let i = 0; i < 10_000; i++)
    void accepted(
      dispatcher.enqueue(write(`backlog/p${i}`, now, { priority: 1_000_000, tenant: `t${i % 7}` })),
    );
  const urgent = accepted(
    dispatcher.enqueue(
      write('urgent/rollback', now, { op: rollback, priority: 100, band: 'safety' }),
    ),
  );
  gate.open();
  await urgent;
  assert.equal(
    sends.findIndex((s) => s.key === 'urgent/rollback'),
    1,
  );
  await dispatcher.close({ cancelQueued: true });
});

test('the last places of a full queue are kept for safety writes: a release is refused, a rollback accepted', () => {
  const { timers, dispatcher } = setup(hang, { capacity: 10, safetyReserve: 2 });
  const now = timers.clock.now();
  for (let i = 0; i < 8; i++) assert.ok(dispatcher.enqueue(write(`ns/p${i}`, now)).accepted);
  assert.deepEqual(dispatcher.enqueue(write('ns/late-release', now)), {
    accepted: false,
    reason: 'full',
  });
  assert.ok(
    dispatcher.enqueue(write('ns/rollback', now, { op: rollback, band: 'safety' })).accepted,
  );
  assert.ok(dispatcher.enqueue(write('ns/cancel', now, { op: cancelPod })).accepted);
  assert.deepEqual(dispatcher.enqueue(write('ns/third-safety', now, { op: cancelPod })), {
    accepted: false,
    reason: 'full',
  });
});

// --- Cancel on delete -----------------------------------------------------------

test("cancelObject by uid cancels the deleted pod's queued and backing-off writes and keeps the new incarnation's", async () => {
  const gate = blocker();
  const { timers, dispatcher, sends } = setup((req, signal, attempt) => {
    if (req.key === 'hold/x') return gate.answer(req, signal, attempt);
    if (req.key === 'ns/backoff')
      return Promise.reject(Object.assign(new Error('busy'), { statusCode: 503 }));
    return ok(req, signal, attempt);
  });
  const now = timers.clock.now();
  // One write slot: the backing-off write is sent first, then the blocker takes the slot.
  const backingOff = accepted(dispatcher.enqueue(write('ns/backoff', now)));
  await settle();
  assert.equal(sends.filter((s) => s.key === 'ns/backoff').length, 1, 'sent once, now backing off');
  void accepted(dispatcher.enqueue(write('hold/x', now)));
  const oldPod = accepted(
    dispatcher.enqueue(
      write('ns/p', now, {
        target: { namespace: 'ns', name: 'p', uid: 'old', resourceVersion: '3' },
      }),
    ),
  );
  assert.equal(
    dispatcher.cancelObject('ns/p', { uid: 'other-uid', reason: 'pod deleted' }),
    0,
    'another uid is not cancelled',
  );
  assert.equal(dispatcher.cancelObject('ns/p', { uid: 'old', reason: 'pod deleted' }), 1);
  assert.equal(dispatcher.cancelObject('ns/backoff', { reason: 'pod deleted' }), 1);
  assert.deepEqual(await oldPod, { result: 'cancelled', message: 'pod deleted' });
  assert.deepEqual(await backingOff, { result: 'cancelled', message: 'pod deleted' });
  const newPod = accepted(
    dispatcher.enqueue(
      write('ns/p', now, {
        target: { namespace: 'ns', name: 'p', uid: 'new', resourceVersion: '9' },
      }),
    ),
  );
  assert.equal(
    dispatcher.cancelObject('ns/p', { uid: 'old', reason: 'late delete event of the old pod' }),
    0,
  );
  gate.open();
  await advance(timers, 5_000);
  assert.equal((await newPod).result, 'succeeded');
  assert.deepEqual(
    sends.filter((s) => s.key === 'ns/p').map((s) => s.target.uid),
    ['new'],
    'nothing was sent to the deleted incarnation',
  );
  assert.equal(
    sends.filter((s) => s.key === 'ns/backoff').length,
    1,
    'the backing-off write was not sent again',
  );
});

const presenceCases: { name: string; presence: 'gone' | 'replaced'; message: RegExp }[] = [
  {
    name: 'a write to a pod the view shows gone is cancelled right before its send, never sent',
    presence: 'gone',
    message: /gone/,
  },
  {
    name: 'a write to a pod the view shows replaced by a new uid is cancelled, never sent',
    presence: 'replaced',
    message: /replaced/,
  },
];
for (const row of presenceCases) {
  test(row.name, async () => {
    const { timers, dispatcher, sends } = setup(ok, {
      presence: (req) => (req.key === 'ns/victim' ? row.presence : 'present'),
    });
    const now = timers.clock.now();
    const victim = accepted(dispatcher.enqueue(write('ns/victim', now)));
    const other = accepted(dispatcher.enqueue(write('ns/other', now)));
    const result = await victim;
    assert.equal(result.result, 'cancelled');
    assert.match((result as { message: string }).message, row.message);
    assert.equal((await other).result, 'succeeded');
    assert.deepEqual(
      sends.map((s) => s.key),
      ['ns/other'],
    );
  });
}

// --- Knobs ------------------------------------------------------------------------

test('every knob has a default and the defaults are valid', () => {
  const settings = dispatchSettings();
  assert.equal(settings.capacity, 1000);
  assert.equal(settings.safetyReserve, 64);
  assert.equal(settings.burst, 2 * settings.qps);
  assert.ok(
    settings.attemptTimeoutMs < 5_000,
    'shorter than the default fence margin (15 s lease - 10 s renew deadline)',
  );
  assert.equal(settings.mode, 'queue');
  assert.equal(settings.fallback.enabled, false, 'opt-in: tollgate run turns it on');
});

const invalidKnobs: {
  name: string;
  input: Parameters<typeof dispatchSettings>[0];
  error: RegExp;
}[] = [
  {
    name: 'a capacity of 0 is refused, naming the field',
    input: { capacity: 0 },
    error: /capacity: must be an integer above 0, got 0/,
  },
  {
    name: 'a fractional concurrency is refused',
    input: { concurrency: 1.5 },
    error: /concurrency: must be an integer above 0/,
  },
  {
    name: 'a negative aging is refused',
    input: { agingMs: -1 },
    error: /agingMs: must be a number above 0/,
  },
  {
    name: 'a retry maximum below its base is refused',
    input: { retry: { baseMs: 500, maxMs: 100 } },
    error: /retry\.maxMs: must be at least retry\.baseMs/,
  },
  {
    name: 'zero retry attempts are refused',
    input: { retry: { maxAttempts: 0 } },
    error: /retry\.maxAttempts/,
  },
  {
    name: 'a safety reserve as large as the capacity is refused',
    input: { capacity: 10, safetyReserve: 10 },
    error: /safetyReserve: must be below capacity/,
  },
  {
    name: 'an unknown mode is refused',
    input: { mode: 'fast' as 'queue' },
    error: /mode: must be "queue" or "sync"/,
  },
  {
    name: 'a failure ratio above 1 is refused',
    input: { fallback: { enabled: true, maxFailureRatio: 1.5 } },
    error: /fallback\.maxFailureRatio/,
  },
  {
    name: 'an attempt timeout as long as the fence margin is refused',
    input: { attemptTimeoutMs: 5_000, fenceMarginMs: 5_000 },
    error: /attemptTimeoutMs: must be shorter than the fence margin/,
  },
  {
    name: 'a write deadline of NaN is refused',
    input: { writeDeadlineMs: Number.NaN },
    error: /writeDeadlineMs/,
  },
];
for (const row of invalidKnobs) {
  test(row.name, () => {
    assert.throws(() => dispatchSettings(row.input), row.error);
    assert.throws(
      () =>
        new PriorityDispatcher({
          executor: () => Promise.resolve({ resourceVersion: '1' }),
          ...row.input,
        }),
      row.error,
    );
  });
}

test('several invalid knobs are reported together', () => {
  assert.throws(
    () => dispatchSettings({ capacity: -1, qps: 0 }),
    (error: Error) => /capacity/.test(error.message) && /qps/.test(error.message),
  );
});

// --- Histograms -------------------------------------------------------------------

/** Count and sum of one histogram series. */
async function histogram(
  name: string,
  labels: Record<string, string>,
): Promise<{ count: number; sum: number }> {
  const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  const pick = (suffix: string): number =>
    values.find(
      (v) =>
        (v as { metricName?: string }).metricName === `${name}_${suffix}` &&
        Object.entries(labels).every(([k, value]) => v.labels[k] === value),
    )?.value ?? 0;
  return { count: pick('count'), sum: pick('sum') };
}

test('write latency is observed per operation and result, from first send to result, and queue wait per band', async () => {
  const { timers, dispatcher } = setup((req, signal, attempt) =>
    attempt === 1
      ? Promise.reject(Object.assign(new Error('busy'), { statusCode: 503 }))
      : ok(req, signal, attempt),
  );
  const labels = { op: 'resize', result: 'succeeded' };
  const before = await histogram('tollgate_dispatch_write_seconds', labels);
  const waitBefore = await histogram('tollgate_dispatch_wait_seconds', { band: 'safety' });
  const done = accepted(
    dispatcher.enqueue(write('ns/a', timers.clock.now(), { op: rollback, band: 'safety' })),
  );
  await advance(timers, 1000);
  assert.equal((await done).result, 'succeeded');
  const after = await histogram('tollgate_dispatch_write_seconds', labels);
  assert.equal(after.count - before.count, 1, 'one observation per write, not per attempt');
  // random() = 0: the one retry waited baseMs / 2 = 50 ms.
  assert.equal(Math.round((after.sum - before.sum) * 1000), 50);
  const waitAfter = await histogram('tollgate_dispatch_wait_seconds', { band: 'safety' });
  assert.equal(waitAfter.count - waitBefore.count, 1);
});

// --- Read-back before retry -------------------------------------------------------

const readBackCases: {
  name: string;
  failure: 'timeout' | 'reset';
  verdict: ReadBackVerdict;
  result: WriteResult['result'];
  sends: number;
}[] = [
  {
    name: 'an attempt that timed out but was applied is recorded succeeded from a read, not sent again',
    failure: 'timeout',
    verdict: { state: 'applied', resourceVersion: '42' },
    result: 'succeeded',
    sends: 1,
  },
  {
    name: 'a connection reset after the write was applied is recorded succeeded from a read',
    failure: 'reset',
    verdict: { state: 'applied', resourceVersion: '42' },
    result: 'succeeded',
    sends: 1,
  },
  {
    name: 'a timed-out attempt the read shows not applied is sent again',
    failure: 'timeout',
    verdict: { state: 'absent' },
    result: 'succeeded',
    sends: 2,
  },
  {
    name: 'a timed-out attempt whose pod is gone is cancelled, not sent again',
    failure: 'timeout',
    verdict: { state: 'gone', message: 'the pod no longer exists' },
    result: 'cancelled',
    sends: 1,
  },
];
for (const row of readBackCases) {
  test(row.name, async () => {
    const reads: WriteRequest[] = [];
    const { timers, dispatcher, sends } = setup(
      (req, signal, attempt) => {
        if (attempt > 1) return ok(req, signal, attempt);
        if (row.failure === 'timeout') return hang(req, signal, attempt);
        return Promise.reject(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
      },
      {
        readBack: (req) => {
          reads.push(req);
          return Promise.resolve(row.verdict);
        },
      },
    );
    const done = accepted(dispatcher.enqueue(write('ns/a', timers.clock.now())));
    await advance(timers, 5_000);
    const result = await done;
    assert.equal(result.result, row.result);
    if (row.verdict.state === 'applied')
      assert.deepEqual(result, {
        result: 'succeeded',
        resourceVersion: '42',
        confirmedBy: 'read-back',
      });
    assert.equal(sends.length, row.sends);
    assert.equal(reads.length, 1);
  });
}

/**
 * A read-back that fails tells nothing: the write may have been applied. It is not sent
 * again blind (a gate removal sent again after it applied meets its failed `test` op and
 * would be recorded a conflict, a false record): each later attempt reads first, and
 * sends only when a read shows the write not applied.
 */
const failedReadCases: {
  name: string;
  reads: readonly (ReadBackVerdict | 'fails')[];
  result: WriteResult;
  sends: number;
}[] = [
  {
    name: 'a read-back that fails, then one that shows the write applied: succeeded from the read, sent once',
    reads: ['fails', { state: 'applied', resourceVersion: '42' }],
    result: { result: 'succeeded', resourceVersion: '42', confirmedBy: 'read-back' },
    sends: 1,
  },
  {
    name: 'a read-back that fails, then one that shows the write not applied: sent again',
    reads: ['fails', { state: 'absent' }],
    result: { result: 'succeeded', resourceVersion: '8' },
    sends: 2,
  },
  {
    name: 'a read-back that fails, then one that shows the pod gone: cancelled, sent once',
    reads: ['fails', { state: 'gone', message: 'the pod no longer exists' }],
    result: { result: 'cancelled', message: 'read-back: the pod no longer exists' },
    sends: 1,
  },
];
for (const row of failedReadCases) {
  test(row.name, async () => {
    let read = 0;
    const { timers, dispatcher, sends } = setup(
      (req, signal, attempt) =>
        attempt === 1 ? hang(req, signal, attempt) : ok(req, signal, attempt),
      {
        readBack: () => {
          const verdict = row.reads[Math.min(read++, row.reads.length - 1)]!;
          return verdict === 'fails'
            ? Promise.reject(new Error('read failed'))
            : Promise.resolve(verdict);
        },
      },
    );
    const done = accepted(dispatcher.enqueue(write('ns/a', timers.clock.now())));
    for (let i = 0; i < 10; i++) await advance(timers, 1_000);
    assert.deepEqual(await done, row.result);
    assert.equal(sends.length, row.sends, 'sends');
    assert.equal(read, row.reads.length, 'reads');
  });
}

test('reads that keep failing: never sent again; the write ends failed after its attempts, saying whether it applied is unknown', async () => {
  let reads = 0;
  const { timers, dispatcher, sends } = setup(hang, {
    readBack: () => {
      reads += 1;
      return Promise.reject(new Error('read failed'));
    },
  });
  const done = accepted(dispatcher.enqueue(write('ns/a', timers.clock.now())));
  for (let i = 0; i < 20; i++) await advance(timers, 1_000);
  const result = await done;
  assert.equal(result.result, 'failed');
  assert.match((result as { message: string }).message, /gave up after 4 attempts: .*unknown/);
  assert.equal(sends.length, 1, 'sent once, never again without a read');
  assert.equal(reads, 4, 'one read per attempt');
});

// --- Synchronous mode and the automatic fallback -------------------------------------

test('mode sync sends one write at a time and holds no backlog', async () => {
  const { timers, dispatcher, sends } = setup(hang, {
    mode: 'sync',
    concurrency: 4,
    attemptTimeoutMs: 60_000,
  });
  const now = timers.clock.now();
  assert.ok(dispatcher.enqueue(write('ns/a', now)).accepted);
  assert.deepEqual(dispatcher.enqueue(write('ns/b', now)), { accepted: false, reason: 'full' });
  assert.ok(
    dispatcher.enqueue(write('ns/rollback', now, { op: rollback, band: 'safety' })).accepted,
  );
  await settle();
  assert.deepEqual(
    sends.map((s) => s.key),
    ['ns/a'],
    'one write in flight although concurrency is 4',
  );
  assert.equal(dispatcher.synchronous, true);
  assert.equal(dispatcher.degraded, false, 'configured, not degraded');
  dispatcher.fenceClosed('test over');
  await settle();
  assert.equal(dispatcher.inFlight + dispatcher.depth, 0);
});

/**
 * The synchronous mode holds one write per band, not one in all: under a throttling API
 * server an Event or a pod condition write (background) retries its 429s until its
 * deadline, and a release must not wait behind it for a place (the write-path e2e
 * stalled-leader: a leader in the fallback released none of its 20 pods in a 24 s term
 * while its pods' condition writes held the one place). Sends stay one at a time, best
 * band first.
 */
test('mode sync holds one write per band: a throttled background write does not keep a release out, and the release is sent first', async () => {
  const throttled = () =>
    Promise.reject(Object.assign(new Error('too many requests'), { statusCode: 429 }));
  const { timers, dispatcher, sends } = setup(
    (req) =>
      req.op.type === 'podCondition' ? throttled() : ok(req, new AbortController().signal, 1),
    { mode: 'sync', concurrency: 4 },
  );
  const condition: WriteOperation = {
    type: 'podCondition',
    condition: { type: 'tollgate.io/Released', status: 'False', reason: 'Held', message: 'held' },
  };
  const now = timers.clock.now();
  const background = accepted(dispatcher.enqueue(write('ns/held', now, { op: condition })));
  await settle();
  assert.deepEqual(
    sends.map((s) => s.key),
    ['ns/held'],
    'the condition write was sent and met a 429',
  );
  const release = accepted(dispatcher.enqueue(write('ns/next', now)));
  assert.deepEqual(
    dispatcher.enqueue(write('ns/other', now, { op: condition })),
    { accepted: false, reason: 'full' },
    'a second background write is refused: no backlog',
  );
  assert.deepEqual(
    dispatcher.enqueue(write('ns/after', now)),
    { accepted: false, reason: 'full' },
    'a second release is refused: no backlog',
  );
  let anyBand = false;
  void dispatcher.whenNotFull().then(() => (anyBand = true));
  const releaseRoom = dispatcher.whenNotFull(undefined, 'work');
  await advance(timers, 1_000);
  assert.deepEqual(await release, { result: 'succeeded', resourceVersion: '8' });
  assert.equal(sends[1]?.key, 'ns/next', 'the release went before the retried condition write');
  await releaseRoom; // a waiting release wakes while the condition write is still held
  assert.equal(anyBand, false, 'a wait without a band waits for room in every band');
  dispatcher.fenceClosed('test over');
  await advance(timers, 3_600_000);
  assert.equal((await background).result, 'cancelled');
});

const fallbackEntries: {
  name: string;
  answer: Answer;
  options: Partial<DispatcherOptions>;
  reason: string;
  advanceMs: number;
}[] = [
  {
    name: 'consecutive attempt timeouts make the dispatcher fall back to synchronous writes',
    answer: hang,
    options: { fallback: { enabled: true, maxConsecutiveTimeouts: 3, windowAttempts: 100 } },
    reason: 'consecutive_timeouts',
    advanceMs: 3_500,
  },
  {
    name: 'a failure ratio over the threshold makes the dispatcher fall back',
    answer: () => Promise.reject(Object.assign(new Error('overloaded'), { statusCode: 429 })),
    options: {
      fallback: { enabled: true, windowAttempts: 6, maxFailureRatio: 0.5 },
      retry: { baseMs: 10, maxMs: 10, maxAttempts: 10 },
    },
    reason: 'failure_ratio',
    advanceMs: 200,
  },
  {
    name: 'a write that waited unsent past the queue-age threshold makes the dispatcher fall back',
    answer: hang,
    options: {
      attemptTimeoutMs: 600_000,
      concurrency: 1,
      fallback: { enabled: true, maxQueueAgeMs: 30_000 },
    },
    reason: 'queue_age',
    advanceMs: 30_002,
  },
];
for (const row of fallbackEntries) {
  test(row.name, async () => {
    const transitions: string[] = [];
    const { timers, dispatcher } = setup(row.answer, {
      concurrency: 4,
      ...row.options,
      onFallback: (t) => transitions.push(t.to === 'degraded' ? `degraded:${t.reason}` : 'healthy'),
    });
    const before = await metric('tollgate_dispatch_fallback_transitions_total', {
      to: 'degraded',
      reason: row.reason,
    });
    const now = timers.clock.now();
    const results: Promise<WriteResult>[] = [];
    for (let i = 0; i < 10; i++) results.push(accepted(dispatcher.enqueue(write(`ns/p${i}`, now))));
    await advance(timers, row.advanceMs);
    assert.deepEqual(transitions, [`degraded:${row.reason}`]);
    assert.equal(dispatcher.degraded, true);
    assert.equal(await metric('tollgate_dispatch_degraded'), 1);
    assert.equal(
      (await metric('tollgate_dispatch_fallback_transitions_total', {
        to: 'degraded',
        reason: row.reason,
      })) - before,
      1,
    );
    // No backlog in the fallback: a second release is refused while one is held.
    if (dispatcher.depth + dispatcher.inFlight === 0)
      assert.ok(dispatcher.enqueue(write('ns/late', timers.clock.now())).accepted);
    assert.deepEqual(dispatcher.enqueue(write('ns/later', timers.clock.now())), {
      accepted: false,
      reason: 'full',
    });
    dispatcher.fenceClosed('test over');
    await advance(timers, 700_000);
    for (const result of results)
      assert.ok(['cancelled', 'failed', 'expired'].includes((await result).result));
  });
}

test('the fallback cancels queued releases with the reason, keeps safety writes, and returns to the queue once writes succeed again', async () => {
  let healthy = false;
  const transitions: string[] = [];
  const { timers, dispatcher, sends } = setup(
    (req, signal, attempt) => (healthy ? ok(req, signal, attempt) : hang(req, signal, attempt)),
    {
      concurrency: 2,
      fallback: {
        enabled: true,
        maxConsecutiveTimeouts: 2,
        minDegradedMs: 10_000,
        recoverySuccesses: 3,
      },
      onFallback: (t) => transitions.push(t.to),
    },
  );
  const now = timers.clock.now();
  const releases = Array.from({ length: 6 }, (_, i) =>
    accepted(dispatcher.enqueue(write(`ns/r${i}`, now))),
  );
  const safety = accepted(
    dispatcher.enqueue(write('ns/rollback', now, { op: rollback, band: 'safety' })),
  );
  await advance(timers, 1_000);
  assert.deepEqual(transitions, ['degraded']);
  const queuedRelease = await (releases[5] as Promise<WriteResult>);
  assert.equal(queuedRelease.result, 'cancelled');
  assert.match(
    (queuedRelease as { message: string }).message,
    /fell back to synchronous writes .*attempts in a row without an answer/,
  );
  healthy = true;
  // The rollback was sent (one at a time) while the server still hung; its retry succeeds.
  await advance(timers, 3_000);
  assert.equal((await safety).result, 'succeeded', 'the safety write stayed queued and was sent');
  // Writes one at a time while degraded.
  for (let i = 0; i < 4; i++) {
    await accepted(dispatcher.enqueue(write(`ns/s${i}`, timers.clock.now())));
  }
  assert.equal(dispatcher.degraded, true, 'not before minDegradedMs');
  await advance(timers, 10_000);
  assert.deepEqual(transitions, ['degraded', 'healthy']);
  assert.equal(dispatcher.degraded, false);
  assert.equal(await metric('tollgate_dispatch_degraded'), 0);
  // Back to the queue: several writes accepted at once.
  const t = timers.clock.now();
  assert.ok(dispatcher.enqueue(write('ns/q1', t)).accepted);
  assert.ok(dispatcher.enqueue(write('ns/q2', t)).accepted);
  assert.ok(dispatcher.enqueue(write('ns/q3', t)).accepted);
  await advance(timers, 100);
  assert.ok(sends.some((s) => s.key === 'ns/q3'));
});

test('an idle degraded dispatcher returns to the queue by itself once no write failed for minDegradedMs', async () => {
  const transitions: string[] = [];
  let answer: Answer = hang;
  const { timers, dispatcher } = setup((req, signal, attempt) => answer(req, signal, attempt), {
    fallback: { enabled: true, maxConsecutiveTimeouts: 1, minDegradedMs: 20_000 },
    retry: { maxAttempts: 1 },
    onFallback: (t) => transitions.push(t.to),
  });
  const done = accepted(dispatcher.enqueue(write('ns/a', timers.clock.now())));
  await advance(timers, 1_001);
  assert.equal((await done).result, 'failed');
  assert.deepEqual(transitions, ['degraded']);
  answer = ok;
  await advance(timers, 20_001);
  assert.deepEqual(transitions, ['degraded', 'healthy']);
});

// --- Fencing ----------------------------------------------------------------------

test('fenceClosed aborts writes in flight and records what a read of the object shows', async () => {
  const applied = new Set(['ns/landed']);
  const { timers, dispatcher } = setup(hang, {
    concurrency: 3,
    attemptTimeoutMs: 60_000,
    readBack: (req) =>
      Promise.resolve(
        applied.has(req.key) ? { state: 'applied', resourceVersion: '50' } : { state: 'absent' },
      ),
  });
  const now = timers.clock.now();
  const landed = accepted(dispatcher.enqueue(write('ns/landed', now)));
  const notLanded = accepted(dispatcher.enqueue(write('ns/not-landed', now)));
  const queued = accepted(dispatcher.enqueue(write('ns/q', now)));
  const queuedLater = accepted(dispatcher.enqueue(write('ns/q2', now)));
  await settle();
  dispatcher.fenceClosed('leadership lost');
  await settle();
  assert.deepEqual(await landed, {
    result: 'succeeded',
    resourceVersion: '50',
    confirmedBy: 'read-back',
  });
  const lost = await notLanded;
  assert.equal(lost.result, 'cancelled');
  assert.match(
    (lost as { message: string }).message,
    /leadership lost: aborted in flight; .*not applied/,
  );
  for (const result of [await queued, await queuedLater])
    assert.equal(result.result === 'cancelled' || result.result === 'succeeded', true);
  assert.equal(dispatcher.inFlight, 0, 'nothing left in flight after the fence closed');
  void timers;
});

test('without a read-back, a write aborted by the fence is recorded failed with an unknown outcome, never cancelled', async () => {
  const { timers, dispatcher } = setup(hang, { attemptTimeoutMs: 60_000 });
  const done = accepted(dispatcher.enqueue(write('ns/a', timers.clock.now())));
  await settle();
  dispatcher.fenceClosed('leadership lost');
  const result = await done;
  assert.equal(result.result, 'failed');
  assert.match((result as { message: string }).message, /unknown/);
});

test('the monotonic clock follows the injected monotonic source, not the wall clock', () => {
  let mono = 1_000;
  const clock = monotonicClock(() => mono, 5_000_000);
  assert.equal(clock.now(), 5_000_000);
  mono += 250;
  assert.equal(clock.now(), 5_000_250);
});

test('with the fallback off (the library default), timeouts never leave the queue', async () => {
  const transitions: string[] = [];
  const { timers, dispatcher } = setup(hang, {
    concurrency: 3,
    fallback: { maxConsecutiveTimeouts: 1 },
    onFallback: (t) => transitions.push(t.to),
  });
  for (let i = 0; i < 3; i++) void dispatcher.enqueue(write(`ns/p${i}`, timers.clock.now()));
  await advance(timers, 5_000);
  assert.deepEqual(transitions, []);
  assert.equal(dispatcher.synchronous, false);
  dispatcher.fenceClosed('test over');
  await settle();
});

test('the fallback keeps the queued members of a gang one of whose members was sent: the gang goes out whole, one write at a time', async () => {
  const transitions: string[] = [];
  const { timers, dispatcher, sends } = setup(
    (req, signal, attempt) =>
      req.key.startsWith('ns/slow') ? hang(req, signal, attempt) : ok(req, signal, attempt),
    {
      concurrency: 1,
      fallback: { enabled: true, maxConsecutiveTimeouts: 2, windowAttempts: 100 },
      retry: { maxAttempts: 1 },
      onFallback: (t) => transitions.push(t.to),
    },
  );
  const now = timers.clock.now();
  const inGang = (unit: string) => ({ unit, priority: 5 });
  const first = accepted(
    dispatcher.enqueue(write('ns/gang-0', now, { priority: 10, unit: 'ns/gang' })),
  );
  const slow = ['ns/slow-a', 'ns/slow-b'].map((key, i) =>
    accepted(dispatcher.enqueue(write(key, now, { priority: 9 - i }))),
  );
  const rest = accepted(dispatcher.enqueue(write('ns/gang-1', now, inGang('ns/gang'))));
  const last = accepted(dispatcher.enqueue(write('ns/gang-2', now, inGang('ns/gang'))));
  const solo = accepted(dispatcher.enqueue(write('ns/solo', now, { priority: 5 })));
  const unsent = [0, 1].map((i) =>
    accepted(dispatcher.enqueue(write(`ns/other-${i}`, now, inGang('ns/other')))),
  );
  await advance(timers, 2_001);
  assert.deepEqual(transitions, ['degraded'], 'two timeouts in a row: the fallback');
  assert.equal((await first).result, 'succeeded');
  for (const s of slow) assert.equal((await s).result, 'failed');
  // A gang none of whose members was sent is cancelled whole, as any other queued work.
  for (const cancelled of [solo, ...unsent]) {
    const result = await cancelled;
    assert.equal(result.result, 'cancelled');
    assert.match((result as { message: string }).message, /fell back to synchronous writes/);
  }
  await advance(timers, 100);
  assert.equal((await rest).result, 'succeeded', 'gang-1 follows gang-0');
  assert.equal((await last).result, 'succeeded', 'gang-2 follows gang-0');
  assert.deepEqual(
    sends.map((s) => s.key),
    ['ns/gang-0', 'ns/slow-a', 'ns/slow-b', 'ns/gang-1', 'ns/gang-2'],
  );
});

test('the fallback keeps a write whose answer was lost and not read back: it may have applied, so a read, not a cancel, ends it', async () => {
  const transitions: string[] = [];
  let reads = 0;
  const { timers, dispatcher } = setup(hang, {
    concurrency: 1,
    fallback: { enabled: true, maxConsecutiveTimeouts: 2, windowAttempts: 100 },
    retry: { maxAttempts: 4 },
    readBack: (req) => {
      if (req.key !== 'ns/lost') return Promise.resolve<ReadBackVerdict>({ state: 'absent' });
      reads += 1;
      return reads === 1
        ? Promise.reject(new Error('connection reset'))
        : Promise.resolve<ReadBackVerdict>({ state: 'applied', resourceVersion: '9' });
    },
    onFallback: (t) => transitions.push(t.to),
  });
  const now = timers.clock.now();
  const lost = accepted(dispatcher.enqueue(write('ns/lost', now, { priority: 10 })));
  const other = accepted(dispatcher.enqueue(write('ns/other', now, { priority: 9 })));
  await advance(timers, 2_001);
  assert.deepEqual(transitions, ['degraded']);
  await advance(timers, 1_000);
  assert.deepEqual(await lost, {
    result: 'succeeded',
    resourceVersion: '9',
    confirmedBy: 'read-back',
  });
  assert.equal(reads, 2, 'read once after the lost answer (failed), once before the retry');
  dispatcher.fenceClosed('test over');
  await advance(timers, 3_600_000);
  assert.notEqual((await other).result, 'succeeded', 'the other write never had an answer');
});
