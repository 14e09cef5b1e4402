/**
 * Per-key stale backoff: a key the cache is behind on waits out its own backoff (a pass
 * in between neither decides on it nor counts a skip), and after N consecutive counted
 * skips the next due check asks for one live read to decide. Injected clock only.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StaleGuard, type Freshness } from '../../../src/cluster/stale-guard.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { registry } from '../../../src/observe/metrics.ts';

const policy = {
  maxCacheLagMs: 2_000,
  destructive: ['Cancel', 'Rollback'] as never[],
  requeue: { baseMs: 100, maxMs: 1_000 },
  liveReads: { qps: 2, burst: 2, breaker: { failureThreshold: 3, openMs: 5_000 } },
};

function guardBehind(liveReadAfterSkips: number, loop = 'backoff-test') {
  const clock = new ManualClock();
  const guard = new StaleGuard({ policy, loop, restored: false, clock, liveReadAfterSkips });
  guard.recordWrite('ns/slow', '100');
  return { guard, clock };
}

async function skips(loop: string): Promise<number> {
  const values = (await registry.getSingleMetric('tollgate_stale_skips_total')?.get())?.values;
  return values?.find((v) => v.labels.loop === loop)?.value ?? 0;
}

const summary = (f: Freshness): string =>
  f.fresh
    ? 'fresh'
    : f.decideLive
      ? 'live'
      : f.waiting
        ? `wait ${f.retryAfterMs}`
        : `skip ${f.retryAfterMs}`;

test('a key checked again inside its backoff waits out the rest without counting a skip', async () => {
  const { guard, clock } = guardBehind(5, 'backoff-inside');
  const before = await skips('backoff-inside');
  const seen = [guard.check('ns/slow', '90')];
  clock.advance(30);
  seen.push(guard.check('ns/slow', '90'));
  clock.advance(70);
  seen.push(guard.check('ns/slow', '90'));
  assert.deepEqual(seen.map(summary), ['skip 100', 'wait 70', 'skip 200']);
  assert.equal((await skips('backoff-inside')) - before, 2, 'only due checks count');
});

test('each due check doubles the key backoff up to the cap, and another key is not delayed', () => {
  const { guard, clock } = guardBehind(10);
  const seen: string[] = [];
  for (let i = 0; i < 6; i += 1) {
    const result = guard.check('ns/slow', '90');
    seen.push(summary(result));
    if (!result.fresh) clock.advance(result.retryAfterMs);
  }
  assert.deepEqual(seen, [
    'skip 100',
    'skip 200',
    'skip 400',
    'skip 800',
    'skip 1000',
    'skip 1000',
  ]);
  assert.equal(guard.check('ns/other', '1').fresh, true);
});

const liveAfter: { name: string; n: number; expected: string[] }[] = [
  {
    name: 'after 3 consecutive skips the next due check asks for one live read, then counting starts again',
    n: 3,
    expected: [
      'skip 100',
      'skip 200',
      'skip 400',
      'live',
      'skip 100',
      'skip 200',
      'skip 400',
      'live',
    ],
  },
  {
    name: 'with N = 1 every second due check is a live read',
    n: 1,
    expected: ['skip 100', 'live', 'skip 100', 'live'],
  },
];

for (const row of liveAfter) {
  test(row.name, () => {
    const { guard, clock } = guardBehind(row.n);
    const seen: string[] = [];
    for (const _ of row.expected) {
      const result = guard.check('ns/slow', '90');
      seen.push(summary(result));
      if (!result.fresh) clock.advance(result.retryAfterMs);
    }
    assert.deepEqual(seen, row.expected);
  });
}

test('a cache that catches up inside the backoff is fresh at once, the wait notwithstanding', () => {
  const { guard } = guardBehind(5);
  assert.equal(guard.check('ns/slow', '90').fresh, false);
  assert.equal(guard.check('ns/slow', '100').fresh, true);
  assert.equal(guard.size, 0);
});

test('the next due time of the soonest waiting key is what a loop requeues at', () => {
  const { guard, clock } = guardBehind(5);
  guard.recordWrite('ns/fast', '50');
  const slow = guard.check('ns/slow', '90');
  clock.advance(100);
  guard.check('ns/slow', '90');
  const fast = guard.check('ns/fast', '40');
  assert.equal(!slow.fresh && slow.retryAfterMs, 100);
  assert.equal(!fast.fresh && fast.retryAfterMs, 100, 'ns/fast starts its own backoff');
  clock.advance(50);
  const again = guard.check('ns/slow', '90');
  assert.equal(summary(again), 'wait 150', 'ns/slow waits out its own 200 ms');
});

test('a live read that finds tollgate write in the API ends the wait; one that finds the object gone forgets it', () => {
  const { guard } = guardBehind(5);
  guard.recordWrite('ns/gone', '70');
  guard.liveDecided('ns/slow', '120');
  guard.liveDecided('ns/gone', undefined);
  assert.equal(guard.size, 0);
  assert.equal(guard.longestWaitMs(), 0);
});

test('a live read still behind tollgate write keeps the key waiting', () => {
  const { guard } = guardBehind(5);
  guard.check('ns/slow', '90');
  guard.liveDecided('ns/slow', '95');
  assert.equal(guard.size, 1);
});

test('liveReadAfterSkips must be a whole number of at least 1', () => {
  for (const bad of [0, -1, 1.5, Number.NaN]) {
    assert.throws(
      () => new StaleGuard({ policy, loop: 'x', liveReadAfterSkips: bad }),
      /liveReadAfterSkips/,
    );
  }
});
