/**
 * Phase 5 of a gate-release pass: record the verdicts, in order, as decisions and the
 * writes that carry them out. Every other verdict is a decision with a write, and the
 * pod counts as acted on until the view shows the write.
 *
 * A Hold is a decision without a write, recorded in the audit trail only when what
 * blocks the pod changes in a way a reviewer cares about (`reviewedHoldKey`): the budget
 * and the pacing limits are one thing to a reviewer (the pod waits for capacity), so a
 * pod that a release wave holds now by its budget, now by the in-flight limit, is
 * recorded held once. Other changes are debounced: recorded at once when the last Hold
 * record of the pod is `HOLD_RECORD_QUIET_MS` old, else when that quiet time ends (a
 * wake-up) if the change has stayed. Every exact change of reason is in `holdChanges`,
 * for Events and metrics; a quiet cluster produces no audit records.
 */
import type { ConditionInput, Decision, DecisionKind, PolicyRef, Target } from './decision.ts';
import { nextHold, type HoldState } from './expiry.ts';
import { releaseMarkFor, REVIEW_ANNOTATION } from './lifecycle.ts';
import { podKey, type PodLike } from './objects.ts';
import type { Acting, PlannedOperation, PlannedWrite } from './release-plan.ts';
import type { Verdict } from './release-verdict.ts';
import type { GatePolicy, Policy, Tenant } from '../policy/model.ts';

const LOOP = 'gate-release';
/** A pod held with no GatePolicy re-checks on this schedule. */
const defaultRecheck: GatePolicy['recheck'] = {
  initialMs: 10_000,
  maxMs: 300_000,
  maxAttempts: 10,
};

/** Between two Hold records of one pod whose blocking conditions changed. */
export const HOLD_RECORD_QUIET_MS = 60_000;

/** The pacing limits and the budget: a pod whose own conditions hold waits for capacity. */
const capacityKeys = new Set(['Budget', 'Pacing']);

/** What a reviewer tells apart among hold reasons: capacity, or the exact blocking set. */
export function reviewedHoldKey(reasonKey: string): string {
  return capacityKeys.has(reasonKey) ? 'Capacity' : reasonKey;
}

/** An exact change of a held pod's reason (Events and metrics; the audit may skip it). */
export interface HoldChange {
  readonly target: Target;
  readonly tenant: string;
  readonly reasonKey: string;
  readonly reason: string;
}

type HoldRecordDue = { readonly now: true } | { readonly now: false; readonly at?: number };

/** Whether a Hold for `key` is recorded now, later (at the end of the quiet time), or not. */
export function holdRecordDue(
  recorded: HoldState['recorded'],
  key: string,
  now: number,
): HoldRecordDue {
  if (recorded === undefined) return { now: true };
  if (recorded.key === key) return { now: false };
  const quietEnds = recorded.at + HOLD_RECORD_QUIET_MS;
  return now >= quietEnds ? { now: true } : { now: false, at: quietEnds };
}

export interface RecordedPass {
  readonly decisions: readonly Decision[];
  /** Every held pod whose exact hold reason changed this pass. */
  readonly holdChanges: readonly HoldChange[];
  readonly writes: readonly PlannedWrite[];
  /** Hold state of every held pod (a pod not held this pass is dropped). */
  readonly holds: ReadonlyMap<string, HoldState>;
  /** uid -> the write decided this pass. */
  readonly acting: Readonly<Record<string, Acting>>;
  /** When a held pod is due for a re-check. */
  readonly wakeups: readonly number[];
}

