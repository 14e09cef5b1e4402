/**
 * The gate-release loop requeues a stale key with that key's own backoff (the real
 * StaleGuard, an injected clock), not the whole pass on a fixed delay; a key inside its
 * backoff is neither decided nor recorded again; after N consecutive skips one live read
 * decides. In-memory view, dispatcher and audit; the proof against a real API server is
 * test/e2e/write-path/stale-backoff.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { startGateReleaseLoop, type PassReport } from '../../../src/loops/gate-release.ts';
import { StaleGuard } from '../../../src/cluster/stale-guard.ts';
import type { ClusterView } from '../../../src/cluster/types.ts';
import type { Dispatcher, WriteRequest } from '../../../src/dispatch/types.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';
import { recordingAudit } from '../../support/recording-audit.ts';

const gate = 'team-a.tollgate.io/ready';
const base = aPolicy()
  .tenant(aTenant('team-a'))
  .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Approved' }))
  .approve('Release', 'team-a', 'behind')
  .obj();
const policy = { ...base, staleness: { ...base.staleness, requeue: { baseMs: 100, maxMs: 800 } } };
const key = 'team-a/behind';

/** The cache holds the pod at resourceVersion 10; tollgate wrote 20 (another gate, say). */
function world(options: { live?: (pod: V1Pod) => V1Pod | undefined; readFails?: boolean } = {}) {
  const pod = aPod('behind', 'team-a').gated(gate).resourceVersion('10').obj();
  const view: ClusterView = {
    synced: true,
    whenSynced: async () => undefined,
    pods: () => [pod],
    pod: (ns, name) => (ns === 'team-a' && name === 'behind' ? pod : undefined),
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
        done: Promise.resolve({ result: 'succeeded', resourceVersion: '30' }),
      };
    },
    whenNotFull: async () => undefined,
    cancel: () => undefined,
    depth: 0,
    close: async () => undefined,
  };
  const { audit, recorded } = recordingAudit();
  const clock = new ManualClock();
  clock.advance(2_000);
  const guard = new StaleGuard({
    policy: policy.staleness,
    loop: 'gate-release',
    restored: false,
    clock,
    liveReadAfterSkips: 2,
  });
  guard.recordWrite(key, '20');
  let liveReads = 0;
  const loop = startGateReleaseLoop({
    clock,
    view,
    dispatcher,
    audit,
    policy: () => policy,
    staleGuard: guard,
    cacheLagMs: () => 0,
    readPod: async () => {
      liveReads += 1;
      if (options.readFails)
        throw Object.assign(new Error('live-read budget of 5/s spent'), { retryAfterMs: 200 });
      const live = structuredClone(pod) as V1Pod;
      live.metadata!.resourceVersion = '25';
      return options.live ? options.live(live) : live;
    },
    autoStart: false,
  });
  const pass = async (): Promise<PassReport> => {
    const report = await loop.pass();
    await report.settled;
    return report;
  };
  return { clock, guard, loop, pass, requests, recorded, liveReads: () => liveReads };
}

const skipStales = (recorded: Decision[]): number =>
  recorded.filter((d) => d.kind === 'SkipStale').length;

test('a stale key is requeued after its own backoff, doubling per counted skip', async () => {
  const w = world();
  const waits: (number | undefined)[] = [];
  for (let i = 0; i < 2; i += 1) {
    const report = await w.pass();
    waits.push(report.staleRetryAfterMs);
    w.clock.advance(report.staleRetryAfterMs ?? 0);
  }
  await w.loop.stop();
  assert.deepEqual(waits, [100, 200]);
  assert.equal(w.requests.length, 0, 'nothing sent while the cache is behind');
});

test('a pass inside the key backoff neither decides on it nor records another SkipStale', async () => {
  const w = world();
  await w.pass();
  w.clock.advance(40);
  const second = await w.pass();
  await w.loop.stop();
  assert.equal(skipStales(w.recorded), 1);
  assert.equal(second.staleRetryAfterMs, 60, 'the rest of its backoff');
  assert.equal(second.skipped.has(key), true);
});

test('after N consecutive skips one live read decides: the gate is removed at the live resourceVersion', async () => {
  const w = world();
  for (let i = 0; i < 3; i += 1) {
    const report = await w.pass();
    w.clock.advance(report.staleRetryAfterMs ?? 0);
  }
  await w.loop.stop();
  assert.equal(w.liveReads(), 1);
  assert.equal(w.requests.length, 1);
  assert.equal(w.requests[0]!.target.resourceVersion, '25');
  assert.deepEqual(w.requests[0]!.op, {
    type: 'removeGate',
    gate,
    gateIndex: 0,
    markReleased: { annotationsPresent: false },
  });
  assert.equal(w.guard.size, 1, 'the new write is what the guard waits for now');
});

test('a live read that finds the gate already gone sends nothing and ends the wait', async () => {
  const w = world({
    live: (pod) => {
      pod.spec!.schedulingGates = [];
      return pod;
    },
  });
  for (let i = 0; i < 3; i += 1) {
    const report = await w.pass();
    w.clock.advance(report.staleRetryAfterMs ?? 0);
  }
  await w.loop.stop();
  assert.equal(w.requests.length, 0);
  assert.equal(w.guard.size, 0);
  const outcome = w.recorded.find((d) => d.kind === 'Release')?.outcome;
  assert.match(JSON.stringify(outcome), /cancelled.*already removed/);
});

test('a live read refused by its budget records why and the key keeps waiting', async () => {
  const w = world({ readFails: true });
  for (let i = 0; i < 3; i += 1) {
    const report = await w.pass();
    w.clock.advance(report.staleRetryAfterMs ?? 0);
  }
  await w.loop.stop();
  assert.equal(w.requests.length, 0);
  assert.equal(w.guard.size, 1);
  const outcome = w.recorded.find((d) => d.kind === 'Release')?.outcome;
  assert.match(JSON.stringify(outcome), /cancelled.*live read refused.*budget/);
});
