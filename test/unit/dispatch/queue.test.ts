import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  PriorityDispatcher,
  classifyWriteError,
  type DispatcherOptions,
} from '../../../src/dispatch/queue.ts';
import type { WriteRequest, WriteResult } from '../../../src/dispatch/types.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { ManualTimers, settle } from '../../support/manual-timers.ts';

/** Lets answers already given be handled at the current time, then moves time on. */
async function advance(timers: ManualTimers, ms: number): Promise<void> {
  await settle();
  await timers.advance(ms);
}

function httpError(statusCode: number, fields: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(`${statusCode} from the API`), { statusCode, ...fields });
}
function networkError(code: string, nested = false): Error {
  const error = new Error('fetch failed');
  if (nested) return Object.assign(error, { cause: Object.assign(new Error('socket'), { code }) });
  return Object.assign(error, { code });
}
const patchTestFailed = httpError(422, {
  apiMessage: 'the server rejected our request due to an error in our request',
  causes: [],
});

const classification: {
  name: string;
  error: unknown;
  kind: string;
  reason?: string;
  retryAfterMs?: number;
}[] = [
  { name: 'a 409 is a conflict to decide again', error: httpError(409), kind: 'conflict' },
  {
    name: 'an error the writer marked conflict is a conflict',
    error: httpError(422, { conflict: true }),
    kind: 'conflict',
  },
  {
    name: 'a 422 with the failed-patch-test message and no causes is a conflict',
    error: patchTestFailed,
    kind: 'conflict',
  },
  {
    name: 'a 422 that lists validation causes is final',
    error: httpError(422, {
      apiMessage: 'Pod "p" is invalid',
      causes: [{ field: 'spec.schedulingGates' }],
    }),
    kind: 'final',
  },
  {
    name: 'a 403 is retried as forbidden (an API server just restarted refuses until its RBAC caches have synced)',
    error: httpError(403),
    kind: 'retry',
    reason: 'forbidden',
  },
  { name: 'a 404 is final', error: httpError(404), kind: 'final' },
  { name: 'a 400 is final', error: httpError(400), kind: 'final' },
  {
    name: 'a 429 is retried as throttled',
    error: httpError(429),
    kind: 'retry',
    reason: 'throttled',
  },
  {
    name: 'a 429 with Retry-After in the headers is retried no sooner than it says',
    error: httpError(429, { headers: { 'retry-after': '3' } }),
    kind: 'retry',
    reason: 'throttled',
    retryAfterMs: 3000,
  },
  {
    name: 'a 429 with Status details.retryAfterSeconds is retried no sooner than it says',
    error: httpError(429, { body: { details: { retryAfterSeconds: 1 } } }),
    kind: 'retry',
    reason: 'throttled',
    retryAfterMs: 1000,
  },
  {
    name: 'a 500 is retried as a server error',
    error: httpError(500),
    kind: 'retry',
    reason: 'server_error',
  },
  {
    name: 'a 503 is retried as a server error',
    error: httpError(503),
    kind: 'retry',
    reason: 'server_error',
  },
  {
    name: 'a 503 that says when to come back (Retry-After) is throttling',
    error: httpError(503, { retryAfterSeconds: 2 }),
    kind: 'retry',
    reason: 'throttled',
    retryAfterMs: 2000,
  },
  {
    name: 'a 504 is retried as a server error',
    error: httpError(504),
    kind: 'retry',
    reason: 'server_error',
  },
  {
    name: 'ECONNRESET is retried as a network error',
    error: networkError('ECONNRESET'),
    kind: 'retry',
    reason: 'network',
  },
  {
    name: 'ECONNREFUSED is retried as a network error',
    error: networkError('ECONNREFUSED'),
    kind: 'retry',
    reason: 'network',
  },
  {
    name: 'an undici socket error in the cause is retried',
    error: networkError('UND_ERR_SOCKET', true),
    kind: 'retry',
    reason: 'network',
  },
  {
    name: 'ETIMEDOUT is retried as a timeout',
    error: networkError('ETIMEDOUT'),
    kind: 'retry',
    reason: 'timeout',
  },
  {
    name: 'an undici headers timeout is retried as a timeout',
    error: networkError('UND_ERR_HEADERS_TIMEOUT'),
    kind: 'retry',
    reason: 'timeout',
  },
  {
    name: 'a TimeoutError is retried as a timeout',
    error: Object.assign(new Error('t'), { name: 'TimeoutError' }),
    kind: 'retry',
    reason: 'timeout',
  },
  {
    name: 'an unknown error without status or code is final, not retried blindly',
    error: new Error('bug'),
    kind: 'final',
  },
  { name: 'a thrown string is final', error: 'boom', kind: 'final' },
];

