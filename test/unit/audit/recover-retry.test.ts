/**
 * Recovery that fails at term start (the audit remote down) is retried within the term,
 * with backoff on injected timers, until it succeeds (soak finding 2); the state is
 * visible as tollgate_audit_recovery_pending meanwhile; intents the term's own loops
 * recorded in the meantime are theirs to close, not recovery's. The trail is a real
 * bare repository on disk.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { repoSource, type AuditSource } from '../../../src/audit/reader.ts';
import { serializeBatch } from '../../../src/audit/record.ts';
import type { AuditSink } from '../../../src/audit/types.ts';
import type { ClusterView } from '../../../src/cluster/types.ts';
import type { Decision } from '../../../src/decide/decision.ts';
import { silentLogger } from '../../../src/observe/log.ts';
import { registry } from '../../../src/observe/metrics.ts';
import { recoverOutcomes } from '../../../src/run/audit.ts';
import { localClone } from '../../support/audit-clone.ts';
import { ManualTimers } from '../../support/manual-timers.ts';
import { aDecision } from '../../builders/decision.ts';
import { aPolicy } from '../../builders/policy.ts';

async function pendingGauge(): Promise<number | undefined> {
  const metric = registry.getSingleMetric('tollgate_audit_recovery_pending');
  return (await metric?.get())?.values[0]?.value;
}

/** A sink whose term-start reconcile fails `failures` times (Git down), then reads the clone. */
function flakySink(source: () => Promise<AuditSource>, failures: number, ownIntent: string) {
  const recorded: Decision[] = [];
  const sink: AuditSink & { reconciles: number; recordedThisTerm(id: string): boolean } = {
    reconciles: 0,
    recordIntents: () => Promise.resolve(),
    record: (decisions) => void recorded.push(...decisions),
    flush: () => Promise.resolve(),
    reconcile: () => {
      sink.reconciles += 1;
      if (sink.reconciles <= failures)
        return Promise.reject(new Error('connect ECONNREFUSED (audit remote down)'));
      return source();
    },
    recordedThisTerm: (id) => id === ownIntent,
    backlog: 0,
    close: () => Promise.resolve(),
  };
  return { sink, recorded };
}

const gatedPod = (name: string): V1Pod => ({
  metadata: { namespace: 'team-a', name, uid: `uid-team-a-${name}`, resourceVersion: '1' },
  spec: { containers: [], schedulingGates: [{ name: 'tollgate.io/ready' }] },
});

/** recoverOutcomes as a term start calls it, on these timers, backoff 1 s doubling to 5 s. */
function termStartRecovery(
  sink: AuditSink,
  timers: ManualTimers,
  signal: AbortSignal,
  pod: (name: string) => V1Pod | undefined,
  more: Pick<Parameters<typeof recoverOutcomes>[0], 'alsoRead'> = {},
) {
  return recoverOutcomes({
    ...more,
    auditUrl: 'http://127.0.0.1:9/audit.git',
    branch: 'tollgate/audit',
    token: undefined,
    cluster: 'prod',
    audit: sink,
    view: { pod: (_namespace: string, name: string) => pod(name) } as unknown as ClusterView,
    policy: aPolicy().obj(),
    log: silentLogger,
    timers,
    signal,
    backoff: { baseMs: 1_000, maxMs: 5_000 },
  });
}

async function trailWithOpenIntents(...intents: Decision[]) {
  const clone = await localClone();
  await clone.repo.commitFile(
    'audit/prod/2026/11/29/07/T070000Z-old-leader-000001.jsonl',
    serializeBatch(intents),
    'release\n\nTollgate-Batch: intents\n',
  );
  return () => repoSource(clone.repo);
}

const rows = [
  { failures: 0, retriesAt: [], reconciles: 1 },
  { failures: 1, retriesAt: [1_000], reconciles: 2 },
  { failures: 3, retriesAt: [1_000, 2_000, 4_000], reconciles: 4 },
  { failures: 5, retriesAt: [1_000, 2_000, 4_000, 5_000, 5_000], reconciles: 6 },
];

for (const { failures, retriesAt, reconciles } of rows) {
  test(`a recovery that fails ${failures} times at term start is retried after ${JSON.stringify(retriesAt)} ms and then closes the previous leader's open intent once`, async () => {
    const previous = aDecision('Release', 'left-open').obj();
    const ours = aDecision('Release', 'this-term').obj();
    const { sink, recorded } = flakySink(
      await trailWithOpenIntents(previous, ours),
      failures,
      ours.id,
    );
    const timers = new ManualTimers();
    const term = new AbortController();
    const run = await termStartRecovery(sink, timers, term.signal, (name) => gatedPod(name));
    assert.equal(await pendingGauge(), failures > 0 ? 1 : 0, 'pending while not recovered');
    for (const [index, delay] of retriesAt.entries()) {
      assert.deepEqual(timers.pending, [delay], `retry ${index + 1} waits ${delay} ms`);
      await timers.advance(delay);
      await settleFully();
    }
    await run?.done;
    assert.equal(sink.reconciles, reconciles);
    assert.deepEqual(timers.pending, [], 'no retry left once recovered');
    assert.deepEqual(
      recorded.map((d) => [d.id, d.outcome.result]),
      [[previous.id, 'cancelled']],
      "only the previous leader's intent: the term's own is left to its loop",
    );
    assert.equal(await pendingGauge(), 0);
    term.abort();
  });
}

