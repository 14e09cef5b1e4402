// Hold records a reviewer reads: one when the blocking condition set changes, not one per
// pacing flicker (issue 20: 18,000 Hold records for 1,180 pods in one release, the hold
// reason alternating between the budget and the in-flight limit as pods came and went).
// The exact reason of every change still reaches Events and metrics (`holdChanges`).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Decision } from '../../../src/decide/decision.ts';
import type { HoldState } from '../../../src/decide/expiry.ts';
import { snapshotOf } from '../../../src/decide/objects.ts';
import { emptyPlanState, planReleases, type PlanState } from '../../../src/decide/release-plan.ts';
import { HOLD_RECORD_QUIET_MS, recordVerdicts } from '../../../src/decide/release-record.ts';
import type { Verdict } from '../../../src/decide/release-verdict.ts';
import { ownedGate } from '../../../src/decide/gates.ts';
import type { Policy } from '../../../src/policy/model.ts';
import { aNode } from '../../builders/node.ts';
import { aPod, type PodBuilder } from '../../builders/pod.ts';
import { aGatePolicy, aPolicy, aTenant } from '../../builders/policy.ts';

const now = Date.UTC(2026, 10, 29, 8, 0, 0);
const gate = 'team-a.tollgate.io/ready';

interface Release {
  holdRecords: Decision[];
  holdChanges: number;
  released: number;
  /** Pods whose exact hold reason alternated (Budget -> Pacing -> Budget, or the reverse). */
  flapped: number;
  /** Pods whose exact hold reason changed after their first hold (Budget -> Pacing). */
  moved: number;
}

/**
 * A release of `size` gated pods under a pod budget and a max in flight: each pass, the
 * pods released last pass start running, the pods running for `runPasses` passes finish,
 * so a waiting pod is held now by the budget, now by the in-flight limit.
 */
function runRelease(size: number, budget: number, maxInFlight: number, runPasses = 3): Release {
  const policy: Policy = aPolicy()
    .tenant(aTenant('team-a').budget({ pods: budget }).pacing({ maxInFlight }))
    .gatePolicy(aGatePolicy('ready', 'team-a').conditions({ type: 'Budget' }))
    .obj();
  let gated = Array.from({ length: size }, (_, i) => `p${String(i).padStart(4, '0')}`);
  let pending: string[] = [];
  const running = new Map<string, number>();
  let state: PlanState = emptyPlanState;
  const out: Release = { holdRecords: [], holdChanges: 0, released: 0, flapped: 0, moved: 0 };
  const reasons = new Map<string, string[]>();
  for (let pass = 0; gated.length > 0 && pass < 10 * size; pass++) {
    const at = now + pass * 1000;
    const pods: PodBuilder[] = [
      ...gated.map((n, i) =>
        aPod(n, 'team-a')
          .gated(gate)
          .createdAt(now - size + i),
      ),
      ...pending.map((n) => aPod(n, 'team-a')),
      ...[...running.keys()].map((n) => aPod(n, 'team-a').boundTo('n1').running()),
    ];
    const plan = planReleases(
      policy,
      snapshotOf(
        pods.map((p) => p.obj()),
        [aNode('n1').obj()],
      ),
      state,
      at,
    );
    state = plan.nextState;
    out.holdRecords.push(...plan.decisions.filter((d) => d.kind === 'Hold'));
    out.holdChanges += plan.holdChanges.length;
    for (const change of plan.holdChanges) {
      const seen = reasons.get(change.target.name) ?? [];
      seen.push(change.reasonKey);
      reasons.set(change.target.name, seen);
    }
    for (const [name, since] of running) if (pass - since >= runPasses) running.delete(name);
    for (const name of pending) running.set(name, pass);
    const released = new Set(
      plan.decisions.filter((d) => d.kind === 'Release').map((d) => d.target.name),
    );
    out.released += released.size;
    pending = [...released];
    gated = gated.filter((n) => !released.has(n));
  }
  for (const seen of reasons.values()) {
    if (seen.some((r, i) => i >= 2 && r === seen[i - 2] && r !== seen[i - 1])) out.flapped += 1;
    if (seen.length >= 2) out.moved += 1;
  }
  return out;
}

