/**
 * The demo's rules about time, driven by an injected clock: its own approval counts from
 * the moment the demo runs for a few hours, whatever the date.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { loadPolicyFromFiles, readPolicyDirectory } from '../../../src/policy/load.ts';
import { formatPolicyError } from '../../../src/policy/errors.ts';
import { approvalFor } from '../../../src/decide/conditions.ts';
import { ManualClock, systemClock } from '../../../src/lib/clock.ts';
import {
  APPROVAL_HOURS,
  APPROVED,
  ProgressLines,
  approvalFile,
  approvalMergeAt,
} from '../../../scripts/demo-time.ts';
import { aPod } from '../../builders/pod.ts';

const examples = resolve(import.meta.dirname, '../../../policy-examples');
const HOUR = 3_600_000;
const YEAR = 365.25 * 24 * HOUR;

/** policy-examples/ plus the demo's approval commit, as `tollgate run` reads them. */
async function demoPolicy(now: number) {
  const { files } = await readPolicyDirectory(examples);
  const result = loadPolicyFromFiles([...files, approvalFile(now)]);
  assert.ok(result.ok, result.ok ? '' : result.errors.map(formatPolicyError).join('\n'));
  return result.policy;
}

for (const [when, start] of [
  ['today', systemClock.now()],
  ['ten years from today', systemClock.now() + 10 * YEAR],
] as const) {
  test(`a demo run ${when}: its approval releases the approved load from the start until ${APPROVAL_HOURS}h later, not after`, async () => {
    const clock = new ManualClock(start);
    const policy = await demoPolicy(clock.now());
    const load = aPod(APPROVED.name, APPROVED.namespace).obj();
    const demoApproval = (now: number) => approvalFor(policy.approvals, load, 'Release', now);
    assert.equal(demoApproval(clock.now())?.name, 'demo-nightly-load-approved');
    clock.advance(APPROVAL_HOURS * HOUR - 1);
    assert.equal(demoApproval(clock.now())?.name, 'demo-nightly-load-approved');
    clock.advance(1);
    assert.equal(demoApproval(clock.now()), undefined, 'still approved after it expired');
  });
}

test("the demo approves a load of its own, not the example approval's target", async () => {
  const policy = await demoPolicy(systemClock.now());
  const examplesOnly = policy.approvals.filter((a) => a.name !== 'demo-nightly-load-approved');
  const load = aPod(APPROVED.name, APPROVED.namespace).obj();
  assert.equal(approvalFor(examplesOnly, load, 'Release', systemClock.now()), undefined);
});

// ---- the approval's merge second

// A Git commit time and a creationTimestamp are whole seconds, so an approval merged in
// the second its load was created does not reach the load (decide/approvals.ts). The
// demo merges its approval right after creating the pods: in CI the two fell in one
// second and the approved load stayed gated.
for (const createdMs of [0, 1, 500, 999]) {
  test(`a load created ${createdMs} ms into a second: the demo's approval, merged when approvalMergeAt says, reaches it`, async () => {
    const second = Math.floor(systemClock.now() / 1000) * 1000;
    const created = second + createdMs;
    const load = aPod(APPROVED.name, APPROVED.namespace).createdAt(created).obj();
    for (const now of [created, created + 1, second + 999]) {
      const mergedAt = approvalMergeAt(load, now);
      assert.ok(mergedAt >= now, 'an approval is merged now or later, never in the past');
      const policy = await demoPolicy(now);
      const approvals = policy.approvals.map((a) =>
        a.name === 'demo-nightly-load-approved' ? { ...a, mergedAt } : a,
      );
      assert.equal(
        approvalFor(approvals, load, 'Release', mergedAt)?.name,
        'demo-nightly-load-approved',
        `merged at ${mergedAt - second} ms for a load created at ${createdMs} ms, asked at ${now - second} ms`,
      );
    }
  });
}

test('a load created in an earlier second: the demo merges at once', () => {
  const now = systemClock.now();
  const load = aPod(APPROVED.name, APPROVED.namespace)
    .createdAt(now - 1000)
    .obj();
  assert.equal(approvalMergeAt(load, now), now);
});

test('a load with no creation time (not read back from the API server): an error that says so', () => {
  const load = aPod(APPROVED.name, APPROVED.namespace).obj();
  delete load.metadata!.creationTimestamp;
  assert.throws(
    () => approvalMergeAt(load, 7_000_250),
    /etl\/nightly-load-approved has no creationTimestamp/,
  );
});

// ---- progress lines when stdout is not a terminal

const SECOND = 1000;

/** Feeds one state per second of clock time; returns the seconds at which a line printed. */
function printedAt(states: readonly string[], everyMs = 10 * SECOND): number[] {
  const clock = new ManualClock(0);
  const lines = new ProgressLines(clock, everyMs);
  const printed: number[] = [];
  for (const state of states) {
    if (lines.due(state)) printed.push(clock.now() / SECOND);
    clock.advance(SECOND);
  }
  return printed;
}

test('a progress line prints for the first state and for every change, in order', () => {
  assert.deepEqual(printedAt(['a', 'b', 'b', 'c', 'a']), [0, 1, 3, 4]);
});

test('an unchanged state prints again only every 10 s of clock time, not every second', () => {
  const states = Array.from({ length: 35 }, () => 'same');
  assert.deepEqual(printedAt(states), [0, 10, 20, 30]);
});

test('a change restarts the 10 s: the next unchanged line is 10 s after the change', () => {
  const states = [
    ...Array.from({ length: 4 }, () => 'a'),
    ...Array.from({ length: 16 }, () => 'b'),
  ];
  assert.deepEqual(printedAt(states), [0, 4, 14]);
});

test('the interval is the caller’s: every 3 s', () => {
  assert.deepEqual(
    printedAt(
      Array.from({ length: 7 }, () => 'x'),
      3 * SECOND,
    ),
    [0, 3, 6],
  );
});
