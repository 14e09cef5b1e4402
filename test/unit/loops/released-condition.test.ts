// The Released condition writer's bookkeeping: what reaches the dispatcher, and when.
// The dispatcher here only records requests and lets the test settle them; the writes
// themselves are proven on the real API server (test/e2e/opt-in/released-condition.test.ts).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Dispatcher, WriteRequest, WriteResult } from '../../../src/dispatch/types.ts';
import { releasedConditionType } from '../../../src/decide/released-condition.ts';
import { ManualClock } from '../../../src/lib/clock.ts';
import { createReleasedConditions } from '../../../src/loops/released-condition.ts';
import { aPod } from '../../builders/pod.ts';
import { settle } from '../../support/manual-timers.ts';

function recordingDispatcher(full = () => false) {
  const sent: { request: WriteRequest; answer: (r: WriteResult) => void }[] = [];
  const dispatcher: Dispatcher = {
    enqueue(request) {
      if (full()) return { accepted: false, reason: 'full' };
      let answer!: (r: WriteResult) => void;
      const done = new Promise<WriteResult>((resolve) => (answer = resolve));
      sent.push({ request, answer });
      return { accepted: true, coalesced: false, done };
    },
    whenNotFull: () => Promise.resolve(),
    cancel: () => undefined,
    depth: 0,
    close: () => Promise.resolve(),
  };
  return { dispatcher, sent };
}

const succeeded: WriteResult = { result: 'succeeded', resourceVersion: '9' };
const reasons = (sent: { request: WriteRequest }[]) =>
  sent.map((s) => (s.request.op.type === 'podCondition' ? s.request.op.condition.reason : '?'));

describe('the Released condition writer', () => {
  it('sends a held pod its condition in the background band, keyed apart from its other writes', () => {
    const { dispatcher, sent } = recordingDispatcher();
    const conditions = createReleasedConditions({ dispatcher, clock: new ManualClock() });
    conditions.held(aPod('p', 'team-a').obj(), 'Budget', 'waiting for Budget');
    assert.equal(sent.length, 1);
    assert.equal(sent[0]!.request.band, 'background');
    assert.equal(sent[0]!.request.key, `team-a/p#${releasedConditionType}`);
  });

  it('tells the stale-guard the resourceVersion its write made, so no release is planned on a view from before it (soak seed 32)', async () => {
    const { dispatcher, sent } = recordingDispatcher();
    const wrote: [string, string][] = [];
    const conditions = createReleasedConditions({
      dispatcher,
      clock: new ManualClock(),
      recordWrite: (key, resourceVersion) => wrote.push([key, resourceVersion]),
    });
    conditions.held(aPod('p', 'team-a').obj(), 'Budget', 'waiting for Budget');
    conditions.held(aPod('q', 'team-a').obj(), 'Budget', 'waiting for Budget');
    sent[0]!.answer(succeeded);
    sent[1]!.answer({ result: 'failed', message: 'no' });
    await settle();
    assert.deepEqual(wrote, [['team-a/p', '9']]);
  });

  it('folds reason changes that wait behind a full window into one write of the newest', async () => {
    const { dispatcher, sent } = recordingDispatcher();
    const conditions = createReleasedConditions({
      dispatcher,
      clock: new ManualClock(),
      maxQueued: 1,
    });
    conditions.held(aPod('a', 'team-a').obj(), 'Pacing', 'queued');
    conditions.held(aPod('b', 'team-a').obj(), 'ObjectCondition', 'waiting');
    conditions.held(aPod('b', 'team-a').obj(), 'Budget', 'waiting for Budget');
    assert.deepEqual(reasons(sent), ['Pacing']);
    assert.equal(conditions.backlog, 1);
    sent[0]!.answer(succeeded);
    await settle();
    assert.deepEqual(reasons(sent), ['Pacing', 'Budget']);
  });

  it('drops a pending False write when the pod is released before it was sent', () => {
    const { dispatcher, sent } = recordingDispatcher();
    const conditions = createReleasedConditions({
      dispatcher,
      clock: new ManualClock(),
      maxQueued: 1,
    });
    conditions.held(aPod('a', 'team-a').obj(), 'Pacing', 'queued');
    conditions.held(aPod('b', 'team-a').obj(), 'Pacing', 'queued');
    conditions.released(aPod('b', 'team-a').obj(), 'removed gate');
    assert.equal(conditions.backlog, 0, 'b never showed False: nothing to write');
    assert.equal(sent.length, 1);
  });

  it('turns True a pod released while its False write is on its way', () => {
    const { dispatcher, sent } = recordingDispatcher();
    const conditions = createReleasedConditions({ dispatcher, clock: new ManualClock() });
    conditions.held(aPod('a', 'team-a').obj(), 'Budget', 'waiting for Budget');
    conditions.released(aPod('a', 'team-a').obj(), 'removed gate');
    assert.deepEqual(reasons(sent), ['Budget', 'GateRemoved']);
  });

  it('waits for room when the dispatcher is full, then sends', async () => {
    let full = true;
    const { dispatcher, sent } = recordingDispatcher(() => full);
    const conditions = createReleasedConditions({ dispatcher, clock: new ManualClock() });
    conditions.held(aPod('a', 'team-a').obj(), 'Budget', 'waiting for Budget');
    assert.equal(conditions.backlog, 1);
    full = false;
    await settle();
    assert.deepEqual(reasons(sent), ['Budget']);
  });
});
