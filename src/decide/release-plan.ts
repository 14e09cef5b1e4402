/**
 * One gate-release pass as a pure function:
 * `planReleases(policy, snapshot, state, now) -> { decisions, writes, nextState, requeueAfterMs }`.
 *
 * Phases, in order, each a pure function in its own file with its own tests:
 * 1. `classifyPods` (release-classify.ts): every pod from the cluster alone (released =
 *    no tollgate gate), charging pods whose release tollgate has sent but the view has
 *    not shown yet (`state.acting`), not charging pods being deleted or bound to a node
 *    not ready for longer than the tenant's grace;
 * 2. `judgePods` (release-judge.ts): per gated pod with no write pending (one pending
 *    decision per pod), approvals to cancel, conditions other than Budget, expiry; per
 *    orphaned gate (no GatePolicy names it), the tenant's `orphanedGates` action;
 * 3. `groupReleaseUnits` (release-units.ts): candidates into release units (a gang is one
 *    unit: all or none);
 * 4. `admitUnits` (release-admit.ts): units in priority order, fair across tenants by
 *    weight, each unit checked against the tenant budget (ramped after an increase), max
 *    in flight, batch size and the token buckets (global, tenant, policy);
 * 5. `recordVerdicts` (release-record.ts): what the phases concluded, in order, as
 *    decisions and writes; a Hold only when what blocks a pod changes in a way a
 *    reviewer cares about (debounced), so a quiet cluster produces no audit records.
 *
 * Safety never depends on `state`: budget and in-flight counts come from the snapshot
 * every pass, so a controller restarted with empty state cannot exceed them.
 */
import type { Decision, Target } from './decision.ts';
import type { HoldState } from './expiry.ts';
import type { BlockedWrite } from './release-blocked.ts';
import type { ChargeReason, FreeReason, PodState } from './lifecycle.ts';
import type { ClusterSnapshot } from './objects.ts';
import { normaliseServed, type Bucket, type Ramp } from './pacing.ts';
import { admitUnits } from './release-admit.ts';
import { gangReleasesOf, nextGangReleases, type GangReleases } from './release-gang-memory.ts';
import { chargeChanges } from './budget-charge.ts';
import { classifyPods, type FreedPod } from './release-classify.ts';
import { judgePods } from './release-judge.ts';
import { recordVerdicts, type HoldChange } from './release-record.ts';
import { groupReleaseUnits } from './release-units.ts';
import { nodeReadiness } from './unready-nodes.ts';
import type { Policy } from '../policy/model.ts';

/** A write the loop hands to the dispatcher; the shape mirrors dispatch's `WriteOperation`. */
export type PlannedOperation =
  | {
      readonly type: 'removeGate';
      readonly gate: string;
      readonly gateIndex: number;
      /** The pod is marked `tollgate.io/released` in the same patch (see lifecycle.ts). */
      readonly markReleased: { readonly annotationsPresent: boolean };
    }
  | { readonly type: 'delete'; readonly reason: string }
  | { readonly type: 'annotate'; readonly annotations: Readonly<Record<string, string | null>> };

export interface PlannedWrite {
  readonly key: string; // "namespace/name"
  readonly target: Target;
  readonly op: PlannedOperation;
  readonly priority: number;
  readonly tenant: string;
  readonly decisionId: string;
  /**
   * A gate removal forced by an expiry whose action is Release (the conditions were
   * waived): the stale-guard judges it as `ExpireRelease`, destructive by default.
   */
  readonly expiryForced: boolean;
  /**
   * The gang this release belongs to (its unit's key): the guard sends a gang's writes
   * all together or holds them all (loops/gate-release.ts guardWrites). Absent alone.
   */
  readonly unit?: string;
}

/**
 * A write tollgate decided and has not yet seen reflected in the view. A release names
 * its gate: a pod carrying two of tollgate's gates is done acting once that gate is gone,
 * and its next gate is judged by its own policy.
 */
export type Acting =
  | { readonly write: 'release'; readonly gate: string }
  | { readonly write: 'cancel' }
  | { readonly write: 'annotate' };

export interface PlanState {
  readonly buckets: Readonly<Record<string, Bucket>>;
  /** Releases served per backlogged tenant, for weighted fair share. */
  readonly served: Readonly<Record<string, number>>;
  readonly ramps: Readonly<Record<string, Readonly<Record<string, Ramp>>>>;
  /** uid -> why a held pod is held, since when, and its last Hold record (a Map: a pass rebuilds it, about 10,000 entries a pass). */
  readonly holds: ReadonlyMap<string, HoldState>;
  /**
   * uid -> the write decided for it, until the view shows it done (or the loop settles it
   * as failed). A Map: every pod's uid is looked up in it each pass, and a missed keyed
   * load of a uid (text from the API's JSON, not internalised) on an object was a third
   * of classifyPods in a 10,000-pod profile.
   */
  readonly acting: ReadonlyMap<string, Acting>;
  /** uid -> writes that failed finally (403/404/422): backing off, or Blocked (release-blocked.ts). */
  readonly blocked?: Readonly<Record<string, BlockedWrite>>;
  /** uid -> when its release with its whole gang was decided, while it keeps its gate (release-gang-memory.ts). */
  readonly gangReleases?: GangReleases;
  /** uid -> why a released pod is not charged to its tenant's budget (budget-charge.ts). */
  readonly freed?: Readonly<Record<string, FreeReason>>;
}