const perPod = (records: readonly Decision[]) => {
  const counts = new Map<string, number>();
  for (const d of records) counts.set(d.target.name, (counts.get(d.target.name) ?? 0) + 1);
  return Math.max(...counts.values());
};

describe('Hold records in a release paced by a budget and a max in flight', () => {
  const release = runRelease(120, 12, 4);
  it('every pod is released; a held pod waits for the budget while the pods queued ahead fill it, then for pacing, and never flaps back', () => {
    assert.equal(release.released, 120);
    assert.ok(release.moved > 100, `only ${release.moved} pods moved from Budget to Pacing`);
    assert.equal(release.flapped, 0);
  });
  it('a pod waiting for capacity (budget or in-flight limit) is recorded held once, however often the limit that blocks it changes', () => {
    assert.equal(perPod(release.holdRecords), 1);
    assert.ok(release.holdRecords.length < 120, `${release.holdRecords.length} Hold records`);
  });
  it('every exact change of hold reason still reaches Events and metrics', () => {
    assert.ok(
      release.holdChanges >= release.holdRecords.length + release.moved,
      `${release.holdChanges} changes for ${release.holdRecords.length} records and ${release.moved} pods moved`,
    );
  });
});

describe('a Hold whose blocking condition set changes', () => {
  const policy = aPolicy()
    .tenant(aTenant('team-a'))
    .gatePolicy(aGatePolicy('ready', 'team-a'))
    .obj();
  const pod = aPod('p', 'team-a').gated(gate).obj();
  const owned = ownedGate(pod, policy)!;
  const hold = (reasonKey: string): Verdict => ({
    kind: 'Hold',
    pod,
    tenant: owned.tenant,
    gatePolicy: owned.gatePolicy,
    inputs: [],
    reasonKey,
    reason: `held by ${reasonKey}`,
  });
  /** Hold kinds recorded over a sequence of (time offset, reason key) passes. */
  function recorded(passes: readonly [number, string][]): string[] {
    let holds: ReadonlyMap<string, HoldState> = new Map();
    const out: string[] = [];
    for (const [offset, key] of passes) {
      const pass = recordVerdicts(policy, [hold(key)], holds, now + offset);
      holds = pass.holds;
      out.push(...pass.decisions.map((d) => `${offset}:${d.reason}`));
    }
    return out;
  }
  const quiet = HOLD_RECORD_QUIET_MS;
  const cases: { name: string; passes: [number, string][]; want: string[] }[] = [
    {
      name: 'is recorded at once when the pod was not held before',
      passes: [[0, 'Ready']],
      want: ['0:held by Ready'],
    },
    {
      name: 'is recorded again when a quiet time has passed since the last record',
      passes: [
        [0, 'Ready'],
        [quiet, 'Ready+Approved'],
      ],
      want: ['0:held by Ready', `${quiet}:held by Ready+Approved`],
    },
    {
      name: 'is not recorded when it changes back within the quiet time',
      passes: [
        [0, 'Ready'],
        [1000, 'Budget'],
        [2000, 'Ready'],
        [quiet + 1000, 'Ready'],
      ],
      want: ['0:held by Ready'],
    },
    {
      name: 'is recorded once the quiet time is over when the change stays',
      passes: [
        [0, 'Ready'],
        [1000, 'GangMember'],
        [2000, 'GangMember'],
        [quiet, 'GangMember'],
      ],
      want: ['0:held by Ready', `${quiet}:held by GangMember`],
    },
    {
      name: 'is not recorded when only the limit that paces it changes (Budget and Pacing are both capacity)',
      passes: [
        [0, 'Budget'],
        [quiet, 'Pacing'],
        [2 * quiet, 'Budget'],
      ],
      want: ['0:held by Budget'],
    },
  ];
  for (const c of cases) it(c.name, () => assert.deepEqual(recorded(c.passes), c.want));
  it('asks for a pass when the quiet time ends, so a change that stays is recorded without a cluster event', () => {
    const first = recordVerdicts(policy, [hold('Ready')], new Map(), now);
    const second = recordVerdicts(policy, [hold('GangMember')], first.holds, now + 1000);
    assert.deepEqual(second.decisions, []);
    assert.ok(second.wakeups.includes(now + quiet), `wakeups ${second.wakeups.join(',')}`);
  });
});
