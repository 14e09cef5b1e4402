/**
 * The resize loop's wiring with in-memory stand-ins for the view, dispatcher, audit sink
 * and Prometheus: the order of audit intents and writes, resourceVersion chaining,
 * batching, and 409 handling. The proof against real parts is test/e2e/resize/.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { startResizeLoop } from '../../../src/loops/resize.ts';
import type { ClusterView } from '../../../src/cluster/types.ts';
import type { Dispatcher, WriteRequest, WriteResult } from '../../../src/dispatch/types.ts';
import type { AuditSink } from '../../../src/audit/types.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import type { Policy } from '../../../src/policy/model.ts';
import type { PrometheusClient } from '../../../src/signals/prometheus.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { lastGoodAnnotation } from '../../../src/decide/resize-state.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { aResizePolicy, aRunningPod, testStateKeys } from '../../builders/resize.ts';

const clock = new ManualClock();

function policyWith(): Policy {
  return {
    commit: 'abc',
    settings: {} as Policy['settings'],
    tenants: new Map([['team-a', { name: 'team-a', namespaces: ['team-a'] } as never]]),
    gatePolicies: [],
    resizePolicies: [aResizePolicy()],
    staleness: {} as Policy['staleness'],
    approvals: [],
  };
}

function viewOf(pods: V1Pod[]): ClusterView {
  return {
    synced: true,
    whenSynced: async () => undefined,
    pods: () => pods,
    pod: (ns, name) => pods.find((p) => p.metadata?.namespace === ns && p.metadata?.name === name),
    nodes: () => [],
    object: () => undefined,
    lastResourceVersion: () => undefined,
    onChange: () => () => undefined,
  };
}

function harness(_pods: V1Pod[], answer: (r: WriteRequest, n: number) => WriteResult) {
  const log: string[] = [];
  const requests: WriteRequest[] = [];
  const recorded: Decision[] = [];
  const queries: string[] = [];
  const dispatcher: Dispatcher = {
    enqueue(request) {
      requests.push(request);
      log.push(`write:${request.op.type}@${request.target.resourceVersion}`);
      return {
        accepted: true,
        coalesced: false,
        done: Promise.resolve(answer(request, requests.length)),
      };
    },
    whenNotFull: async () => undefined,
    cancel: () => undefined,
    depth: 0,
    close: async () => undefined,
  };
  const audit: AuditSink & { failIntents?: boolean } = {
    async recordIntents(decisions) {
      if (audit.failIntents) throw new Error('push rejected');
      log.push(`intents:${decisions.map((d) => d.kind).join(',')}`);
    },
    record(decisions) {
      recorded.push(...decisions);
    },
    flush: async () => undefined,
    backlog: 0,
    close: async () => undefined,
  };
  const prometheus: PrometheusClient = {
    instant: async () => [],
    async range(query, start, end, step) {
      queries.push(query);
      const names = [...query.matchAll(/pod=~"([^"]*)"/g)].flatMap((m) => (m[1] ?? '').split('|'));
      return names.map((pod) => ({
        labels: { pod },
        samples: Array.from({ length: Math.floor((end - start) / step) + 1 }, (_, i) => ({
          at: start + i * step,
          value: 500,
        })),
      }));
    },
  };
  return { log, requests, recorded, queries, dispatcher, audit, prometheus };
}

/** The deps every test here shares: the harness's edges, one pass per call, the shared clock. */
function common(h: ReturnType<typeof harness>, podsInView: V1Pod[]) {
  return {
    view: viewOf(podsInView),
    policy: policyWith,
    dispatcher: h.dispatcher,
    audit: h.audit,
    prometheus: h.prometheus,
    intervalMs: 3_600_000,
    clock,
  };
}

const pods = () =>
  ['web-0', 'web-1', 'web-2'].map((n) =>
    aRunningPod(n, 'team-a').container('app', { cpu: '500m', memory: '256Mi' }).obj(),
  );