for (const row of classification) {
  test(row.name, () => {
    const result = classifyWriteError(row.error);
    assert.equal(result.kind, row.kind);
    if (row.reason) assert.equal(result.kind === 'retry' && result.reason, row.reason);
    if (row.retryAfterMs !== undefined)
      assert.equal(result.kind === 'retry' && result.retryAfterMs, row.retryAfterMs);
  });
}

let ids = 0;
function write(key: string, now: number, fields: Partial<WriteRequest> = {}): WriteRequest {
  const [namespace, name] = key.split('/') as [string, string];
  return {
    key,
    target: { namespace, name, uid: `uid-${name}`, resourceVersion: '7' },
    op: { type: 'removeGate', gate: 'tollgate.io/quota', gateIndex: 0 },
    priority: 0,
    tenant: 'team-a',
    deadline: now + 60_000,
    decisionId: `w${ids++}`,
    ...fields,
  };
}

function setup(
  answers: (
    req: WriteRequest,
    signal: AbortSignal,
    attempt: number,
  ) => Promise<{ resourceVersion: string }>,
  options: Partial<DispatcherOptions> = {},
) {
  const timers = new ManualTimers();
  const sends: { key: string; at: number; decisionId: string }[] = [];
  const attempts = new Map<string, number>();
  const dispatcher = new PriorityDispatcher({
    capacity: 10,
    concurrency: 2,
    qps: 100,
    burst: 100,
    clock: timers.clock,
    timers,
    random: () => 0,
    retry: { baseMs: 100, maxMs: 1000, maxAttempts: 4, maxElapsedMs: 10_000 },
    executor: (req, signal) => {
      const attempt = (attempts.get(req.decisionId) ?? 0) + 1;
      attempts.set(req.decisionId, attempt);
      sends.push({ key: req.key, at: timers.clock.now(), decisionId: req.decisionId });
      return answers(req, signal, attempt);
    },
    ...options,
  });
  return { timers, dispatcher, sends };
}

function accepted(result: ReturnType<PriorityDispatcher['enqueue']>): Promise<WriteResult> {
  assert.ok(result.accepted, 'request accepted');
  return result.done;
}

async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  const found = (await registry.getSingleMetric(name)?.get())?.values.find((v) =>
    Object.entries(labels).every(
      ([k, value]) => (v.labels as Record<string, unknown>)[k] === value,
    ),
  );
  return found?.value ?? 0;
}

test('a 429 is retried with backoff, honouring Retry-After, and then succeeds', async () => {
  const { timers, dispatcher, sends } = setup(async (_req, _signal, attempt) => {
    if (attempt < 3) throw httpError(429, { headers: { 'retry-after': '2' } });
    return { resourceVersion: '8' };
  });
  const retriesBefore = await metric('tollgate_dispatch_retries_total', {
    op: 'removeGate',
    reason: 'throttled',
  });
  const done = accepted(dispatcher.enqueue(write('ns/a', timers.clock.now())));
  await advance(timers, 5000);
  assert.deepEqual(await done, { result: 'succeeded', resourceVersion: '8' });
  const gaps = sends.slice(1).map((send, i) => send.at - (sends[i] as { at: number }).at);
  assert.deepEqual(gaps, [2000, 2000], 'each retry waited the 2 s the server asked for');
  assert.equal(
    (await metric('tollgate_dispatch_retries_total', { op: 'removeGate', reason: 'throttled' })) -
      retriesBefore,
    2,
  );
});