export const emptyPlanState: PlanState = {
  buckets: {},
  served: {},
  ramps: {},
  holds: new Map(),
  acting: new Map(),
};

export interface PlanOptions {
  /** How long a raised budget takes to open fully (hysteresis). */
  readonly budgetRampMs?: number;
}

export interface PassSummary {
  /** Gated pods by tenant and gate. */
  readonly gated: readonly { tenant: string; gate: string; count: number }[];
  /** Pods of each tenant by lifecycle state. */
  readonly states: Readonly<Record<string, Readonly<Record<PodState, number>>>>;
  /** Pods of each tenant charged to its budget, by why they are charged. */
  readonly charged: Readonly<Record<string, Readonly<Record<ChargeReason, number>>>>;
  /** Pods of each tenant that could be charged but are not: never gated, under `neverGatedPods: Ignore`. */
  readonly uncharged: Readonly<Record<string, number>>;
  /**
   * Pods of each tenant that would be charged but no longer are, by why: being deleted, or
   * bound to a node not Ready for longer than the tenant's `budget.unreadyNodeGrace`.
   */
  readonly freed: Readonly<Record<string, Readonly<Record<FreeReason, number>>>>;
  /** Per tenant with gated pods: when its oldest gated pod got its gate (epoch ms). */
  readonly oldestGatedAt: Readonly<Record<string, number>>;
}

export interface Plan {
  readonly decisions: readonly Decision[];
  /** Pods the pass held (gated, in review, or behind an orphaned gate), a write of tollgate's pending excepted. */
  readonly held: number;
  /** Held pods whose exact hold reason changed (Events, metrics); the audit records fewer. */
  readonly holdChanges: readonly HoldChange[];
  /** Released pods newly not charged this pass (node not Ready past the grace, or being deleted). */
  readonly newlyFreed: readonly FreedPod[];
  readonly writes: readonly PlannedWrite[];
  readonly nextState: PlanState;
  /** When the next pass is due even if nothing changes (refill, expiry, re-check); undefined = only on change. */
  readonly requeueAfterMs: number | undefined;
  readonly summary: PassSummary;
}

export function planReleases(
  policy: Policy,
  snapshot: ClusterSnapshot,
  state: PlanState,
  now: number,
  options: PlanOptions = {},
): Plan {
  const nodes = nodeReadiness(snapshot.nodes(), now);
  const classified = classifyPods(policy, [...snapshot.pods()], state.acting, nodes);
  const charges = chargeChanges(policy, classified, state.freed ?? {}, nodes);
  const judged = judgePods(
    policy,
    snapshot,
    classified,
    now,
    state.blocked ?? {},
    state.gangReleases ?? {},
  );
  const grouped = groupReleaseUnits(judged.candidates, classified);
  const admitted = admitUnits({
    policy,
    units: grouped.units,
    classified,
    state,
    now,
    rampMs: options.budgetRampMs ?? 10_000,
  });
  const verdicts = judged.verdicts.concat(grouped.verdicts, admitted.verdicts);
  const recorded = recordVerdicts(policy, verdicts, state.holds, now);
  const gangReleases = nextGangReleases(
    policy,
    classified.pods,
    state.gangReleases ?? {},
    gangReleasesOf(recorded.decisions),
  );
  const weights = new Map([...policy.tenants.values()].map((t) => [t.name, t.weight]));
  return {
    decisions: [...charges.decisions, ...recorded.decisions],
    held: classified.held.length,
    holdChanges: recorded.holdChanges,
    newlyFreed: charges.newlyFreed,
    writes: recorded.writes,
    nextState: {
      buckets: { ...state.buckets, ...admitted.buckets },
      served: normaliseServed(admitted.served, weights),
      ramps: admitted.ramps,
      holds: recorded.holds,
      acting: new Map([...classified.acting, ...Object.entries(recorded.acting)]),
      ...(state.blocked ? { blocked: state.blocked } : {}),
      ...(Object.keys(gangReleases).length > 0 ? { gangReleases } : {}),
      ...(Object.keys(charges.freed).length > 0 ? { freed: charges.freed } : {}),
    },
    requeueAfterMs: earliestWakeup(now, judged.wakeups, admitted.wakeups, recorded.wakeups),
    summary: classified.summary,
  };
}

/** Milliseconds until the earliest wakeup of any list (at least 1); undefined = only on change. */
export function earliestWakeup(now: number, ...lists: (readonly number[])[]): number | undefined {
  // Loops, not Math.min(...wakeups): a pass holding ~150,000 pods (a wake-up each) would
  // overflow the call stack with that many arguments; and the lists are not joined into
  // one (a copy of every held pod's wake-up per pass).
  let earliest = Infinity;
  for (const wakeups of lists)
    for (let i = 0; i < wakeups.length; i++) {
      const w = wakeups[i] as number;
      if (Number.isFinite(w)) earliest = Math.min(earliest, Math.max(0, w - now));
    }
  return earliest === Infinity ? undefined : Math.max(1, earliest);
}