test('one batched query per signal per namespace; intents pushed before annotate then resize, chained by resourceVersion', async () => {
  const h = harness(pods(), (_r, n) => ({ result: 'succeeded', resourceVersion: String(200 + n) }));
  const loop = startResizeLoop({
    view: viewOf(pods()),
    policy: policyWith,
    dispatcher: h.dispatcher,
    audit: h.audit,
    prometheus: h.prometheus,
    intervalMs: 3_600_000,
    clock,
  });
  const summary = await loop.pass();
  await loop.stop();
  assert.equal(h.queries.length, 1);
  assert.match(h.queries[0] ?? '', /pod=~"web-0\|web-1\|web-2"/);
  assert.equal(summary.decisions.filter((d) => d.kind === 'Resize').length, 3);
  for (const name of ['web-0', 'web-1', 'web-2']) {
    const annotate = h.requests.findIndex(
      (r) => r.target.name === name && r.op.type === 'annotate',
    );
    const resize = h.requests.findIndex((r) => r.target.name === name && r.op.type === 'resize');
    assert.ok(annotate >= 0 && resize > annotate, `${name}: annotate, then resize`);
    assert.equal(
      h.requests[annotate]?.target.resourceVersion,
      '100',
      `${name}: annotate on the decided version`,
    );
    // The harness answers the n-th request with resourceVersion 200 + n.
    assert.equal(
      h.requests[resize]?.target.resourceVersion,
      String(200 + annotate + 1),
      `${name}: resize on the annotate's version`,
    );
  }
  assert.ok(
    h.log.indexOf('intents:Resize') < h.log.findIndex((l) => l.startsWith('write:')),
    'intents first',
  );
  assert.deepEqual(
    h.recorded.map((d) => d.outcome.result),
    ['succeeded', 'succeeded', 'succeeded'],
  );
});

test('when the audit intents cannot be pushed no write is sent', async () => {
  const h = harness(pods(), () => ({ result: 'succeeded', resourceVersion: '1' }));
  h.audit.failIntents = true;
  const loop = startResizeLoop({
    view: viewOf(pods()),
    policy: policyWith,
    dispatcher: h.dispatcher,
    audit: h.audit,
    prometheus: h.prometheus,
    intervalMs: 3_600_000,
    clock,
  });
  const summary = await loop.pass();
  await loop.stop();
  assert.equal(h.requests.length, 0);
  assert.match(summary.skipped.get('team-a/web-0') ?? '', /audit intents not recorded/);
});

test('a 409 reads the pod again and decides again from it', async () => {
  const one = [pods()[0] as V1Pod];
  const h = harness(one, (_r, n) =>
    n === 1
      ? { result: 'conflict', message: '409' }
      : { result: 'succeeded', resourceVersion: String(300 + n) },
  );
  let reads = 0;
  const fresh = aRunningPod('web-0', 'team-a')
    .container('app', { cpu: '500m', memory: '256Mi' })
    .obj();
  (fresh.metadata as { resourceVersion: string }).resourceVersion = '150';
  const loop = startResizeLoop({
    ...common(h, one),
    readPod: async () => {
      reads += 1;
      return fresh;
    },
  });
  await loop.pass();
  await loop.stop();
  assert.equal(reads, 1);
  assert.deepEqual(
    h.requests.map((r) => [r.op.type, r.target.resourceVersion]),
    [
      ['annotate', '100'],
      ['annotate', '150'],
      ['resize', '302'],
    ],
  );
  assert.deepEqual(
    h.recorded.map((d) => d.outcome.result),
    ['conflict', 'succeeded'],
  );
});

