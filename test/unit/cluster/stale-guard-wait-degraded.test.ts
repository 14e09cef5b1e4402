/**
 * Freshness is degraded not only while live reads are refused (the breaker), but also
 * while a pod has waited longer than `degradedAfterMs` for the cache to show tollgate's
 * own last write to it: the informer is stuck or far behind, and a destructive act on
 * that pod cannot be decided from the cache. Back by itself once the pod caught up (or
 * is gone). The health says why, and changes (gauge, Event) only when the whole state
 * flips: a breaker and a long wait at once make one Event in and one out.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FreshnessHealth, LiveReader, StaleGuard } from '../../../src/cluster/stale-guard.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { registry } from '../../../src/observe/metrics.ts';

const policy = {
  maxCacheLagMs: 5_000,
  destructive: ['Cancel'] as never[],
  requeue: { baseMs: 1_000, maxMs: 10_000 },
  liveReads: { qps: 100, burst: 100, breaker: { failureThreshold: 1, openMs: 5_000 } },
};
const limitMs = 60_000;

async function degradedGauge(): Promise<number | undefined> {
  return (await registry.getSingleMetric('tollgate_stale_guard_degraded')?.get())?.values[0]?.value;
}

function world() {
  const clock = new ManualClock();
  const changes: string[] = [];
  const health = new FreshnessHealth({
    onChange: (degraded) => changes.push(degraded === undefined ? 'recovered' : 'degraded'),
  });
  const guard = new StaleGuard({
    policy: policy as never,
    loop: 'gate-release',
    clock,
    health,
    degradedAfterMs: limitMs,
    liveReadAfterSkips: 1_000,
  });
  guard.markSynced();
  guard.recordWrite('ns/a', '200');
  /** The pass of a loop every `stepMs` for `forMs`, the cache holding `cached` for ns/a. */
  const passes = (forMs: number, cached: string, stepMs = 1_000): void => {
    for (let t = 0; t < forMs; t += stepMs) {
      guard.check('ns/a', cached);
      clock.advance(stepMs);
    }
    guard.check('ns/a', cached);
  };
  return { clock, health, guard, changes, passes };
}

const rows: {
  name: string;
  run: (w: ReturnType<typeof world>) => void | Promise<void>;
  degraded: RegExp | undefined;
  changes: string[];
}[] = [
  {
    name: 'a pod behind for less than the limit is not degraded',
    run: (w) => w.passes(limitMs - 11_000, '150'),
    degraded: undefined,
    changes: [],
  },
  {
    name: 'a pod behind for longer than the limit makes freshness degraded, naming the loop and the wait',
    run: (w) => w.passes(limitMs + 11_000, '150'),
    degraded:
      /gate-release: a pod has waited \d+ s for the cache to show tollgate's own write \(limit 60 s\)/,
    changes: ['degraded'],
  },
  {
    name: 'the pod catching up ends the degraded state by itself',
    run: (w) => {
      w.passes(limitMs + 11_000, '150');
      w.guard.check('ns/a', '200');
    },
    degraded: undefined,
    changes: ['degraded', 'recovered'],
  },
  {
    name: 'the pod deleted ends the degraded state by itself',
    run: (w) => {
      w.passes(limitMs + 11_000, '150');
      w.guard.forget('ns/a');
    },
    degraded: undefined,
    changes: ['degraded', 'recovered'],
  },
  {
    name: 'an open breaker and a long wait at once: one change in, and out only when both cleared',
    run: async (w) => {
      const reader = new LiveReader<object>({
        read: async () => {
          throw new Error('connect ECONNREFUSED');
        },
        policy: policy.liveReads,
        clock: w.clock,
        health: w.health,
      });
      await reader.read('ns', 'x');
      w.passes(limitMs + 11_000, '150');
      w.health.set(undefined); // a live read answered again: the breaker closed
      assert.match(w.health.degraded ?? '', /gate-release: a pod has waited/, 'the wait holds it');
      assert.deepEqual(w.changes, ['degraded'], 'no change while one cause remains');
      w.guard.check('ns/a', '200');
    },
    degraded: undefined,
    changes: ['degraded', 'recovered'],
  },
];

for (const row of rows) {
  test(row.name, async () => {
    const w = world();
    await row.run(w);
    if (row.degraded) assert.match(w.health.degraded ?? '(not degraded)', row.degraded);
    else assert.equal(w.health.degraded, undefined);
    assert.equal(await degradedGauge(), row.degraded ? 1 : 0);
    assert.deepEqual(w.changes, row.changes);
  });
}