/**
 * Throttling is the API server asking to wait, not refusing the write: a 429, or a 503
 * that says when to come back (Retry-After), is retried for as long as the write's
 * deadline allows, whatever `maxAttempts` and `maxElapsedMs` say (setup: 4 attempts,
 * 10 s). When the deadline passes the write ends `expired`, which sends the pod back to
 * its loop to be decided again; it never ends `failed`.
 */
const throttling: {
  name: string;
  answer: (attempt: number) => Error | undefined;
  deadlineMs: number;
  result: WriteResult['result'];
  sends: number;
  /** Retries counted as throttled (the last answer of an expired write was one too). */
  retries: number;
  /** Every gap between two sends of the write is at least this (Retry-After honoured)... */
  minGapMs: number;
  /** ...and at most this (bounded backoff). */
  maxGapMs: number;
}[] = [
  {
    name: 'a write throttled (429, Retry-After 1) ten times, more than maxAttempts allows, is retried until it succeeds',
    answer: (attempt) =>
      attempt <= 10 ? httpError(429, { headers: { 'retry-after': '1' } }) : undefined,
    deadlineMs: 600_000,
    result: 'succeeded',
    sends: 11,
    retries: 10,
    minGapMs: 1000,
    maxGapMs: 1000,
  },
  {
    name: 'a write answered 503 with Retry-After 2 eight times, longer than maxElapsedMs, is retried until it succeeds',
    answer: (attempt) => (attempt <= 8 ? httpError(503, { retryAfterSeconds: 2 }) : undefined),
    deadlineMs: 600_000,
    result: 'succeeded',
    sends: 9,
    retries: 8,
    minGapMs: 2000,
    maxGapMs: 2000,
  },
  {
    name: 'a write throttled (429 without Retry-After) thirty times backs off no longer than retry.maxMs and succeeds',
    answer: (attempt) => (attempt <= 30 ? httpError(429) : undefined),
    deadlineMs: 600_000,
    result: 'succeeded',
    sends: 31,
    retries: 30,
    minGapMs: 50,
    maxGapMs: 1000,
  },
  {
    name: 'a write throttled past its deadline ends expired (decided again by its loop), not failed',
    answer: () => httpError(429, { headers: { 'retry-after': '1' } }),
    deadlineMs: 30_500,
    result: 'expired',
    sends: 31,
    retries: 31,
    minGapMs: 1000,
    maxGapMs: 1000,
  },
];

for (const row of throttling) {
  test(row.name, async () => {
    const { timers, dispatcher, sends } = setup(async (_req, _signal, attempt) => {
      const error = row.answer(attempt);
      if (error) throw error;
      return { resourceVersion: '8' };
    });
    const now = timers.clock.now();
    const throttledBefore = await metric('tollgate_dispatch_retries_total', {
      op: 'removeGate',
      reason: 'throttled',
    });
    const done = accepted(
      dispatcher.enqueue(write('ns/a', now, { deadline: now + row.deadlineMs })),
    );
    await advance(timers, 120_000);
    const result = await done;
    assert.equal(result.result, row.result, JSON.stringify(result));
    assert.equal(sends.length, row.sends);
    const gaps = sends.slice(1).map((send, i) => send.at - (sends[i] as { at: number }).at);
    assert.ok(
      gaps.every((gap) => gap >= row.minGapMs && gap <= row.maxGapMs),
      `gaps within [${row.minGapMs}, ${row.maxGapMs}] ms: ${gaps.join(', ')}`,
    );
    assert.equal(
      (await metric('tollgate_dispatch_retries_total', { op: 'removeGate', reason: 'throttled' })) -
        throttledBefore,
      row.retries,
      'every retry counted as throttled',
    );
  });
}

