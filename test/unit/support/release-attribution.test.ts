/**
 * The stalled-leader e2e attributes each gate removal to the replica whose intent the
 * removal carried out. A stopped leader's intents that never reached Git are pushed
 * later, when it is a standby, with a cancelled outcome; they must not take the credit
 * for a removal the new leader made.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { releaseIntents, type AttributedCommit } from '../../support/release-attribution.ts';
import { aDecision, outcomeOf } from '../../builders/decision.ts';
import type { Decision } from '../../../src/decide/decision.ts';

const T = Date.UTC(2030, 0, 1);
const commit = (controller: string, ...records: Decision[]): AttributedCommit => ({
  message: `release ${records.length} pods\n\nTollgate-Controller: ${controller}\n`,
  records,
});
const intent = (pod: string, by: string, at: number): Decision =>
  aDecision('Release', pod, 'stall').id(`gate-release:Release:${pod}:${by}`).at(at).obj();

test('a removal belongs to the intent whose outcome succeeded, not to a cancelled intent pushed after it', () => {
  const stoppedB = intent('p-0058', 'replica-b', T); // decided just before the stop, never sent
  const newLeaderA = intent('p-0058', 'replica-a', T + 4_000);
  const history = [
    commit('replica-a', newLeaderA),
    commit('replica-a', outcomeOf(newLeaderA)),
    // replica-b, a standby now, pushes what its stopped term kept local, closed as never sent
    commit('replica-b', stoppedB),
    commit('replica-b', outcomeOf(stoppedB, { result: 'cancelled', message: 'never sent' })),
  ];
  assert.deepEqual(releaseIntents(history).get('stall/p-0058'), {
    controller: 'replica-a',
    at: T + 4_000,
    id: newLeaderA.id,
  });
});

test("an intent whose outcome another replica's recovery recorded stays its own replica's", () => {
  const stoppedB = intent('p-0041', 'replica-b', T);
  const history = [
    commit('replica-b', stoppedB),
    commit('replica-a', outcomeOf(stoppedB, { result: 'succeeded' })),
  ];
  assert.equal(releaseIntents(history).get('stall/p-0041')?.controller, 'replica-b');
});

test('a pod with intents but no succeeded outcome: its last intent', () => {
  const first = intent('p-0001', 'replica-a', T);
  const second = intent('p-0001', 'replica-b', T + 1_000);
  const history = [commit('replica-a', first), commit('replica-b', second)];
  assert.equal(releaseIntents(history).get('stall/p-0001')?.controller, 'replica-b');
});

test('a pod no intent names is not attributed', () => {
  assert.equal(
    releaseIntents([commit('replica-a', intent('p-0001', 'replica-a', T))]).get('stall/p-0002'),
    undefined,
  );
});