test('the retries stop when the term ends (the next leader recovers), and the pending state is cleared', async () => {
  const { sink, recorded } = flakySink(
    await trailWithOpenIntents(aDecision('Release', 'left-open').obj()),
    100,
    'none',
  );
  const timers = new ManualTimers();
  const term = new AbortController();
  const run = await termStartRecovery(sink, timers, term.signal, () => undefined);
  await timers.advance(1_000);
  await settleFully();
  assert.equal(sink.reconciles, 2);
  term.abort(new Error('leadership lost'));
  await run?.done;
  await timers.advance(60_000);
  assert.equal(sink.reconciles, 2, 'no attempt after the term ended');
  assert.deepEqual(recorded, []);
  assert.equal(await pendingGauge(), 0);
});

/** Lets file reads of the on-disk clone complete (real I/O, no time involved). */
async function settleFully(): Promise<void> {
  for (let i = 0; i < 50; i += 1) await new Promise<void>((resolve) => setImmediate(resolve));
}

test("term-start recovery closes every loop's open intents, not only gate-release's (soak seed 2: resize Holds left open)", async () => {
  const rows: { intent: Decision; result: string }[] = [
    { intent: aDecision('Release', 'gated').intent().obj(), result: 'cancelled' },
    { intent: aDecision('Hold', 'api-0').loop('resize').intent().obj(), result: 'cancelled' },
    { intent: aDecision('Resize', 'api-1').intent().obj(), result: 'cancelled' },
  ];
  const { sink, recorded } = flakySink(
    await trailWithOpenIntents(...rows.map((row) => row.intent)),
    0,
    'none',
  );
  const term = new AbortController();
  const run = await termStartRecovery(sink, new ManualTimers(), term.signal, gatedPod);
  await run.done;
  assert.deepEqual(
    recorded.map((d) => [d.loop, d.kind, d.id, d.outcome.result]),
    rows.map(({ intent, result }) => [intent.loop, intent.kind, intent.id, result]),
  );
  term.abort();
});

test("a recovery attempt still running when its term ends records nothing, and leaves the next term's own intents tracked (soak seed 4: a term's retry recorded 16 outcomes again after the same process's next term had recorded them)", async () => {
  const source = await trailWithOpenIntents(aDecision('Release', 'left-open').obj());
  let release: () => void = () => undefined;
  const readHeld = new Promise<void>((resolve) => (release = resolve));
  let reconciles = 0;
  let ended = 0;
  const recorded: Decision[] = [];
  const sink: AuditSink = {
    recordIntents: () => Promise.resolve(),
    record: (decisions) => void recorded.push(...decisions),
    flush: () => Promise.resolve(),
    // The first attempt fails (Git down); the retry's read is held until the term ended.
    reconcile: async () => {
      reconciles += 1;
      if (reconciles === 1) throw new Error('connect ECONNREFUSED (audit remote down)');
      await readHeld;
      return source();
    },
    beginTerm: () => undefined,
    endTerm: () => void (ended += 1),
    backlog: 0,
    close: () => Promise.resolve(),
  };
  const timers = new ManualTimers();
  const term = new AbortController();
  const run = await termStartRecovery(sink, timers, term.signal, gatedPod);
  await timers.advance(1_000); // the retry starts and waits on its read
  await settleFully();
  term.abort(new Error('leadership lost')); // the term ends; the next one has begun
  release();
  await run.done;
  assert.equal(reconciles, 2, 'the retry ran');
  assert.deepEqual(recorded, [], "the ended term's attempt records no outcome");
  assert.equal(ended, 0, "nor ends the tracking the next term's beginTerm started");
});

test('a term start whose writer keeps the open intents since its reconcile takes them and the carried state from it, and reads the trail no further', async () => {
  // The trail holds an intent the writer's state has already seen closed; a second read
  // of the trail would close it again.
  const closedSince = aDecision('Release', 'closed-since').obj();
  const stillOpen = aDecision('Release', 'still-open').obj();
  const { sink, recorded } = flakySink(await trailWithOpenIntents(closedSince), 0, 'none');
  const carried = { blocked: {}, gangReleases: { 'team-a/gang-1': 1 } };
  const withState = Object.assign(sink, {
    termState: () => ({ open: [stillOpen], carried }) as never,
  });
  const handed: unknown[] = [];
  const run = await termStartRecovery(
    withState,
    new ManualTimers(),
    new AbortController().signal,
    (name) => gatedPod(name),
    {
      alsoRead: (_source, state) => {
        handed.push(state);
        return Promise.resolve();
      },
    },
  );
  await run.done;
  assert.deepEqual(
    recorded.map((d) => [d.id, d.outcome.result]),
    [[stillOpen.id, 'cancelled']],
  );
  assert.deepEqual(handed, [carried]);
});