test('server errors are retried until maxAttempts and then fail with the last error', async () => {
  const { timers, dispatcher, sends } = setup(async () => {
    throw httpError(503);
  });
  const done = accepted(dispatcher.enqueue(write('ns/a', timers.clock.now())));
  await advance(timers, 10_000);
  const result = await done;
  assert.equal(result.result, 'failed');
  assert.equal(result.result === 'failed' && result.code, 503);
  assert.match(result.result === 'failed' ? result.message : '', /gave up after 4 attempts/);
  assert.equal(sends.length, 4);
  const gaps = sends.slice(1).map((send, i) => send.at - (sends[i] as { at: number }).at);
  assert.deepEqual(gaps, [50, 100, 200], 'exponential backoff (random 0 = half the cap)');
});

test('a 403 right after an API server restart is retried with backoff, and the write succeeds once the authorizer allows it', async () => {
  const { timers, dispatcher, sends } = setup(async (_req, _signal, attempt) => {
    if (attempt < 3) throw httpError(403);
    return { resourceVersion: '9' };
  });
  const retriesBefore = await metric('tollgate_dispatch_retries_total', {
    op: 'removeGate',
    reason: 'forbidden',
  });
  const done = accepted(dispatcher.enqueue(write('ns/a', timers.clock.now())));
  await advance(timers, 10_000);
  assert.deepEqual(await done, { result: 'succeeded', resourceVersion: '9' });
  const gaps = sends.slice(1).map((send, i) => send.at - (sends[i] as { at: number }).at);
  assert.deepEqual(gaps, [50, 100], 'exponential backoff (random 0 = half the cap)');
  assert.equal(
    (await metric('tollgate_dispatch_retries_total', { op: 'removeGate', reason: 'forbidden' })) -
      retriesBefore,
    2,
  );
});

test('a 403 after network errors (an API server restarting, then up with its RBAC cache unsynced) is still retried: only 403 answers count towards maxForbiddenAttempts', async () => {
  const { timers, dispatcher, sends } = setup(
    async (_req, _signal, attempt) => {
      if (attempt <= 5) throw networkError('ECONNREFUSED');
      if (attempt <= 7) throw httpError(403);
      return { resourceVersion: '9' };
    },
    {
      retry: {
        baseMs: 100,
        maxMs: 1000,
        maxAttempts: 10,
        maxElapsedMs: 60_000,
        maxForbiddenAttempts: 3,
      },
    },
  );
  const done = accepted(dispatcher.enqueue(write('ns/a', timers.clock.now())));
  await advance(timers, 30_000);
  assert.deepEqual(await done, { result: 'succeeded', resourceVersion: '9' });
  assert.equal(sends.length, 8, '5 network errors, two 403s, then the write');
});

test('a 403 that persists (a permission really missing) fails after retry.maxForbiddenAttempts, fewer than maxAttempts, with its code', async () => {
  const { timers, dispatcher, sends } = setup(
    async () => {
      throw httpError(403);
    },
    {
      retry: {
        baseMs: 100,
        maxMs: 1000,
        maxAttempts: 4,
        maxElapsedMs: 10_000,
        maxForbiddenAttempts: 3,
      },
    },
  );
  const done = accepted(dispatcher.enqueue(write('ns/a', timers.clock.now())));
  await advance(timers, 10_000);
  const result = await done;
  assert.equal(result.result, 'failed');
  assert.equal(result.result === 'failed' && result.code, 403);
  assert.match(result.result === 'failed' ? result.message : '', /gave up after 3 attempts: 403/);
  assert.equal(sends.length, 3);
});

test('a conflict is returned to the loop and never sent again', async () => {
  const { timers, dispatcher, sends } = setup(async () => {
    throw patchTestFailed;
  });
  const done = accepted(dispatcher.enqueue(write('ns/a', timers.clock.now())));
  await advance(timers, 10_000);
  assert.equal((await done).result, 'conflict');
  assert.equal(sends.length, 1);
});

