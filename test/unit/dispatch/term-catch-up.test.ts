/**
 * A new leader term starts with an empty written-version map: the previous leader's last
 * writes may not be in this replica's cache yet. Until the view has caught up with a
 * revision read after the term began, destructive acts take a live read (bounded by the
 * live-read budget); non-destructive writes carry their own resourceVersion preconditions.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StaleGuard } from '../../../src/cluster/stale-guard.ts';
import { ManualClock } from '../../../src/lib/clock.ts';

const policy = {
  maxCacheLagMs: 5_000,
  destructive: ['Cancel', 'Rollback'] as never[],
  requeue: { baseMs: 1_000, maxMs: 30_000 },
  liveReads: { qps: 5, burst: 10, breaker: { failureThreshold: 5, openMs: 30_000 } },
};

function guard(): StaleGuard {
  const g = new StaleGuard({
    policy: policy as never,
    loop: 'gate-release',
    clock: new ManualClock(),
  });
  g.markSynced();
  g.observeCacheLag(10);
  return g;
}

test('before a term, a destructive act with a small cache lag proceeds from the cache', () => {
  assert.equal(guard().requireLive('ns/p', 'Cancel', 10).action, 'proceed');
});

test('a new term holds destructive acts to live reads until the view reaches the revision read after the term began', () => {
  const g = guard();
  g.beginCatchUp('1000');
  const during = g.requireLive('ns/p', 'Cancel', 10);
  assert.equal(during.action, 'liveRead');
  assert.match(
    (during as { reason: string }).reason,
    /new leader term: the view has not reached revision 1000/,
  );
  g.observeViewRevision('999');
  assert.equal(g.requireLive('ns/p', 'Cancel', 10).action, 'liveRead');
  g.observeViewRevision('1000');
  assert.equal(g.requireLive('ns/p', 'Cancel', 10).action, 'proceed');
});

test('until the revision is known, a new term takes live reads for every destructive act', () => {
  const g = guard();
  g.beginCatchUp(undefined);
  assert.equal(g.requireLive('ns/p', 'Rollback', 10).action, 'liveRead');
  g.observeViewRevision('5000');
  assert.equal(
    g.requireLive('ns/p', 'Rollback', 10).action,
    'liveRead',
    'no target yet: still unknown',
  );
  g.beginCatchUp('4000');
  assert.equal(
    g.requireLive('ns/p', 'Rollback', 10).action,
    'proceed',
    'the view is already past it',
  );
});

test('the catch-up barrier never touches non-destructive acts', () => {
  const g = guard();
  g.beginCatchUp('1000');
  assert.equal(g.requireLive('ns/p', 'Release' as never, 10).action, 'proceed');
});
