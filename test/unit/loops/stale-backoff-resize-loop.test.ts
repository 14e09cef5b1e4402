/**
 * The resize loop with the real StaleGuard and an injected clock: a stale pod waits its
 * own backoff (a pass inside it records nothing again), after N consecutive skips one
 * live read decides (the pod is decided again on the live object), and the run switch
 * that turns the skip path off for rollback sends the Rollback on a live read while the
 * skip is still counted. In-memory view, dispatcher, audit and Prometheus.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { startResizeLoop, type ResizeLoopDeps } from '../../../src/loops/resize.ts';
import { StaleGuard } from '../../../src/cluster/stale-guard.ts';
import type { ClusterView } from '../../../src/cluster/types.ts';
import type { Dispatcher, WriteRequest } from '../../../src/dispatch/types.ts';
import type { Policy } from '../../../src/policy/model.ts';
import type { PrometheusClient } from '../../../src/signals/prometheus.ts';
import { lastGoodAnnotation, stateAnnotation } from '../../../src/decide/resize-state.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { aResizePolicy, aRunningPod, testStateKeys } from '../../builders/resize.ts';
import { recordingAudit } from '../../support/recording-audit.ts';

const key = 'team-a/web-0';
const staleness = {
  maxCacheLagMs: 60_000,
  destructive: ['Rollback'],
  requeue: { baseMs: 100, maxMs: 800 },
  liveReads: { qps: 5, burst: 5, breaker: { failureThreshold: 3, openMs: 5_000 } },
} as unknown as Policy['staleness'];

const policy = (): Policy => ({
  commit: 'abc',
  settings: {} as Policy['settings'],
  tenants: new Map([['team-a', { name: 'team-a', namespaces: ['team-a'] } as never]]),
  gatePolicies: [],
  resizePolicies: [aResizePolicy()],
  staleness,
  approvals: [],
});

/** A pod whose memory tollgate lowered, OOMKilled since: the plan is a Rollback. */
function harmedPod(clock: ManualClock): V1Pod {
  const now = clock.now();
  return aRunningPod('web-0', 'team-a')
    .container('app', { cpu: '500m', memory: '128Mi' })
    .sealed(lastGoodAnnotation, {
      containers: { app: { requests: { cpu: '500m', memory: '256Mi' } } },
    })
    .sealed(stateAnnotation, {
      attempts: 1,
      requestedAt: now - 200_000,
      direction: { memory: 'down' },
      restarts: { app: 0 },
      target: { containers: { app: { requests: { cpu: '500m', memory: '128Mi' } } } },
    })
    .oomKilled('app', new Date(now - 5_000).toISOString())
    .obj();
}

const busyPod = () =>
  aRunningPod('web-0', 'team-a').container('app', { cpu: '500m', memory: '256Mi' }).obj();

function world(pod: (clock: ManualClock) => V1Pod, extra: Partial<ResizeLoopDeps> = {}) {
  const clock = new ManualClock();
  const cached = pod(clock);
  const view: ClusterView = {
    synced: true,
    whenSynced: async () => undefined,
    pods: () => [cached],
    pod: () => cached,
    nodes: () => [],
    object: () => undefined,
    lastResourceVersion: () => undefined,
    onChange: () => () => undefined,
  };
  const requests: WriteRequest[] = [];
  const dispatcher: Dispatcher = {
    enqueue(request) {
      requests.push(request);
      return {
        accepted: true,
        coalesced: false,
        done: Promise.resolve({
          result: 'succeeded',
          resourceVersion: String(900 + requests.length),
        }),
      };
    },
    whenNotFull: async () => undefined,
    cancel: () => undefined,
    depth: 0,
    close: async () => undefined,
  };
  const { audit, recorded } = recordingAudit();
  const prometheus: PrometheusClient = {
    instant: async () => [],
    range: async (_q, start, end, step) => [
      {
        labels: { pod: 'web-0' },
        samples: Array.from({ length: Math.floor((end - start) / step) + 1 }, (_, i) => ({
          at: start + i * step,
          value: 500,
        })),
      },
    ],
  };
  const guard = new StaleGuard({
    policy: staleness,
    loop: 'resize',
    restored: false,
    clock,
    liveReadAfterSkips: 1,
  });
  // Tollgate wrote resourceVersion 200; the view still holds 100.
  guard.recordWrite(key, '200');
  let liveReads = 0;
  const loop = startResizeLoop({
    view,
    policy,
    dispatcher,
    audit,
    prometheus,
    intervalMs: 3_600_000,
    clock,
    stateKeys: testStateKeys,
    staleGuard: guard,
    cacheLagMs: () => 0,
    readPod: async () => {
      liveReads += 1;
      const live = structuredClone(cached) as V1Pod;
      live.metadata!.resourceVersion = '250';
      return live;
    },
    ...extra,
  });
  return { clock, guard, loop, requests, recorded, liveReads: () => liveReads };
}

async function resizeSkips(): Promise<number> {
  const values = (await registry.getSingleMetric('tollgate_stale_skips_total')?.get())?.values;
  return values?.find((v) => v.labels.loop === 'resize')?.value ?? 0;
}

test('a stale pod waits its own backoff; a pass inside it records nothing again', async () => {
  const w = world(() => busyPod());
  const first = await w.loop.pass();
  w.clock.advance(40);
  const second = await w.loop.pass();
  await w.loop.stop();
  assert.equal(first.skipped.get(key), 'stale');
  assert.equal(first.staleRetryAfterMs, 100);
  assert.equal(second.skipped.get(key), 'stale');
  assert.equal(second.staleRetryAfterMs, 60, 'the rest of its own backoff');
  assert.equal(w.recorded.filter((d) => d.kind === 'SkipStale').length, 1);
  assert.equal(w.requests.length, 0);
});

test('after N consecutive skips one live read decides: the pod is decided again on the live object', async () => {
  const w = world(() => busyPod());
  const first = await w.loop.pass();
  w.clock.advance(first.staleRetryAfterMs ?? 0);
  const second = await w.loop.pass();
  await w.loop.stop();
  assert.equal(w.liveReads(), 1);
  assert.equal(second.skipped.has(key), false);
  assert.equal(w.recorded.filter((d) => d.kind === 'SkipStale').length, 1);
  assert.equal(w.requests[0]?.target.resourceVersion, '250', 'written against the live pod');
});

test('by default a Rollback on a stale pod is skipped like any decision', async () => {
  const w = world(harmedPod);
  const summary = await w.loop.pass();
  await w.loop.stop();
  assert.equal(summary.skipped.get(key), 'stale');
  assert.equal(w.liveReads(), 0);
  assert.equal(w.requests.length, 0);
});

test('with the skip path off for rollback, a Rollback on a stale pod goes on one live read, and the skip is still counted', async () => {
  const w = world(harmedPod, { staleSkipRollback: false });
  const before = await resizeSkips();
  const summary = await w.loop.pass();
  await w.loop.stop();
  assert.equal(summary.skipped.has(key), false);
  assert.equal(w.liveReads(), 1);
  assert.ok(w.requests.length > 0, 'the rollback was sent');
  assert.equal(w.requests[0]?.target.resourceVersion, '250');
  assert.ok(
    w.recorded.some((d) => d.kind === 'Rollback'),
    'the decision sent is a Rollback',
  );
  assert.equal((await resizeSkips()) - before, 1, 'tollgate_stale_skips_total still counts it');
});