test('a pod whose own last write the view has not seen is skipped as stale', async () => {
  const one = [pods()[0] as V1Pod];
  const h = harness(one, (_r, n) => ({ result: 'succeeded', resourceVersion: String(500 + n) }));
  const loop = startResizeLoop({
    ...common(h, one),
  });
  await loop.pass();
  const before = h.requests.length;
  // The view still shows resourceVersion 100 and the old spec: not caught up.
  clock.advance(1);
  const second = await loop.pass();
  clock.advance(1);
  const third = await loop.pass();
  await loop.stop();
  assert.equal(h.requests.length, before);
  assert.equal(second.skipped.get('team-a/web-0'), 'stale');
  assert.equal(third.skipped.get('team-a/web-0'), 'stale');
  assert.equal(
    h.recorded.filter((d) => d.kind === 'SkipStale').length,
    1,
    'one SkipStale record while the view stays behind, not one per pass',
  );
});

const alwaysFresh = { isFresh: () => true, recordWrite: () => undefined };

/** The reason of the pod's Resize decision in a pass ('' when it has none). */
function heldReason(summary: { decisions: readonly Decision[] }, name: string): string {
  return summary.decisions.find((d) => d.kind === 'Resize' && d.target.name === name)?.reason ?? '';
}

/** Pods whose resize writes raised the app container's cpu request from 500m to 750m. */
function cpuSteps(requests: readonly WriteRequest[]): string[] {
  return requests
    .filter(
      (r) =>
        r.op.type === 'resize' &&
        r.op.containers.some((c) => c.name === 'app' && c.resources.requests?.cpu === '750m'),
    )
    .map((r) => r.target.name);
}

test('pods of one namespace share the quota room: a pass sends only the step-ups that fit together, and the room stays charged until the quota view has seen the writes', async () => {
  const three = pods();
  const h = harness(three, (_r, n) => ({ result: 'succeeded', resourceVersion: String(300 + n) }));
  let quota = {
    metadata: { name: 'compute', namespace: 'team-a' },
    status: { hard: { 'requests.cpu': '2' }, used: { 'requests.cpu': '1500m' } },
  };
  let seenThrough = '100';
  const loop = startResizeLoop({
    ...common(h, three),
    quotas: (ns) => (ns === 'team-a' ? [quota] : []),
    quotasSeenThrough: () => seenThrough,
    // The view here never changes: freshness is not what this test is about.
    staleGuard: alwaysFresh,
  });
  // The policy steps memory too, which no quota here limits: count the cpu steps.
  const resized = () => cpuSteps(h.requests);
  const first = await loop.pass();
  assert.deepEqual(resized(), ['web-0', 'web-1'], 'room for two steps of 250m: two are sent');
  assert.match(heldReason(first, 'web-2'), /exceeds ResourceQuota compute requests\.cpu room 0/);

  // The quota in the view has not moved (its watch has not delivered the admission yet):
  // the two admitted steps still count, so no pod gets a cpu step.
  clock.advance(1);
  const second = await loop.pass();
  assert.deepEqual(resized(), ['web-0', 'web-1']);
  for (const name of ['web-0', 'web-1', 'web-2'])
    assert.match(heldReason(second, name), /requests\.cpu room 0/, name);

  // The quota view has seen past the writes and shows them in `used`, web-0 and web-1
  // are gone, and a raised hard limit leaves 250m: web-2 may take it only if the
  // released charges are not counted on top of `used`.
  three.splice(0, 2);
  quota = {
    ...quota,
    status: { hard: { 'requests.cpu': '2250m' }, used: { 'requests.cpu': '2' } },
  };
  seenThrough = '999';
  clock.advance(1);
  await loop.pass();
  await loop.stop();
  assert.deepEqual(resized(), ['web-0', 'web-1', 'web-2']);
});

