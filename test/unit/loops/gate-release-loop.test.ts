/**
 * The gate-release loop's wiring with in-memory stand-ins for the view, dispatcher and
 * audit sink: intents before writes, no write without a record, conflicts decided again
 * only from a newer resourceVersion, stale skips recorded. The proof against real parts
 * is test/e2e/gate-release/.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { startGateReleaseLoop } from '../../../src/loops/gate-release.ts';
import type { ClusterView } from '../../../src/cluster/types.ts';
import type { Dispatcher, WriteRequest, WriteResult } from '../../../src/dispatch/types.ts';
import { AuditUnavailableError, type AuditSink } from '../../../src/audit/types.ts';
import { pino } from 'pino';
import type { Decision } from '../../../src/decide/decision.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { aPod } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const gate = 'team-a.tollgate.io/ready';
const policy = aPolicy()
  .tenant(aTenant('team-a').budget({ pods: 2 }))
  .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' }))
  .obj();

function viewOf(pods: V1Pod[]): ClusterView & { pods_: V1Pod[] } {
  const view = {
    pods_: pods,
    synced: true,
    whenSynced: async () => undefined,
    pods: () => view.pods_,
    pod: (ns: string, name: string) =>
      view.pods_.find((p) => p.metadata?.namespace === ns && p.metadata?.name === name),
    nodes: () => [],
    object: () => undefined,
    lastResourceVersion: () => undefined,
    onChange: () => () => undefined,
  };
  return view;
}

/** The loop most tests drive: every gated pod, the test policy, the harness's dispatcher
 * and audit, a manual clock, passes started by hand; `overrides` names what a test changes. */
function loopOver(
  h: ReturnType<typeof harness>,
  overrides: Partial<Parameters<typeof startGateReleaseLoop>[0]> = {},
): ReturnType<typeof startGateReleaseLoop> {
  return startGateReleaseLoop({
    view: viewOf(gatedPods()),
    policy: () => policy,
    dispatcher: h.dispatcher,
    audit: h.audit,
    clock: new ManualClock(),
    autoStart: false,
    ...overrides,
  });
}

function harness(answer: (r: WriteRequest) => WriteResult) {
  const log: string[] = [];
  const requests: WriteRequest[] = [];
  const recorded: Decision[] = [];
  const dispatcher: Dispatcher = {
    enqueue(request) {
      requests.push(request);
      log.push(`write:${request.target.name}`);
      return { accepted: true, coalesced: false, done: Promise.resolve(answer(request)) };
    },
    whenNotFull: async () => undefined,
    cancel: () => undefined,
    depth: 0,
    close: async () => undefined,
  };
  const audit: AuditSink & { failIntents: boolean } = {
    failIntents: false,
    async recordIntents(decisions) {
      if (audit.failIntents) throw new Error('push rejected');
      log.push(`intents:${decisions.length}`);
    },
    record(decisions) {
      recorded.push(...decisions);
    },
    flush: async () => undefined,
    backlog: 0,
    close: async () => undefined,
  };
  return { log, requests, recorded, dispatcher, audit };
}

/** The harness's dispatcher, each write answered when the test calls its entry of `answers`. */
function answeredByHand(h: ReturnType<typeof harness>) {
  const answers: ((r: WriteResult) => void)[] = [];
  const dispatcher: Dispatcher = {
    ...h.dispatcher,
    enqueue(request) {
      h.requests.push(request);
      return {
        accepted: true,
        coalesced: false,
        done: new Promise<WriteResult>((resolve) => answers.push(resolve)),
      };
    },
  };
  return { dispatcher, answers };
}

const gatedPods = () => ['a', 'b', 'c'].map((n) => aPod(n, 'team-a').gated(gate).obj());

