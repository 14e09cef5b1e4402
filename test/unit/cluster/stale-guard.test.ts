import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LiveReader, StaleGuard, type StaleGuardPolicy } from '../../../src/cluster/stale-guard.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { registry } from '../../../src/observe/metrics.ts';

const policy: StaleGuardPolicy = {
  maxCacheLagMs: 2000,
  destructive: ['Cancel', 'ExpireRelease', 'Rollback'],
  requeue: { baseMs: 100, maxMs: 1000 },
  liveReads: { qps: 2, burst: 2, breaker: { failureThreshold: 3, openMs: 5000 } },
};

function synced(): StaleGuard {
  const guard = new StaleGuard({ policy, loop: 'gate-release' });
  guard.markSynced();
  return guard;
}

async function value(name: string, labels: Record<string, string> = {}): Promise<number> {
  const found = (await registry.getSingleMetric(name)?.get())?.values.find((v) =>
    Object.entries(labels).every(([k, val]) => (v.labels as Record<string, unknown>)[k] === val),
  );
  return found?.value ?? 0;
}

const checks: {
  name: string;
  written?: string;
  cached: string | undefined;
  fresh: boolean;
  reason?: string;
}[] = [
  { name: 'an object tollgate never wrote is fresh', cached: '5', fresh: true },
  {
    name: 'a cache that holds exactly the written version is fresh',
    written: '100',
    cached: '100',
    fresh: true,
  },
  { name: 'a cache past the written version is fresh', written: '100', cached: '250', fresh: true },
  {
    name: 'a cache behind the written version is stale',
    written: '100',
    cached: '99',
    fresh: false,
    reason: 'behind',
  },
  {
    name: 'versions are compared as numbers, not as strings ("9" is behind "10")',
    written: '10',
    cached: '9',
    fresh: false,
    reason: 'behind',
  },
  {
    name: 'versions beyond 2^53 are compared exactly',
    written: '9007199254740993',
    cached: '9007199254740992',
    fresh: false,
    reason: 'behind',
  },
  {
    name: 'a non-numeric cached version is unknown, not fresh',
    written: '100',
    cached: 'abc',
    fresh: false,
    reason: 'unknown',
  },
  {
    name: 'a non-numeric written version is unknown, not fresh',
    written: 'xyz',
    cached: '100',
    fresh: false,
    reason: 'unknown',
  },
  {
    name: 'a missing cached version is unknown, not fresh',
    written: '100',
    cached: undefined,
    fresh: false,
    reason: 'unknown',
  },
];

for (const row of checks) {
  test(row.name, () => {
    const guard = synced();
    if (row.written !== undefined) guard.recordWrite('ns/p', row.written);
    const result = guard.check('ns/p', row.cached);
    assert.equal(result.fresh, row.fresh);
    if (!result.fresh) assert.equal(result.reason, row.reason);
  });
}

test('a stale key backs off exponentially up to the cap, and only that key waits', async () => {
  // Each check when the key's backoff is due (a check inside it waits, uncounted:
  // stale-guard-backoff.test.ts); no live read asked within these six.
  const clock = new ManualClock();
  const guard = new StaleGuard({ policy, loop: 'gate-release', clock, liveReadAfterSkips: 10 });
  guard.markSynced();
  const skipsBefore = await value('tollgate_stale_skips_total', { loop: 'gate-release' });
  guard.recordWrite('ns/slow', '100');
  const delays = [1, 2, 3, 4, 5, 6].map(() => {
    const result = guard.check('ns/slow', '90');
    assert.equal(result.fresh, false);
    if (!result.fresh) clock.advance(result.retryAfterMs);
    return result.fresh ? 0 : result.retryAfterMs;
  });
  assert.deepEqual(delays, [100, 200, 400, 800, 1000, 1000]);
  assert.equal(guard.check('ns/other', '1').fresh, true);
  assert.equal(
    (await value('tollgate_stale_skips_total', { loop: 'gate-release' })) - skipsBefore,
    6,
  );
});

