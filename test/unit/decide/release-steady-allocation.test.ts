// What a steady gate-release pass allocates: a process holding 10,000 pods plans them
// again and again while nothing changes (the held pods' re-checks, the expiry sweep), and
// every byte a pass makes is garbage that a busy process promotes to its old generation
// (`tollgate run` at 10,000 held pods grew by 16 MiB between two collections, and each
// pass allocated about 26 MB). Bytes, not time: counted by V8's sampling heap profiler
// over three passes, so the figure does not move with the machine's load.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ClusterSnapshot } from '../../../src/decide/objects.ts';
import { emptyPlanState, planReleases, type PlanState } from '../../../src/decide/release-plan.ts';
import type { Policy } from '../../../src/policy/model.ts';
import {
  budgetHeldPolicy,
  budgetHeldWorld,
  planNow as now,
  steadyPolicy,
  steadyWorld,
} from '../../../bench/plan-world.ts';
import { bytesAllocatedBy } from '../../support/allocated-bytes.ts';

const count = 10_000;
/**
 * Per held pod and pass: a pass over unchanged pods makes next to nothing per pod (181 to
 * 193 bytes measured, the lists a pass hands from phase to phase; 2,679 held by their
 * budget and 1,207 waiting for their images before a pass handed on what it made last).
 */
const bytesPerPodLimit = 300;

/**
 * Bytes allocated per pass over the same pods: the mean of three passes, after twenty
 * that let V8 optimise the pass as a long-running process has (unoptimised code makes
 * garbage optimised code does not). The passes are 100 ms apart: no held pod's re-check
 * (10 s after its first hold) falls due among them.
 */
async function bytesPerSteadyPass(
  policy: Policy,
  snapshotAt: (pass: number) => ClusterSnapshot,
): Promise<number> {
  let state: PlanState = emptyPlanState;
  const plan = (pass: number) => {
    const planned = planReleases(policy, snapshotAt(pass), state, now + pass * 100);
    assert.equal(planned.held, count, 'every pod is held');
    assert.equal(planned.writes.length, 0);
    state = planned.nextState;
  };
  for (let pass = 0; pass < 20; pass++) plan(pass);
  const bytes = await bytesAllocatedBy(() => {
    for (let pass = 20; pass < 23; pass++) plan(pass);
  });
  return bytes / 3;
}

describe('a steady pass over 10,000 held pods', () => {
  it(`allocates under ${bytesPerPodLimit} bytes per pod when its budget holds them`, async () => {
    const world = budgetHeldWorld(count);
    const perPod = (await bytesPerSteadyPass(budgetHeldPolicy(), world.snapshotAt)) / count;
    assert.ok(perPod < bytesPerPodLimit, `${perPod.toFixed(0)} bytes per pod and pass`);
  });

  it(`allocates under ${bytesPerPodLimit} bytes per pod when they wait for their images`, async () => {
    const world = steadyWorld(count);
    const perPod = (await bytesPerSteadyPass(steadyPolicy(), world.snapshotAt)) / count;
    assert.ok(perPod < bytesPerPodLimit, `${perPod.toFixed(0)} bytes per pod and pass`);
  });
});