test('intents are recorded before the writes, and every outcome after', async () => {
  const h = harness(() => ({ result: 'succeeded', resourceVersion: '9' }));
  const loop = loopOver(h);
  const report = await loop.pass();
  await report.settled;
  await loop.stop();
  assert.deepEqual(h.log, ['intents:2', 'write:a', 'write:b']);
  assert.deepEqual(
    h.requests.map((r) => r.op),
    [
      { type: 'removeGate', gate, gateIndex: 0, markReleased: { annotationsPresent: false } },
      { type: 'removeGate', gate, gateIndex: 0, markReleased: { annotationsPresent: false } },
    ],
  );
  assert.deepEqual(
    h.recorded.map((d) => [d.kind, d.target.name, d.outcome.result]),
    [
      ['Hold', 'c', 'recorded'],
      ['Release', 'a', 'succeeded'],
      ['Release', 'b', 'succeeded'],
    ],
  );
});

test('a release the view has not shown yet is not sent again on the next pass', async () => {
  const h = harness(() => ({ result: 'succeeded', resourceVersion: '9' }));
  const loop = loopOver(h);
  await (
    await loop.pass()
  ).settled;
  await (
    await loop.pass()
  ).settled;
  await loop.stop();
  assert.equal(h.requests.length, 2);
});

test('when strict audit cannot record the intents, no write is sent and the pods are decided again', async () => {
  const h = harness(() => ({ result: 'succeeded', resourceVersion: '9' }));
  h.audit.failIntents = true;
  const loop = loopOver(h);
  await (
    await loop.pass()
  ).settled;
  assert.equal(h.requests.length, 0);
  h.audit.failIntents = false;
  await (
    await loop.pass()
  ).settled;
  await loop.stop();
  assert.deepEqual(
    h.requests.map((r) => r.target.name),
    ['a', 'b'],
  );
});

test('a conflicted pod is decided again only once the view has moved past the conflicted version', async () => {
  const h = harness((r) =>
    r.target.name === 'a' && r.target.resourceVersion === '1'
      ? { result: 'conflict', message: '409' }
      : { result: 'succeeded', resourceVersion: '9' },
  );
  const view = viewOf([aPod('a', 'team-a').gated(gate).obj()]);
  const clock = new ManualClock();
  const loop = loopOver(h, {
    view,
    clock,
  });
  await (
    await loop.pass()
  ).settled;
  const again = await loop.pass();
  assert.deepEqual([...again.skipped.keys()], ['team-a/a']);
  assert.ok(h.recorded.some((d) => d.kind === 'SkipStale'));
  view.pods_ = [aPod('a', 'team-a').gated(gate).resourceVersion('2').obj()];
  await (
    await loop.pass()
  ).settled;
  await loop.stop();
  assert.deepEqual(
    h.requests.map((r) => r.target.resourceVersion),
    ['1', '2'],
  );
});

test('a pod the stale-guard reports behind is skipped and recorded as SkipStale', async () => {
  const h = harness(() => ({ result: 'succeeded', resourceVersion: '9' }));
  const loop = loopOver(h, {
    view: viewOf([aPod('a', 'team-a').gated(gate).obj()]),
    staleGuard: { isFresh: () => false, recordWrite: () => undefined },
  });
  await (
    await loop.pass()
  ).settled;
  await loop.stop();
  assert.equal(h.requests.length, 0);
  assert.deepEqual(
    h.recorded.map((d) => d.kind),
    ['SkipStale'],
  );
});

test('a pass larger than one intent batch sends its first writes before the rest of its intents are recorded', async () => {
  const h = harness(() => ({ result: 'succeeded', resourceVersion: '9' }));
  const loop = loopOver(h, {
    intentBatch: 1,
  });
  await (
    await loop.pass()
  ).settled;
  await loop.stop();
  assert.deepEqual(h.log, ['intents:1', 'write:a', 'intents:1', 'write:b']);
});

test('a large pass pushes its intents in parts that double, each part written while the next is pushed', async () => {
  const h = harness(() => ({ result: 'succeeded', resourceVersion: '9' }));
  const roomy = aPolicy()
    .tenant(aTenant('team-a').budget({ pods: 4 }))
    .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' }))
    .obj();
  const loop = loopOver(h, {
    view: viewOf(['a', 'b', 'c', 'd'].map((n) => aPod(n, 'team-a').gated(gate).obj())),
    policy: () => roomy,
    intentBatch: 1,
  });
  await (
    await loop.pass()
  ).settled;
  await loop.stop();
  assert.deepEqual(h.log, [
    'intents:1',
    'write:a',
    'intents:2',
    'write:b',
    'write:c',
    'intents:1',
    'write:d',
  ]);
});