test('a 404 is final and recorded with its code', async () => {
  const { timers, dispatcher } = setup(async () => {
    throw httpError(404);
  });
  const result = await accepted(dispatcher.enqueue(write('ns/a', timers.clock.now())));
  assert.equal(result.result === 'failed' && result.code, 404);
});

test('a write whose deadline passed while it waited is expired, never sent', async () => {
  let release!: () => void;
  const { timers, dispatcher, sends } = setup(
    (req) =>
      req.key === 'ns/busy'
        ? new Promise((resolve) => (release = () => resolve({ resourceVersion: '1' })))
        : Promise.resolve({ resourceVersion: '1' }),
    { concurrency: 1 },
  );
  const now = timers.clock.now();
  accepted(dispatcher.enqueue(write('ns/busy', now)));
  const late = accepted(dispatcher.enqueue(write('ns/late', now, { deadline: now + 500 })));
  await advance(timers, 1000);
  const result = await late;
  assert.equal(result.result, 'expired');
  release();
  await settle();
  assert.deepEqual(
    sends.map((s) => s.key),
    ['ns/busy'],
  );
});

test('a newer decision replaces the queued one, even of another operation, and keeps the higher priority', async () => {
  let release!: () => void;
  const { timers, dispatcher, sends } = setup(
    (req) =>
      req.key === 'ns/busy'
        ? new Promise((resolve) => (release = () => resolve({ resourceVersion: '1' })))
        : Promise.resolve({ resourceVersion: '1' }),
    { concurrency: 1 },
  );
  const now = timers.clock.now();
  accepted(dispatcher.enqueue(write('ns/busy', now)));
  const first = accepted(dispatcher.enqueue(write('ns/a', now, { priority: 9 })));
  const other = accepted(dispatcher.enqueue(write('ns/b', now, { priority: 5 })));
  const second = dispatcher.enqueue(
    write('ns/a', now, { priority: 1, op: { type: 'delete', reason: 'expired' } }),
  );
  assert.ok(second.accepted && second.coalesced);
  const superseded = await first;
  assert.equal(superseded.result, 'cancelled');
  assert.match(
    superseded.result === 'cancelled' ? superseded.message : '',
    /superseded by a newer decision .*removeGate replaced by delete/,
  );
  release();
  await settle();
  assert.equal((await second.done).result, 'succeeded');
  assert.equal((await other).result, 'succeeded');
  assert.deepEqual(
    sends.map((s) => s.key),
    ['ns/busy', 'ns/a', 'ns/b'],
    'ns/a kept priority 9 and went before ns/b',
  );
});

test('a request for a key in flight waits until the write in flight has ended', async () => {
  const releases: (() => void)[] = [];
  const { timers, dispatcher, sends } = setup(
    () => new Promise((resolve) => releases.push(() => resolve({ resourceVersion: '1' }))),
  );
  const now = timers.clock.now();
  const first = accepted(dispatcher.enqueue(write('ns/a', now)));
  const second = accepted(dispatcher.enqueue(write('ns/a', now)));
  await settle();
  assert.equal(sends.length, 1, 'second write held back although a worker is free');
  releases.shift()?.();
  assert.equal((await first).result, 'succeeded');
  await settle();
  assert.equal(sends.length, 2);
  releases.shift()?.();
  assert.equal((await second).result, 'succeeded');
});

test('tenants take turns within one priority', async () => {
  let release!: () => void;
  const { timers, dispatcher, sends } = setup(
    (req) =>
      req.key === 'ns/busy'
        ? new Promise((resolve) => (release = () => resolve({ resourceVersion: '1' })))
        : Promise.resolve({ resourceVersion: '1' }),
    { concurrency: 1 },
  );
  const now = timers.clock.now();
  accepted(dispatcher.enqueue(write('ns/busy', now, { tenant: 'x' })));
  for (const name of ['a1', 'a2', 'a3'])
    dispatcher.enqueue(write(`a/${name}`, now, { tenant: 'a' }));
  for (const name of ['b1', 'b2']) dispatcher.enqueue(write(`b/${name}`, now, { tenant: 'b' }));
  release();
  await dispatcher.close();
  assert.deepEqual(
    sends.map((s) => s.key),
    ['ns/busy', 'a/a1', 'b/b1', 'a/a2', 'b/b2', 'a/a3'],
  );
});