test('a step-up the API server did not admit frees its quota room at once', async () => {
  const two = pods().slice(0, 2);
  const h = harness(two, (r, n) =>
    r.op.type === 'resize' && r.target.name === 'web-0'
      ? { result: 'failed', code: 403, message: 'exceeded quota' }
      : { result: 'succeeded', resourceVersion: String(400 + n) },
  );
  const quota = {
    metadata: { name: 'compute', namespace: 'team-a' },
    status: { hard: { 'requests.cpu': '1250m' }, used: { 'requests.cpu': '1000m' } },
  };
  const loop = startResizeLoop({
    ...common(h, two),
    quotas: () => [quota],
    quotasSeenThrough: () => '1',
    staleGuard: alwaysFresh,
  });
  await loop.pass();
  assert.deepEqual(cpuSteps(h.requests), ['web-0']);
  // web-0 leaves, so the next pass decides web-1 alone: it fits only if the refused
  // step's charge was released.
  two.splice(0, 1);
  clock.advance(1);
  await loop.pass();
  await loop.stop();
  assert.ok(
    cpuSteps(h.requests).includes('web-1'),
    'web-1 gets the room the refused step did not take',
  );
});

test('a resize the stale-guard judges destructive with the cache behind takes a live read and decides again from a newer pod', async () => {
  const one = [pods()[0] as V1Pod];
  const h = harness(one, (_r, n) => ({ result: 'succeeded', resourceVersion: String(700 + n) }));
  const live = aRunningPod('web-0', 'team-a')
    .container('app', { cpu: '500m', memory: '256Mi' })
    .obj();
  (live.metadata as { resourceVersion: string }).resourceVersion = '160';
  const asked: string[] = [];
  let reads = 0;
  const loop = startResizeLoop({
    ...common(h, one),
    cacheLagMs: () => 9_000,
    staleGuard: {
      ...alwaysFresh,
      requireLive: (_key, kind, lag) => {
        asked.push(`${kind}@${lag}`);
        return { action: 'liveRead', reason: `${kind}: cache lag ${lag} ms` };
      },
    },
    readPod: async () => {
      reads += 1;
      return live;
    },
  });
  await loop.pass();
  await loop.stop();
  assert.deepEqual(
    asked,
    ['Resize@9000', 'Resize@9000'],
    'asked before the write, again after re-deciding',
  );
  assert.equal(reads, 1, 'one live read: the second decision is made on the live pod');
  assert.deepEqual(
    h.requests.map((r) => [r.op.type, r.target.resourceVersion]),
    [
      ['annotate', '160'],
      ['resize', '701'],
    ],
  );
});

test('a resize held by the stale-guard sends nothing and says why', async () => {
  const one = [pods()[0] as V1Pod];
  const h = harness(one, () => ({ result: 'succeeded', resourceVersion: '800' }));
  const loop = startResizeLoop({
    ...common(h, one),
    staleGuard: {
      ...alwaysFresh,
      requireLive: () => ({
        action: 'hold',
        reason: 'Resize held: view not synced',
        retryAfterMs: 100,
      }),
    },
  });
  const summary = await loop.pass();
  await loop.stop();
  assert.equal(h.requests.length, 0);
  assert.equal(summary.skipped.get('team-a/web-0'), 'Resize held: view not synced');
});

test('a live read refused by its budget or breaker holds the resize with that reason, never as a pod gone', async () => {
  const one = [pods()[0] as V1Pod];
  const h = harness(one, () => ({ result: 'succeeded', resourceVersion: '900' }));
  const loop = startResizeLoop({
    ...common(h, one),
    cacheLagMs: () => 9_000,
    staleGuard: {
      ...alwaysFresh,
      requireLive: (_key, kind, lag) => ({
        action: 'liveRead',
        reason: `${kind}: cache lag ${lag} ms`,
      }),
    },
    readPod: async () => {
      throw new Error('live-read breaker open after 5 failures; 30000 ms left');
    },
  });
  const summary = await loop.pass();
  await loop.stop();
  assert.equal(h.requests.length, 0);
  assert.equal(
    summary.skipped.get('team-a/web-0'),
    'Resize: live read refused: live-read breaker open after 5 failures; 30000 ms left',
  );
});