test('when the second intent commit of a pass fails, only the first part is written and the rest is decided again', async () => {
  const h = harness(() => ({ result: 'succeeded', resourceVersion: '9' }));
  let calls = 0;
  const audit = {
    ...h.audit,
    async recordIntents(decisions: readonly Decision[]) {
      calls += 1;
      if (calls === 2) throw new Error('push rejected');
      await h.audit.recordIntents(decisions);
    },
  };
  const loop = loopOver(h, {
    audit,
    intentBatch: 1,
  });
  await (
    await loop.pass()
  ).settled;
  assert.deepEqual(h.log, ['intents:1', 'write:a']);
  await (
    await loop.pass()
  ).settled;
  await loop.stop();
  assert.deepEqual(h.log, ['intents:1', 'write:a', 'intents:1', 'write:b']);
});

test('at most maxQueuedWrites of the loop wait in the dispatcher; the rest wait in plan order and are cancelled unsent when the loop stops', async () => {
  const h = harness(() => ({ result: 'succeeded', resourceVersion: '9' }));
  const { dispatcher, answers } = answeredByHand(h);
  const loop = loopOver(h, {
    dispatcher,
    maxQueuedWrites: 1,
  });
  await loop.pass();
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(
    h.requests.map((r) => r.target.name),
    ['a'],
  );
  const stopped = loop.stop();
  answers[0]!({ result: 'succeeded', resourceVersion: '9' });
  await stopped;
  assert.deepEqual(
    h.requests.map((r) => r.target.name),
    ['a'],
  );
  assert.deepEqual(
    h.recorded.filter((d) => d.kind === 'Release').map((d) => [d.target.name, d.outcome.result]),
    [
      ['a', 'succeeded'],
      ['b', 'cancelled'],
    ],
  );
});

test('writes beyond maxQueuedWrites go out in plan order as places free, in one pass and in the next', async () => {
  const h = harness(() => ({ result: 'succeeded', resourceVersion: '9' }));
  const { dispatcher, answers } = answeredByHand(h);
  const names = (from: number) => h.requests.slice(from).map((r) => r.target.name);
  const answerNext = async () => {
    answers.shift()!({ result: 'succeeded', resourceVersion: '9' });
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  };
  const pods = (prefix: string) =>
    ['1', '2', '3', '4', '5'].map((n) => aPod(`${prefix}${n}`, 'team-a').gated(gate).obj());
  const view = viewOf(pods('a'));
  const loop = loopOver(h, {
    dispatcher,
    view,
    policy: () =>
      aPolicy()
        .tenant(aTenant('team-a').budget({ pods: 100 }))
        .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' }))
        .obj(),
    maxQueuedWrites: 2,
  });
  await (
    await loop.pass()
  ).decisions;
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(names(0), ['a1', 'a2'], 'two places');
  for (let i = 0; i < 3; i++) await answerNext();
  assert.deepEqual(
    names(0),
    ['a1', 'a2', 'a3', 'a4', 'a5'],
    'each freed place to the next in plan order',
  );
  await answerNext();
  await answerNext();
  view.pods_ = pods('b');
  await loop.pass();
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
  for (let i = 0; i < 3; i++) await answerNext();
  assert.deepEqual(names(5), ['b1', 'b2', 'b3', 'b4', 'b5'], 'and again once all had gone');
  await answerNext();
  await answerNext();
  await loop.stop();
});

test('a loop stopped while the first part of a large pass is being recorded sends nothing and records no intent for the rest', async () => {
  const h = harness(() => ({ result: 'succeeded', resourceVersion: '9' }));
  let release: () => void = () => undefined;
  const audit = {
    ...h.audit,
    async recordIntents(decisions: readonly Decision[]) {
      await h.audit.recordIntents(decisions);
      await new Promise<void>((resolve) => (release = resolve));
    },
  };
  const loop = loopOver(h, {
    audit,
    intentBatch: 1,
  });
  await loop.pass();
  const stopped = loop.stop();
  release();
  await stopped;
  // a's intent was recorded: its outcome says it was never sent. b has neither.
  assert.deepEqual(h.log, ['intents:1']);
  assert.deepEqual(
    h.recorded.filter((d) => d.kind === 'Release').map((d) => [d.target.name, d.outcome.result]),
    [['a', 'cancelled']],
  );
});

