/**
 * The stale-guard's visible state: the longest any key has waited for the cache to catch
 * up with tollgate's own write (an alert watches it), and whether a new term's catch-up
 * barrier holds.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StaleGuard } from '../../../src/cluster/stale-guard.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { registry } from '../../../src/observe/metrics.ts';

const policy = {
  maxCacheLagMs: 5_000,
  destructive: ['Cancel'] as never[],
  requeue: { baseMs: 1_000, maxMs: 30_000 },
  liveReads: { qps: 5, burst: 10, breaker: { failureThreshold: 5, openMs: 30_000 } },
};

async function gauge(name: string, loop: string): Promise<number | undefined> {
  const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  return values.find((v) => v.labels.loop === loop)?.value;
}

test('the longest wait of any stale key is a gauge per loop, back to 0 once the cache caught up', async () => {
  const clock = new ManualClock();
  const guard = new StaleGuard({ policy: policy as never, loop: 'wait-test', clock });
  guard.markSynced();
  guard.recordWrite('ns/a', '200');
  guard.recordWrite('ns/b', '300');
  assert.equal(guard.check('ns/a', '150').fresh, false);
  clock.advance(2_000);
  assert.equal(guard.check('ns/b', '250').fresh, false);
  clock.advance(5_000);
  assert.equal(guard.check('ns/a', '160').fresh, false, 'still behind: the wait goes on');
  assert.equal(await gauge('tollgate_stale_longest_wait_seconds', 'wait-test'), 7);
  assert.equal(guard.check('ns/a', '200').fresh, true);
  assert.equal(await gauge('tollgate_stale_longest_wait_seconds', 'wait-test'), 5, 'ns/b waits on');
  assert.equal(guard.check('ns/b', '300').fresh, true);
  assert.equal(await gauge('tollgate_stale_longest_wait_seconds', 'wait-test'), 0);
});

test('a term catch-up barrier shows as a gauge while it holds', async () => {
  const guard = new StaleGuard({
    policy: policy as never,
    loop: 'barrier-test',
    clock: new ManualClock(),
  });
  guard.markSynced();
  assert.equal(await gauge('tollgate_stale_guard_catching_up', 'barrier-test'), 0);
  guard.beginCatchUp('10');
  assert.equal(await gauge('tollgate_stale_guard_catching_up', 'barrier-test'), 1);
  guard.observeViewRevision('10');
  assert.equal(await gauge('tollgate_stale_guard_catching_up', 'barrier-test'), 0);
});