export function recordVerdicts(
  policy: Policy,
  verdicts: readonly Verdict[],
  previousHolds: ReadonlyMap<string, HoldState>,
  now: number,
): RecordedPass {
  const decisions: Decision[] = [];
  const writes: PlannedWrite[] = [];
  // The next hold states: made at the first held pod not held as it was (`keptHolds`);
  // until then `kept` counts the pods held as they were, and if every held pod was, the
  // previous map is the next one (no map of every held pod made per steady pass).
  let holds: Map<string, HoldState> | undefined;
  let kept = 0;
  const acting: Record<string, Acting> = {};
  const wakeups: number[] = [];
  const holdChanges: HoldChange[] = [];
  const refs = policyRefs(policy);
  const idOf = decisionIds(now);
  // Looked up per held pod only when there is something to find: a first pass (or one
  // after a restart) holds every pod with no previous hold, and a missed lookup by a uid
  // string is a slow keyed load (about 0.15 µs per held pod in a 50,000-pod profile).
  const anyPreviousHold = previousHolds.size > 0;
  const firstHolds: FirstHolds = new Map();
  const decide = (
    verdict: Verdict,
    kind: DecisionKind,
    reason = verdict.reason,
    target = targetOf(verdict.pod),
  ): Decision => {
    const decision = decisionOf(refs, idOf(kind, target), verdict, kind, reason, now, target);
    decisions.push(decision);
    return decision;
  };
  const write = (
    decision: Decision,
    verdict: Verdict,
    op: PlannedOperation,
    expiryForced = false,
    unit?: string,
  ) => {
    writes.push({
      key: podKey(verdict.pod),
      target: decision.target,
      op,
      priority: (verdict.gatePolicy as GatePolicy).priority,
      tenant: verdict.tenant.name,
      decisionId: decision.id,
      expiryForced,
      ...(unit === undefined ? {} : { unit }),
    });
  };
  for (let i = 0; i < verdicts.length; i++) {
    const verdict = verdicts[i] as Verdict;
    const uid = verdict.pod.metadata?.uid ?? '';
    switch (verdict.kind) {
      case 'Hold': {
        const previous = anyPreviousHold ? previousHolds.get(uid) : undefined;
        if (previous !== undefined && heldAsBefore(verdict, previous, now)) {
          if (holds === undefined) kept += 1;
          else holds.set(uid, previous);
          if (previous.nextCheckAt !== undefined) wakeups.push(previous.nextCheckAt);
          break;
        }
        const held =
          previous === undefined
            ? firstHoldOf(verdict, firstHolds, now, wakeups)
            : holdOf(verdict, previous, now, wakeups);
        if (holds === undefined && held.hold === previous) kept += 1;
        else (holds ??= keptHolds(verdicts, i, previousHolds)).set(uid, held.hold);
        if (!held.changed && !held.record) break;
        // The hold change and the Hold decision name the same pod: one target for both.
        const target = targetOf(verdict.pod);
        if (held.changed) holdChanges.push(holdChangeOf(verdict, target));
        if (held.record) decide(verdict, 'Hold', verdict.reason, target);
        break;
      }
      case 'Cancel': {
        if (verdict.expiredReason !== undefined) decide(verdict, 'Expire', verdict.expiredReason);
        write(decide(verdict, 'Cancel'), verdict, { type: 'delete', reason: verdict.reason });
        acting[uid] = { write: 'cancel' };
        break;
      }
      case 'Review': {
        if (verdict.expiredReason !== undefined) decide(verdict, 'Expire', verdict.expiredReason);
        const annotations = { [REVIEW_ANNOTATION]: verdict.mark };
        write(decide(verdict, 'Review'), verdict, { type: 'annotate', annotations });
        acting[uid] = { write: 'annotate' };
        break;
      }
      case 'Release': {
        const { gate, index } = verdict.gate;
        const markReleased = releaseMarkFor(verdict.pod);
        const op: PlannedOperation = { type: 'removeGate', gate, gateIndex: index, markReleased };
        write(decide(verdict, 'Release'), verdict, op, verdict.expiryForced, verdict.unit);
        acting[uid] = { write: 'release', gate };
        break;
      }
    }
  }
  const nextHolds =
    holds ??
    (kept === previousHolds.size
      ? previousHolds
      : keptHolds(verdicts, verdicts.length, previousHolds));
  return { decisions, holdChanges, writes, holds: nextHolds, acting, wakeups };
}

/**
 * The hold states of the held pods among the first `end` verdicts, every one held as it
 * was: their previous states, in verdict order.
 */
function keptHolds(
  verdicts: readonly Verdict[],
  end: number,
  previousHolds: ReadonlyMap<string, HoldState>,
): Map<string, HoldState> {
  const holds = new Map<string, HoldState>();
  for (let i = 0; i < end; i++) {
    const verdict = verdicts[i] as Verdict;
    if (verdict.kind !== 'Hold') continue;
    const uid = verdict.pod.metadata?.uid ?? '';
    holds.set(uid, previousHolds.get(uid) as HoldState);
  }
  return holds;
}

type HeldNext = { hold: HoldState; changed: boolean; record: boolean };

/** First holds made this pass, by reason key, with the re-check schedule they were made for. */
type FirstHolds = Map<string, { readonly recheck: GatePolicy['recheck']; readonly held: HeldNext }>;

/**
 * The next hold state of a pod held with no hold before (a first pass holds every pod so):
 * it depends on the reason key, the re-check schedule and now alone, so the pods held
 * alike share one (read only), as `holdOf` makes it. A 50,000-pod first pass made two
 * objects and a result for each of 49,000 held pods.
 */
function firstHoldOf(
  verdict: Verdict & { kind: 'Hold' },
  made: FirstHolds,
  now: number,
  wakeups: number[],
): HeldNext {
  const recheck = verdict.gatePolicy?.recheck ?? defaultRecheck;
  const known = made.get(verdict.reasonKey);
  if (known !== undefined && known.recheck === recheck) {
    // The wake-ups `holdOf` would add: a first hold is recorded now (no quiet-time end).
    if (known.held.hold.nextCheckAt !== undefined) wakeups.push(known.held.hold.nextCheckAt);
    return known.held;
  }
  const held = holdOf(verdict, undefined, now, wakeups);
  made.set(verdict.reasonKey, { recheck, held });
  return held;
}