test('cancel(key) drops queued work and aborts the write in flight', async () => {
  const { timers, dispatcher } = setup(
    (_req, signal) =>
      new Promise((_resolve, reject) =>
        signal.addEventListener('abort', () =>
          reject(Object.assign(new Error('aborted'), { name: 'AbortError' })),
        ),
      ),
  );
  const now = timers.clock.now();
  const flying = accepted(dispatcher.enqueue(write('ns/a', now)));
  const queued = accepted(dispatcher.enqueue(write('ns/a', now)));
  dispatcher.cancel('ns/a', 'pod deleted');
  assert.deepEqual(await queued, { result: 'cancelled', message: 'pod deleted' });
  assert.deepEqual(await flying, { result: 'cancelled', message: 'pod deleted' });
  assert.equal(dispatcher.depth + dispatcher.inFlight, 0);
});

test('the caller aborting its signal cancels a queued write', async () => {
  const { timers, dispatcher, sends } = setup(() => Promise.resolve({ resourceVersion: '1' }), {
    qps: 1,
    burst: 1,
  });
  const now = timers.clock.now();
  accepted(dispatcher.enqueue(write('ns/first', now)));
  const controller = new AbortController();
  const done = accepted(dispatcher.enqueue(write('ns/a', now, { signal: controller.signal })));
  controller.abort(new Error('loop stopped'));
  assert.deepEqual(await done, { result: 'cancelled', message: 'loop stopped' });
  await advance(timers, 5000);
  assert.deepEqual(
    sends.map((s) => s.key),
    ['ns/first'],
  );
});

test('a write whose fence is down is cancelled as leadership lost, never sent', async () => {
  let leading = false;
  const { timers, dispatcher, sends } = setup(() => Promise.resolve({ resourceVersion: '1' }), {
    fence: () => leading,
  });
  const done = accepted(dispatcher.enqueue(write('ns/a', timers.clock.now())));
  assert.deepEqual(await done, { result: 'cancelled', message: 'leadership lost' });
  assert.equal(sends.length, 0);
  leading = true;
  assert.equal(
    (await accepted(dispatcher.enqueue(write('ns/a', timers.clock.now())))).result,
    'succeeded',
  );
});

test('a write the fence kept off the wire (closed as it reached a connection) is cancelled as never sent: no retry, no read-back', async () => {
  const neverSent = Object.assign(
    new Error(
      'leadership lost: removeGate pod ns/a was never sent (the fence closed before it reached a connection)',
    ),
    { fencedBeforeSend: true },
  );
  const readBacks: string[] = [];
  const { timers, dispatcher, sends } = setup(() => Promise.reject(neverSent), {
    readBack: (request) => {
      readBacks.push(request.key);
      return Promise.resolve({ state: 'absent' as const });
    },
  });
  const done = accepted(dispatcher.enqueue(write('ns/a', timers.clock.now())));
  assert.deepEqual(await done, { result: 'cancelled', message: neverSent.message });
  await advance(timers, 60_000);
  assert.equal(sends.length, 1, 'not sent again');
  assert.deepEqual(readBacks, [], 'nothing to read back: it never left the process');
});

