import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CacheLagMeter, measureCacheLag } from '../../../src/cluster/cache-lag.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import type { WriteOperation, WriteRequest } from '../../../src/dispatch/types.ts';

function meter(options: { validForMs?: number; maxPending?: number } = {}) {
  const clock = new ManualClock(1_000);
  const measured: number[] = [];
  const m = new CacheLagMeter({ clock, onMeasured: (ms) => measured.push(ms), ...options });
  return { clock, m, measured };
}

test('a write is measured from its answer until the informer reports its resourceVersion or a later one', () => {
  const { clock, m, measured } = meter();
  m.progressed('100');
  m.expect('105');
  clock.advance(30);
  m.progressed('104');
  assert.deepEqual(measured, [], 'an older version does not show the write');
  clock.advance(20);
  m.progressed('107');
  assert.deepEqual(measured, [50]);
  assert.equal(m.pending, 0);
  assert.equal(m.lagMs(), 50, 'the last measured lag stands while recent');
});

test('while a write is not shown, the lag is the age of the oldest one and grows', () => {
  const { clock, m } = meter();
  m.progressed('100');
  m.progressed('101');
  m.expect('110');
  clock.advance(5);
  m.expect('120');
  clock.advance(2_995);
  assert.equal(m.lagMs(), 3_000, 'oldest unshown write answered 3 s ago');
  m.progressed('115');
  assert.equal(m.lagMs(), 3_000, 'the first is shown (measured 3 s); the second is 2 995 ms old');
  clock.advance(1_000);
  assert.equal(m.lagMs(), 3_995);
});

test('cases of one meter', () => {
  const cases: {
    name: string;
    run: (t: ReturnType<typeof meter>) => void;
    lagMs: number | undefined;
    measured: number[];
  }[] = [
    {
      name: 'with no write the lag is unknown',
      run: () => undefined,
      lagMs: undefined,
      measured: [],
    },
    {
      name: 'an event that arrived before the answer was processed counts as no lag',
      run: ({ m }) => {
        m.progressed('200');
        m.expect('199');
      },
      lagMs: 0,
      measured: [0],
    },
    {
      name: 'a measurement older than validForMs no longer stands: unknown again',
      run: ({ m, clock }) => {
        m.expect('10');
        clock.advance(40);
        m.progressed('10');
        clock.advance(60_001);
      },
      lagMs: undefined,
      measured: [40],
    },
    {
      name: 'a non-numeric resourceVersion is not measured (never guessed)',
      run: ({ m, clock }) => {
        m.expect('abc');
        clock.advance(10_000);
        m.progressed('xyz');
      },
      lagMs: undefined,
      measured: [],
    },
    {
      name: 'writes answered out of order are each measured when their version is reached',
      run: ({ m, clock }) => {
        m.expect('30');
        clock.advance(10);
        m.expect('20');
        clock.advance(10);
        m.progressed('25');
        clock.advance(10);
        m.progressed('30');
      },
      lagMs: 30,
      measured: [10, 30],
    },
    {
      name: 'a relist past many writes measures them all at once',
      run: ({ m, clock }) => {
        for (const rv of ['1', '2']) m.expect(rv);
        clock.advance(7);
        m.progressed('1000');
      },
      lagMs: 7,
      measured: [7, 7],
    },
    {
      name: 'beyond maxPending new writes are not probed; the oldest still define the age',
      run: ({ m, clock }) => {
        m.expect('1');
        m.expect('2');
        clock.advance(100);
        m.expect('3');
        clock.advance(100);
      },
      lagMs: 200,
      measured: [],
    },
  ];
  for (const c of cases) {
    const t = meter({ validForMs: 60_000, maxPending: 2 });
    c.run(t);
    assert.equal(t.m.lagMs(), c.lagMs, c.name);
    assert.deepEqual(t.measured, c.measured, c.name);
  }
});

test('measureCacheLag probes pod patches and resizes, not deletes, Events or failed writes', async () => {
  const { m } = meter();
  let answer = 0;
  const executor = measureCacheLag(async (request) => {
    if (request.key === 'fails') throw new Error('boom');
    answer += 1;
    return { resourceVersion: String(answer) };
  }, m);
  const request = (op: WriteOperation, key = 'ns/p'): WriteRequest => ({
    key,
    target: { namespace: 'ns', name: 'p', uid: 'u', resourceVersion: '0' },
    op,
    priority: 1,
    tenant: 't',
    deadline: Number.MAX_SAFE_INTEGER,
    decisionId: 'd',
  });
  const signal = new AbortController().signal;
  await executor(request({ type: 'removeGate', gate: 'g', gateIndex: 0 }), signal);
  await executor(request({ type: 'annotate', annotations: {} }), signal);
  await executor(request({ type: 'resize', containers: [] }), signal);
  assert.equal(m.pending, 3);
  await executor(request({ type: 'delete', reason: 'r' }), signal);
  await executor(
    request({ type: 'event', event: { action: 'series', count: 2, lastObservedTime: 'x' } }),
    signal,
  );
  await assert.rejects(executor(request({ type: 'annotate', annotations: {} }, 'fails'), signal));
  assert.equal(m.pending, 3);
});
