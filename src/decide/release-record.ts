/**
 * Phase 5 of a gate-release pass: record the verdicts, in order, as decisions and the
 * writes that carry them out. A Hold is recorded only when the pod's hold reason changes
 * (with a re-check backoff), so a quiet cluster produces no audit records; every other
 * verdict is a decision with a write, and the pod counts as acted on until the view
 * shows the write.
 */
import type { ConditionInput, Decision, DecisionKind, PolicyRef, Target } from './decision.ts';
import { nextHold, type HoldState } from './expiry.ts';
import { REVIEW_ANNOTATION } from './lifecycle.ts';
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

export interface RecordedPass {
  readonly decisions: readonly Decision[];
  readonly writes: readonly PlannedWrite[];
  /** Hold state of every held pod (a pod not held this pass is dropped). */
  readonly holds: Readonly<Record<string, HoldState>>;
  /** uid -> the write decided this pass. */
  readonly acting: Readonly<Record<string, Acting>>;
  /** When a held pod is due for a re-check. */
  readonly wakeups: readonly number[];
}

export function recordVerdicts(
  policy: Policy,
  verdicts: readonly Verdict[],
  previousHolds: Readonly<Record<string, HoldState>>,
  now: number,
): RecordedPass {
  const decisions: Decision[] = [];
  const writes: PlannedWrite[] = [];
  const holds: Record<string, HoldState> = {};
  const acting: Record<string, Acting> = {};
  const wakeups: number[] = [];
  const decide = (verdict: Verdict, kind: DecisionKind, reason = verdict.reason): Decision => {
    const decision = decisionOf(policy, verdict, kind, reason, now);
    decisions.push(decision);
    return decision;
  };
  const write = (
    decision: Decision,
    verdict: Verdict,
    op: PlannedOperation,
    expiryForced = false,
  ) => {
    writes.push({
      key: podKey(verdict.pod),
      target: decision.target,
      op,
      priority: (verdict.gatePolicy as GatePolicy).priority,
      tenant: verdict.tenant.name,
      decisionId: decision.id,
      expiryForced,
    });
  };
  for (const verdict of verdicts) {
    const uid = verdict.pod.metadata?.uid ?? '';
    switch (verdict.kind) {
      case 'Hold': {
        const recheck = verdict.gatePolicy?.recheck ?? defaultRecheck;
        const { hold, changed } = nextHold(previousHolds[uid], verdict.reasonKey, recheck, now);
        holds[uid] = hold;
        if (hold.nextCheckAt !== undefined) wakeups.push(hold.nextCheckAt);
        if (changed) decide(verdict, 'Hold');
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
        const op: PlannedOperation = { type: 'removeGate', gate, gateIndex: index };
        write(decide(verdict, 'Release'), verdict, op, verdict.expiryForced);
        acting[uid] = { write: 'release', gate };
        break;
      }
    }
  }
  return { decisions, writes, holds, acting, wakeups };
}

function decisionOf(
  policy: Policy,
  verdict: Verdict,
  kind: DecisionKind,
  reason: string,
  now: number,
): Decision {
  const target = targetOf(verdict.pod);
  const inputs: readonly ConditionInput[] = verdict.inputs;
  return {
    // Unique per act: a pod decided again at the same resourceVersion (after a restart,
    // or a cancelled intent) gets a new id, so recovery never confuses two acts.
    id: `${LOOP}:${kind}:${target.uid}:${target.resourceVersion}:${now}`,
    at: now,
    loop: LOOP,
    kind,
    tenant: verdict.tenant.name,
    target,
    policy: policyRef(policy, verdict.gatePolicy, verdict.tenant),
    inputs,
    reason,
    outcome: kind === 'Hold' || kind === 'Expire' ? { result: 'recorded' } : { result: 'pending' },
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