test('a full queue refuses, counts the overflow, and wakes whenNotFull when room appears', async () => {
  const releases: (() => void)[] = [];
  const { timers, dispatcher } = setup(
    () => new Promise((resolve) => releases.push(() => resolve({ resourceVersion: '1' }))),
    { capacity: 2, concurrency: 1 },
  );
  const now = timers.clock.now();
  accepted(dispatcher.enqueue(write('ns/a', now)));
  accepted(dispatcher.enqueue(write('ns/b', now)));
  const overflowBefore = await metric('tollgate_dispatch_overflow_total');
  assert.deepEqual(dispatcher.enqueue(write('ns/c', now)), { accepted: false, reason: 'full' });
  assert.equal((await metric('tollgate_dispatch_overflow_total')) - overflowBefore, 1);
  // A newer decision for a queued key still fits: it replaces, it does not add.
  assert.ok(dispatcher.enqueue(write('ns/b', now)).accepted);
  let woke = false;
  const room = dispatcher.whenNotFull().then(() => (woke = true));
  await settle();
  assert.equal(woke, false);
  releases.shift()?.();
  await room;
  assert.ok(dispatcher.enqueue(write('ns/c', now)).accepted);
});

test('the QPS bucket paces sends', async () => {
  const { timers, dispatcher, sends } = setup(() => Promise.resolve({ resourceVersion: '1' }), {
    qps: 2,
    burst: 1,
    concurrency: 4,
  });
  const now = timers.clock.now();
  for (const name of ['a', 'b', 'c', 'd']) dispatcher.enqueue(write(`ns/${name}`, now));
  await advance(timers, 2000);
  assert.deepEqual(
    sends.map((s) => s.at - now),
    [0, 500, 1000, 1500],
  );
});

test('an attempt without an answer is aborted as a timeout and retried', async () => {
  const { timers, dispatcher, sends } = setup(
    (_req, signal, attempt) =>
      attempt === 1
        ? new Promise((_resolve, reject) =>
            signal.addEventListener('abort', () => reject(signal.reason)),
          )
        : Promise.resolve({ resourceVersion: '9' }),
    { attemptTimeoutMs: 1000 },
  );
  const done = accepted(dispatcher.enqueue(write('ns/a', timers.clock.now())));
  await advance(timers, 2000);
  assert.deepEqual(await done, { result: 'succeeded', resourceVersion: '9' });
  assert.equal(sends.length, 2);
});

test('close cancels queued work on request, lets the write in flight finish, and refuses new work', async () => {
  let release!: () => void;
  const { timers, dispatcher } = setup(
    () => new Promise((resolve) => (release = () => resolve({ resourceVersion: '1' }))),
    { concurrency: 1 },
  );
  const now = timers.clock.now();
  const flying = accepted(dispatcher.enqueue(write('ns/a', now)));
  const queued = accepted(dispatcher.enqueue(write('ns/b', now)));
  const closed = dispatcher.close({ cancelQueued: true });
  assert.deepEqual(await queued, { result: 'cancelled', message: 'dispatcher closed' });
  assert.deepEqual(dispatcher.enqueue(write('ns/c', now)), { accepted: false, reason: 'closed' });
  release();
  assert.equal((await flying).result, 'succeeded');
  await closed;
});

test('results are counted by operation and result, with every series pre-created', async () => {
  setup(() => Promise.resolve({ resourceVersion: '1' }));
  const text = await registry.getSingleMetricAsString('tollgate_dispatch_results_total');
  for (const op of ['removeGate', 'resize', 'delete', 'annotate']) {
    for (const result of ['succeeded', 'conflict', 'failed', 'expired', 'cancelled']) {
      assert.match(text, new RegExp(`op="${op}",result="${result}"`));
    }
  }
});

test('a write that needs a retry after a newer decision arrived is not sent again, even when the newer one was withdrawn', async () => {
  const fail: ((error: Error) => void)[] = [];
  const { timers, dispatcher, sends } = setup((req, _signal, attempt) =>
    req.decisionId === older.decisionId && attempt === 1
      ? new Promise((_resolve, reject) => fail.push(reject))
      : Promise.resolve({ resourceVersion: '2' }),
  );
  const now = timers.clock.now();
  const older = write('ns/a', now);
  const olderDone = accepted(dispatcher.enqueue(older));
  await settle();
  const controller = new AbortController();
  const newerDone = accepted(dispatcher.enqueue(write('ns/a', now, { signal: controller.signal })));
  controller.abort(new Error('loop stopped'));
  assert.equal((await newerDone).result, 'cancelled');
  fail.shift()?.(httpError(503));
  await advance(timers, 10_000);
  const result = await olderDone;
  assert.equal(result.result, 'cancelled');
  assert.match(result.result === 'cancelled' ? result.message : '', /superseded/);
  assert.deepEqual(
    sends.map((s) => s.decisionId),
    [older.decisionId],
    'the older decision was sent once and never retried',
  );
});