test('an entry is forgotten once the cache has caught up, so a later older version is fresh again', () => {
  const guard = synced();
  guard.recordWrite('ns/p', '100');
  assert.equal(guard.check('ns/p', '100').fresh, true);
  assert.equal(guard.size, 0);
});

test('an entry is forgotten when the object is deleted', () => {
  const guard = synced();
  guard.recordWrite('ns/p', '100');
  guard.forget('ns/p');
  assert.equal(guard.size, 0);
  assert.equal(guard.check('ns/p', '1').fresh, true);
});

test('memory stays bounded: the oldest write is forgotten beyond maxEntries', () => {
  const guard = new StaleGuard({ policy, loop: 'resize', restored: false, maxEntries: 3 });
  for (const name of ['a', 'b', 'c', 'd']) guard.recordWrite(`ns/${name}`, '100');
  assert.equal(guard.size, 3);
  assert.equal(guard.check('ns/a', '1').fresh, true, 'evicted');
  assert.equal(guard.check('ns/d', '1').fresh, false);
});

test('after a restart nothing is fresh until the view has synced', () => {
  const guard = new StaleGuard({ policy, loop: 'gate-release' });
  assert.equal(guard.restored, true);
  const before = guard.check('ns/never-written', '5');
  assert.equal(before.fresh, false);
  assert.equal(!before.fresh && before.reason, 'restored');
  guard.markSynced();
  assert.equal(guard.check('ns/never-written', '5').fresh, true);
});

test('isFresh reads the pod resourceVersion for the loops', () => {
  const guard = synced();
  guard.recordWrite('ns/p', '20');
  assert.equal(guard.isFresh('ns/p', { metadata: { resourceVersion: '19' } }), false);
  assert.equal(guard.isFresh('ns/p', { metadata: { resourceVersion: '20' } }), true);
});

const liveDecisions: {
  name: string;
  kind: 'Release' | 'Cancel' | 'Rollback';
  lagMs: number | undefined;
  restored?: boolean;
  unknownKey?: boolean;
  action: string;
}[] = [
  {
    name: 'a non-destructive decision proceeds even with unknown lag',
    kind: 'Release',
    lagMs: undefined,
    action: 'proceed',
  },
  {
    name: 'a destructive decision with a fresh cache proceeds',
    kind: 'Cancel',
    lagMs: 500,
    action: 'proceed',
  },
  {
    name: 'a destructive decision with unknown cache lag takes a live read',
    kind: 'Cancel',
    lagMs: undefined,
    action: 'liveRead',
  },
  {
    name: 'a destructive decision with lag beyond the threshold takes a live read',
    kind: 'Rollback',
    lagMs: 2001,
    action: 'liveRead',
  },
  {
    name: 'a destructive decision on a key of unknown freshness takes a live read',
    kind: 'Cancel',
    lagMs: 10,
    unknownKey: true,
    action: 'liveRead',
  },
  {
    name: 'a destructive decision right after a restart is held until the view syncs',
    kind: 'Cancel',
    lagMs: 0,
    restored: true,
    action: 'hold',
  },
  {
    name: 'a non-destructive decision after a restart is not held by requireLive',
    kind: 'Release',
    lagMs: 0,
    restored: true,
    action: 'proceed',
  },
];

for (const row of liveDecisions) {
  test(row.name, () => {
    const guard = new StaleGuard({ policy, loop: 'gate-release', restored: row.restored ?? false });
    if (row.unknownKey) {
      guard.recordWrite('ns/p', '10');
      guard.check('ns/p', 'not-a-number');
    }
    const decision = guard.requireLive('ns/p', row.kind, row.lagMs);
    assert.equal(decision.action, row.action);
    if (decision.action !== 'proceed') assert.ok(decision.reason.length > 0);
  });
}

test('live reads spend a QPS budget and refuse with the wait when it is spent', async () => {
  const clock = new ManualClock(0);
  const reader = new LiveReader({ read: async () => ({ ok: 1 }), policy: policy.liveReads, clock });
  assert.equal((await reader.read('ns', 'a')).ok, true);
  assert.equal((await reader.read('ns', 'a')).ok, true);
  const third = await reader.read('ns', 'a');
  assert.equal(third.ok, false);
  assert.match(third.ok ? '' : third.reason, /budget/);
  assert.equal(third.ok ? 0 : third.retryAfterMs, 500);
  clock.advance(500);
  assert.equal((await reader.read('ns', 'a')).ok, true);
});

