import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  afterFinalFailure,
  blockedFromRecords,
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

test('a restart carries over the Blocked state of each pod whose latest decision is Blocked', async (t) => {
  // Records as the audit trail holds them, newest commit first. `phase` as the writer
  // files them: an intent before its write, an outcome after, a record without a write.
  const record = (
    uid: string,
    kind: string,
    at: number,
    phase: 'intent' | 'outcome' | 'record' = kind === 'Blocked' || kind === 'Hold'
      ? 'record'
      : 'intent',
    loop = 'gate-release',
  ) => ({
    loop,
    kind,
    at,
    phase,
    reason: `${kind} of ${uid}`,
    target: { uid, resourceVersion: '7' },
    policy: { commit: 'c1' },
  });
  const cases = [
    {
      name: 'Blocked after its last attempt: blocked',
      records: [
        record('a', 'Blocked', 3),
        record('a', 'Cancel', 2, 'outcome'),
        record('a', 'Cancel', 2),
      ],
      blocked: ['a'],
    },
    {
      // The writer commits records and outcomes as separate batches, each when its oldest
      // entry is due: a records batch that already waited commits first, so the outcome of
      // the last attempt can land in a newer commit than the Blocked record.
      name: 'the outcome of the last attempt committed after the Blocked record: still blocked',
      records: [
        record('a', 'Cancel', 2, 'outcome'),
        record('a', 'Blocked', 3),
        record('a', 'Cancel', 2),
      ],
      blocked: ['a'],
    },
    {
      name: 'an outcome recovered at a new term after Blocked: still blocked',
      records: [
        record('a', 'Cancel', 9, 'outcome'),
        record('a', 'Blocked', 3),
        record('a', 'Cancel', 2),
      ],
      blocked: ['a'],
    },
    {
      name: 'decided again after Blocked: not blocked',
      records: [record('a', 'Release', 4), record('a', 'Blocked', 3)],
      blocked: [],
    },
    {
      name: 'a Hold recorded after Blocked: not blocked',
      records: [record('a', 'Hold', 4), record('a', 'Blocked', 3)],
      blocked: [],
    },
    {
      name: "another loop's record is not the pod's gate-release state",
      records: [record('a', 'Resize', 5, 'intent', 'resize'), record('a', 'Blocked', 3)],
      blocked: ['a'],
    },
    {
      name: 'each pod by its own latest decision',
      records: [record('b', 'Blocked', 6), record('a', 'Hold', 5), record('a', 'Blocked', 3)],
      blocked: ['b'],
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () =>
      assert.deepEqual(Object.keys(blockedFromRecords(c.records)), c.blocked),
    );
  }
  await t.test(
    'the carried-over entry blocks the same pod version under the same commit, no longer',
    () => {
      const entry = blockedFromRecords([record('a', 'Blocked', now)]).a;
      assert.equal(blockedNow(entry, pod('7'), 'c1', now + 3_600_000), true);
      assert.equal(blockedNow(entry, pod('8'), 'c1', now), false);
      assert.equal(blockedNow(entry, pod('7'), 'c2', now), false);
    },
  );
});