test('a loop stopped while the rest of a large pass is being recorded records those writes cancelled, unsent, at once', async () => {
  const h = harness(() => ({ result: 'succeeded', resourceVersion: '9' }));
  let calls = 0;
  let release: () => void = () => undefined;
  let started: () => void = () => undefined;
  const secondStarted = new Promise<void>((resolve) => (started = resolve));
  const audit = {
    ...h.audit,
    async recordIntents(decisions: readonly Decision[]) {
      await h.audit.recordIntents(decisions);
      calls += 1;
      if (calls === 2) {
        started();
        await new Promise<void>((resolve) => (release = resolve));
      }
    },
  };
  const loop = loopOver(h, {
    audit,
    intentBatch: 1,
  });
  await loop.pass();
  await secondStarted;
  const stopped = loop.stop();
  release();
  await stopped;
  assert.deepEqual(h.log, ['intents:1', 'write:a', 'intents:1']);
  assert.deepEqual(
    h.recorded.filter((d) => d.kind === 'Release').map((d) => [d.target.name, d.outcome.result]),
    [
      ['a', 'succeeded'],
      ['b', 'cancelled'],
    ],
  );
});

test('a passShare outside (0, 1] is refused with the value named', () => {
  const h = harness(() => ({ result: 'succeeded', resourceVersion: '9' }));
  for (const passShare of [0, -0.5, 1.5])
    assert.throws(
      () =>
        startGateReleaseLoop({
          view: viewOf(gatedPods()),
          policy: () => policy,
          dispatcher: h.dispatcher,
          audit: h.audit,
          autoStart: false,
          passShare,
        }),
      new RegExp(`passShare must be in \\(0, 1\\], got ${passShare}`),
    );
});

test('a view that never syncs bounds the pass, stop() completes, and the watchdog sees the pass end', async () => {
  const h = harness(() => ({ result: 'succeeded', resourceVersion: '9' }));
  const never: ClusterView = {
    ...viewOf(gatedPods()),
    synced: false,
    whenSynced: (signal?: AbortSignal) =>
      new Promise<void>((_, reject) =>
        signal?.addEventListener('abort', () => reject(signal.reason), { once: true }),
      ),
  };
  const passes: string[] = [];
  const watchdog = {
    begin: (loop: string) => {
      passes.push(`begin ${loop}`);
      return () => passes.push(`end ${loop}`);
    },
  };
  const loop = loopOver(h, {
    view: never,
    watchdog,
    syncWaitMs: 20,
  });
  const report = await loop.pass();
  assert.equal(report.sent, 0, 'nothing decided on a view that is not synced');
  assert.deepEqual(passes, ['begin gate-release', 'end gate-release']);
  // A pass parked on the view ends when the loop stops, long before its wait would.
  const slow = loopOver(h, {
    view: never,
    syncWaitMs: 3_600_000,
  });
  const parked = slow.pass();
  await slow.stop();
  assert.equal((await parked).sent, 0);
  assert.deepEqual(h.requests, []);
});

test('a write that fails finally backs off per pod, then is Blocked and recorded once, with no new intent meanwhile', async () => {
  const h = harness(() => ({ result: 'failed', code: 403, message: 'pods "a" is forbidden' }));
  const clock = new ManualClock();
  const loop = loopOver(h, {
    view: viewOf([aPod('a', 'team-a').gated(gate).resourceVersion('5').obj()]),
    clock,
  });
  const attempts = async () => {
    const report = await loop.pass();
    await report.settled;
    return report.sent;
  };
  const sent: number[] = [];
  for (const waitMs of [0, 500, 500, 2_000, 4_000, 8_000, 16_000, 3_600_000]) {
    clock.advance(waitMs);
    sent.push(await attempts());
  }
  // Sent at 0, 1 s, 3 s, 7 s, 15 s (backoff 1, 2, 4, 8 s), then Blocked: never again.
  assert.deepEqual(sent, [1, 0, 1, 1, 1, 1, 0, 0]);
  const blocked = h.recorded.filter((d) => d.kind === 'Blocked');
  assert.equal(blocked.length, 1);
  assert.match(blocked[0]?.reason ?? '', /Release failed 5 times \(403: pods "a" is forbidden\)/);
  await loop.stop();
});