test('the breaker opens after consecutive failures, lets one probe through after openMs, and closes on success', async () => {
  const clock = new ManualClock(0);
  let failing = true;
  let reads = 0;
  const reader = new LiveReader({
    read: async () => {
      reads += 1;
      if (failing) throw new Error('503');
      return { ok: 1 };
    },
    policy: { qps: 100, burst: 100, breaker: { failureThreshold: 3, openMs: 5000 } },
    clock,
  });
  for (let i = 0; i < 3; i++) assert.equal((await reader.read('ns', 'a')).ok, false);
  assert.equal(reader.state, 'open');
  assert.equal(await value('tollgate_live_read_breaker_state'), 2);
  const refused = await reader.read('ns', 'a');
  assert.equal(reads, 3, 'no read sent while open');
  assert.match(refused.ok ? '' : refused.reason, /breaker open/);
  assert.equal(refused.ok ? 0 : refused.retryAfterMs, 5000);
  clock.advance(5000);
  assert.equal(reader.state, 'half-open');
  // A failed probe opens it again.
  assert.equal((await reader.read('ns', 'a')).ok, false);
  assert.equal(reader.state, 'open');
  clock.advance(5000);
  failing = false;
  assert.equal((await reader.read('ns', 'a')).ok, true);
  assert.equal(reader.state, 'closed');
  assert.equal(await value('tollgate_live_read_breaker_state'), 0);
});

test('only one probe is in flight while half-open', async () => {
  const clock = new ManualClock(0);
  let release!: () => void;
  let fail = true;
  const reader = new LiveReader({
    read: () =>
      fail
        ? Promise.reject(new Error('down'))
        : new Promise<object>((resolve) => (release = () => resolve({}))),
    policy: { qps: 100, burst: 100, breaker: { failureThreshold: 1, openMs: 1000 } },
    clock,
  });
  await reader.read('ns', 'a');
  clock.advance(1000);
  fail = false;
  const probe = reader.read('ns', 'a');
  const second = await reader.read('ns', 'b');
  assert.equal(second.ok, false);
  assert.match(second.ok ? '' : second.reason, /probe in flight/);
  release();
  assert.equal((await probe).ok, true);
});

test('a live read of a deleted object answers ok with no object and counts not_found', async () => {
  const before = await value('tollgate_live_reads_total', { result: 'not_found' });
  const reader = new LiveReader({
    read: async () => undefined,
    policy: policy.liveReads,
    clock: new ManualClock(0),
  });
  assert.deepEqual(await reader.read('ns', 'gone'), { ok: true, object: undefined });
  assert.equal((await value('tollgate_live_reads_total', { result: 'not_found' })) - before, 1);
});

test('requireLive without a lag from the caller uses the last observed lag while it is recent', () => {
  const clock = new ManualClock(0);
  const guard = new StaleGuard({
    policy,
    loop: 'gate-release',
    restored: false,
    clock,
    cacheLagValidForMs: 10_000,
  });
  assert.equal(guard.requireLive('ns/p', 'Cancel', undefined).action, 'liveRead', 'unknown');
  guard.observeCacheLag(40);
  assert.equal(guard.requireLive('ns/p', 'Cancel', undefined).action, 'proceed', 'measured small');
  guard.observeCacheLag(2_500);
  const slow = guard.requireLive('ns/p', 'Cancel', undefined);
  assert.equal(slow.action, 'liveRead', 'measured beyond maxCacheLag');
  assert.match(slow.action === 'liveRead' ? slow.reason : '', /2500 ms is beyond 2000 ms/);
  assert.equal(
    guard.requireLive('ns/p', 'Cancel', 10).action,
    'proceed',
    "the caller's measurement wins",
  );
  clock.advance(10_001);
  assert.equal(
    guard.requireLive('ns/p', 'Cancel', undefined).action,
    'liveRead',
    'an old measurement no longer stands',
  );
});