/** A dispatcher of concurrency 1 whose write to `ns/busy` waits for `release()`. */
function behindABusyWrite(failFirst: readonly string[] = []) {
  let release!: () => void;
  const failed = new Set<string>();
  const { timers, dispatcher, sends } = setup(
    (req) => {
      if (req.key === 'ns/busy')
        return new Promise((resolve) => (release = () => resolve({ resourceVersion: '1' })));
      if (failFirst.includes(req.key) && !failed.has(req.key)) {
        failed.add(req.key);
        return Promise.reject(httpError(500));
      }
      return Promise.resolve({ resourceVersion: '1' });
    },
    { concurrency: 1, capacity: 20 },
  );
  return { timers, dispatcher, sends, release: () => release() };
}

test('a write queued again for a retry keeps its age: once its backoff ends it goes before the writes queued after it', async () => {
  const { timers, dispatcher, sends, release } = behindABusyWrite(['ns/a']);
  const retried = accepted(dispatcher.enqueue(write('ns/a', timers.clock.now())));
  await settle(); // sent, answered 500, queued again behind its backoff
  await advance(timers, 10);
  accepted(dispatcher.enqueue(write('ns/busy', timers.clock.now())));
  await advance(timers, 10);
  for (const key of ['ns/b', 'ns/c']) dispatcher.enqueue(write(key, timers.clock.now()));
  await advance(timers, 1000); // the backoff has ended; ns/busy still holds the one slot
  release();
  await dispatcher.close();
  assert.equal((await retried).result, 'succeeded');
  assert.deepEqual(
    sends.map((s) => s.key),
    ['ns/a', 'ns/busy', 'ns/a', 'ns/b', 'ns/c'],
  );
});

test('a coalesced write keeps the place of the one it replaced, ahead of writes queued after that one', async () => {
  const { timers, dispatcher, sends, release } = behindABusyWrite();
  accepted(dispatcher.enqueue(write('ns/busy', timers.clock.now())));
  dispatcher.enqueue(write('ns/a', timers.clock.now()));
  await advance(timers, 10);
  dispatcher.enqueue(write('ns/b', timers.clock.now()));
  await advance(timers, 10);
  const newer = dispatcher.enqueue(write('ns/a', timers.clock.now()));
  assert.ok(newer.accepted && newer.coalesced);
  release();
  await dispatcher.close();
  assert.equal((await newer.done).result, 'succeeded');
  assert.deepEqual(
    sends.map((s) => s.key),
    ['ns/busy', 'ns/a', 'ns/b'],
  );
});

test('a band, then priority, then the tenant whose turn it is, across many queued writes', async () => {
  const { timers, dispatcher, sends, release } = behindABusyWrite();
  const now = timers.clock.now();
  accepted(dispatcher.enqueue(write('ns/busy', now)));
  for (let i = 0; i < 3; i++) {
    dispatcher.enqueue(write(`a/low${i}`, now, { tenant: 'a', priority: 0 }));
    dispatcher.enqueue(write(`b/low${i}`, now, { tenant: 'b', priority: 0 }));
  }
  dispatcher.enqueue(write('b/high', now, { tenant: 'b', priority: 5 }));
  dispatcher.enqueue(write('a/cancel', now, { tenant: 'a', op: { type: 'delete', reason: 'x' } }));
  release();
  await dispatcher.close();
  assert.deepEqual(
    sends.map((s) => s.key),
    ['ns/busy', 'a/cancel', 'b/high', 'a/low0', 'b/low0', 'a/low1', 'b/low1', 'a/low2', 'b/low2'],
  );
});