test('an observe-only policy decides and records what it would do, writes nothing, and records it once per change', async () => {
  const one = [pods()[0] as V1Pod];
  const h = harness(one, () => ({ result: 'succeeded', resourceVersion: '1' }));
  const observing = (): Policy => ({
    ...policyWith(),
    resizePolicies: [aResizePolicy({ mode: 'Observe' })],
  });
  const loop = startResizeLoop({ ...common(h, one), policy: observing });
  const first = await loop.pass();
  const second = await loop.pass();
  await loop.stop();
  assert.equal(h.requests.length, 0, 'no write of any kind');
  assert.deepEqual(
    first.decisions.map((d) => [d.kind, d.outcome.result]),
    [['Resize', 'recorded']],
  );
  assert.match(first.decisions[0]?.reason ?? '', /^observe-only: would /);
  assert.ok(
    first.decisions[0]?.inputs.some((i) => i.condition === 'mode' && i.value === 'Observe'),
    'the mode is an input',
  );
  assert.deepEqual(second.decisions, [], 'the same decision is not recorded again');
  assert.deepEqual(
    h.recorded.map((d) => d.kind),
    ['Resize'],
  );
});

test('a forged resize state is ignored, recorded with an Event and counted once per value, not once per pass', async () => {
  const forged = (memory: string) =>
    aRunningPod('web-0', 'team-a')
      .container('app', { cpu: '500m', memory: '256Mi' })
      .annotation(
        lastGoodAnnotation,
        JSON.stringify({ containers: { app: { requests: { cpu: '2', memory } } } }),
      )
      .obj();
  let inView = [forged('1Gi')];
  const h = harness(inView, () => ({ result: 'failed', code: 422, message: 'not in this test' }));
  const events: string[] = [];
  const rejectedUnsigned = async () =>
    (await registry.getSingleMetric('tollgate_resize_state_rejected_total')?.get())?.values.find(
      (v) => v.labels.reason === 'unsigned',
    )?.value ?? 0;
  const before = await rejectedUnsigned();
  const loop = startResizeLoop({
    ...common(h, inView),
    view: { ...viewOf([]), pods: () => inView },
    stateKeys: testStateKeys,
    events: (_pod, e) => void events.push(e.reason),
  });
  await loop.pass();
  await loop.pass();
  inView = [forged('768Mi')];
  await loop.pass();
  await loop.stop();
  const rejections = h.recorded.filter((d) => /resize state on the pod ignored/.test(d.reason));
  assert.equal(rejections.length, 2, 'one record per forged value, none for the repeat pass');
  assert.equal((await rejectedUnsigned()) - before, 2, 'counted once per value');
  assert.equal(events.filter((r) => r === 'TollgateResizeStateRejected').length, 2);
});

test('a stale-guard hold of a resize is recorded in Git once per change of reason, not once per pass', async () => {
  const one = [pods()[0] as V1Pod];
  const h = harness(one, () => ({ result: 'succeeded', resourceVersion: '800' }));
  let reason = 'Resize held: the view has not synced since tollgate started';
  const loop = startResizeLoop({
    ...common(h, one),
    staleGuard: {
      ...alwaysFresh,
      requireLive: () => ({ action: 'hold', reason, retryAfterMs: 100 }),
    },
  });
  await loop.pass();
  await loop.pass();
  reason = 'Resize: live read refused: live-read breaker open after 5 failures; 30000 ms left';
  await loop.pass();
  reason = 'Resize: live read refused: live-read breaker open after 5 failures; 29000 ms left';
  await loop.pass();
  await loop.stop();
  assert.equal(h.requests.length, 0, 'nothing written while held');
  const holds = h.recorded.filter((d) => d.kind === 'SkipStale');
  assert.deepEqual(
    holds.map((d) => d.reason),
    [
      'stale-guard held the Resize: Resize held: the view has not synced since tollgate started; decided again later',
      'stale-guard held the Resize: Resize: live read refused: live-read breaker open after 5 failures; 30000 ms left; decided again later',
    ],
  );
  assert.ok(holds.every((d) => d.outcome.result === 'recorded'));
});