test("a release refused by a full dispatcher waits for room in its own band (work), not for the Events' and conditions' band", async () => {
  const h = harness(() => ({ result: 'succeeded', resourceVersion: '9' }));
  const waitedFor: (string | undefined)[] = [];
  let refusals = 1;
  const enqueue = h.dispatcher.enqueue.bind(h.dispatcher);
  h.dispatcher.enqueue = (request) => {
    if (refusals-- > 0) return { accepted: false, reason: 'full' };
    return enqueue(request);
  };
  h.dispatcher.whenNotFull = async (_signal, band) => void waitedFor.push(band);
  const loop = loopOver(h);
  await (
    await loop.pass()
  ).settled;
  await loop.stop();
  assert.deepEqual(waitedFor, ['work']);
  assert.deepEqual(h.requests.map((r) => r.target.name).sort(), ['a', 'b'], 'both sent');
});

test('while a strict audit push waits for its retry, the first refused pass warns once, the next only at debug, and the first recorded pass says releases resume', async () => {
  const h = harness(() => ({ result: 'succeeded', resourceVersion: '9' }));
  const lines: { level: number; msg: string }[] = [];
  const log = pino(
    { level: 'debug' },
    { write: (line: string) => void lines.push(JSON.parse(line)) },
  );
  let gitDown = true;
  const audit = {
    ...h.audit,
    async recordIntents(decisions: readonly Decision[]) {
      if (gitDown) throw new AuditUnavailableError('connect ECONNREFUSED', 30_000, 0);
      await h.audit.recordIntents(decisions);
    },
  };
  const loop = loopOver(h, { audit, log });
  for (let pass = 0; pass < 3; pass += 1) await (await loop.pass()).settled;
  gitDown = false;
  await (
    await loop.pass()
  ).settled;
  await loop.stop();
  assert.deepEqual(
    lines.filter((line) => line.level >= 30 && /audit/.test(line.msg)).map((line) => line.msg),
    [
      'releases wait: the audit push is failing (strict mode), no intent recorded and no write sent until a push lands',
      'audit intents recorded again: releases resume',
    ],
  );
  assert.equal(lines.filter((line) => line.level === 20 && /audit/.test(line.msg)).length, 2);
  assert.deepEqual(h.log, ['intents:2', 'write:a', 'write:b'], 'nothing sent while refused');
});

/** The requests one pass sends: the target pod's name and the gang it names. */
async function unitsOfOnePass(overrides: Parameters<typeof loopOver>[1] = {}) {
  const h = harness(() => ({ result: 'succeeded', resourceVersion: '9' }));
  const loop = loopOver(h, overrides);
  await (
    await loop.pass()
  ).settled;
  await loop.stop();
  return h.requests.map((r) => [r.target.name, r.unit]);
}

test("a gang's releases reach the dispatcher naming their gang (its first member's key), so a fallback keeps the gang whole; a pod alone names none", async () => {
  const gangPolicy = aPolicy()
    .tenant(aTenant('team-a').budget({ pods: 10 }))
    .gatePolicy(aGatePolicy('ready', 'team-a').gangComplete())
    .obj();
  const member = (n: string) =>
    aPod(n, 'team-a').gated(gate).label('gang', 'g1').annotate('gang-size', '2').obj();
  assert.deepEqual(
    await unitsOfOnePass({ view: viewOf([member('m0'), member('m1')]), policy: () => gangPolicy }),
    [
      ['m0', 'team-a/m0'],
      ['m1', 'team-a/m0'],
    ],
  );
  assert.deepEqual(await unitsOfOnePass(), [
    ['a', undefined],
    ['b', undefined],
  ]);
});
