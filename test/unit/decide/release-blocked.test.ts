import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  afterFinalFailure,
  blockedNow,
  maxFinalFailures,
  type BlockedWrite,
} from '../../../src/decide/release-blocked.ts';
import { aPod } from '../../builders/pod.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const failure = { resourceVersion: '7', commit: 'c1', code: 403, message: 'pods "p" is forbidden' };
const pod = (rv = '7') => aPod('p', 'team-a').resourceVersion(rv).obj();

test('each final failure backs off twice as long, and the last allowed attempt blocks', () => {
  let entry: BlockedWrite | undefined;
  const waits: number[] = [];
  for (let i = 0; i < maxFinalFailures; i++) {
    entry = afterFinalFailure(entry, failure, now);
    waits.push(entry.until - now);
  }
  assert.deepEqual(waits, [1_000, 2_000, 4_000, 8_000, 16_000]);
  assert.equal(entry?.blocked, true);
  assert.equal(entry?.attempts, maxFinalFailures);
});

test('a pod backing off is not decided until its backoff ends', () => {
  const entry = afterFinalFailure(undefined, failure, now);
  assert.equal(blockedNow(entry, pod(), 'c1', now + 999), true);
  assert.equal(blockedNow(entry, pod(), 'c1', now + 1_000), false);
});

test('a blocked pod stays blocked until the pod or the policy changes', () => {
  let entry: BlockedWrite | undefined;
  for (let i = 0; i < maxFinalFailures; i++) entry = afterFinalFailure(entry, failure, now);
  assert.equal(blockedNow(entry, pod(), 'c1', now + 86_400_000), true);
  assert.equal(blockedNow(entry, pod('8'), 'c1', now), false, 'the pod changed');
  assert.equal(blockedNow(entry, pod(), 'c2', now), false, 'a new policy is in force');
});

test('a failure on a changed pod starts counting again', () => {
  const first = afterFinalFailure(undefined, failure, now);
  const again = afterFinalFailure(first, { ...failure, resourceVersion: '9' }, now);
  assert.equal(again.attempts, 1);
});