/**
 * Whether a pod is held as it was: the same reason, its re-check not due, and a record of
 * this reason already made. `holdOf` then hands back the previous state, unchanged and not
 * recorded, with its re-check as the only wake-up; this answers that without making its
 * result, for what most held pods of a steady pass are.
 */
function heldAsBefore(
  verdict: Verdict & { kind: 'Hold' },
  previous: HoldState,
  now: number,
): boolean {
  return (
    previous.reasonKey === verdict.reasonKey &&
    (previous.nextCheckAt === undefined || now < previous.nextCheckAt) &&
    previous.recorded?.key === reviewedHoldKey(verdict.reasonKey)
  );
}

/**
 * A held pod's next hold state, whether its exact reason changed, and whether to record
 * it; its wake-ups (the re-check, the end of the quiet time) go into `wakeups`.
 */
function holdOf(
  verdict: Verdict & { kind: 'Hold' },
  previous: HoldState | undefined,
  now: number,
  wakeups: number[],
): HeldNext {
  const recheck = verdict.gatePolicy?.recheck ?? defaultRecheck;
  const { hold, changed } = nextHold(previous, verdict.reasonKey, recheck, now);
  const key = reviewedHoldKey(verdict.reasonKey);
  const due = holdRecordDue(previous?.recorded, key, now);
  const recorded = due.now ? { key, at: now } : previous?.recorded;
  if (hold.nextCheckAt !== undefined) wakeups.push(hold.nextCheckAt);
  if (!due.now && due.at !== undefined) wakeups.push(due.at);
  // A pod held as it was, not re-checked and not recorded, keeps its state object.
  const same = hold === previous && recorded === previous?.recorded;
  return {
    hold: recorded && !same ? { ...hold, recorded } : hold,
    changed,
    record: due.now,
  };
}

function holdChangeOf(verdict: Verdict, target: Target): HoldChange {
  const reasonKey = verdict.kind === 'Hold' ? verdict.reasonKey : verdict.kind;
  return {
    target,
    tenant: verdict.tenant.name,
    reasonKey,
    reason: verdict.reason,
  };
}

function decisionOf(
  refs: PolicyRefs,
  id: string,
  verdict: Verdict,
  kind: DecisionKind,
  reason: string,
  now: number,
  target: Target,
): Decision {
  const inputs: readonly ConditionInput[] = verdict.inputs;
  return {
    id,
    at: now,
    loop: LOOP,
    kind,
    tenant: verdict.tenant.name,
    target,
    policy: refs(verdict.gatePolicy, verdict.tenant),
    inputs,
    reason,
    outcome: kind === 'Hold' || kind === 'Expire' ? RECORDED : PENDING,
  };
}

/**
 * Decision ids `gate-release:<kind>:<uid>:<resourceVersion>:<now>`, unique per act: a pod
 * decided again at the same resourceVersion (after a restart, or a cancelled intent) gets
 * a new id, so recovery never confuses two acts. The head per kind and the tail are made
 * once per pass: a template per decision built each piece again as a chain of partial
 * strings, kept with the decision (about 50,000 decisions in a first 50,000-pod pass).
 */
function decisionIds(now: number): (kind: DecisionKind, target: Target) => string {
  const heads = new Map<DecisionKind, string>();
  const tail = `:${now}`;
  return (kind, target) => {
    let head = heads.get(kind);
    if (head === undefined) {
      head = `${LOOP}:${kind}:`;
      heads.set(kind, head);
    }
    return `${head}${target.uid}:${target.resourceVersion}${tail}`;
  };
}

/** The two outcomes a new decision starts with, shared by every decision (never changed). */
const RECORDED: Decision['outcome'] = Object.freeze({ result: 'recorded' });
const PENDING: Decision['outcome'] = Object.freeze({ result: 'pending' });

type PolicyRefs = (gatePolicy: GatePolicy | undefined, tenant: Tenant) => PolicyRef;

/** `policyRef`, one object per GatePolicy or tenant in a pass (decisions share it, read only). */
function policyRefs(policy: Policy): PolicyRefs {
  const made = new Map<GatePolicy | Tenant, PolicyRef>();
  return (gatePolicy, tenant) => {
    const by = gatePolicy ?? tenant;
    let ref = made.get(by);
    if (!ref) {
      ref = policyRef(policy, gatePolicy, tenant);
      made.set(by, ref);
    }
    return ref;
  };
}

function targetOf(pod: PodLike): Target {
  return {
    namespace: pod.metadata?.namespace ?? '',
    name: pod.metadata?.name ?? '',
    uid: pod.metadata?.uid ?? '',
    resourceVersion: pod.metadata?.resourceVersion ?? '',
  };
}

function policyRef(policy: Policy, gatePolicy: GatePolicy | undefined, tenant: Tenant): PolicyRef {
  return gatePolicy
    ? { commit: policy.commit, file: gatePolicy.source.file, name: gatePolicy.name }
    : { commit: policy.commit, file: tenant.source.file, name: tenant.name };
}
