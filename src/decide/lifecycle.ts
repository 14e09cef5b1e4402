/**
 * Where a pod stands in tollgate's eyes, for metrics, status and the budget. Derived
 * from the pod alone (plus which gates are ours), never from memory, so a restarted
 * controller sees exactly what the last one left: a released pod is one without our gate.
 */
import type { Policy, Tenant } from '../policy/model.ts';
import { orphanedGate, ownedGate, type OwnedGate } from './gates.ts';
import type { PodLike } from './objects.ts';
import { shownReleasedCondition } from './released-condition.ts';
import type { NodeReadiness } from './unready-nodes.ts';

export const REVIEW_ANNOTATION = 'tollgate.io/review';
/**
 * Set by tollgate in the same JSON patch that removes its gate (value: the gate removed),
 * so a pod tollgate released is told apart from one it never gated.
 */
export const RELEASED_ANNOTATION = 'tollgate.io/released';

export const podStates = [
  'gated', // carries tollgate's gate
  'review', // gated, expired, waiting for a human decision (annotation tollgate.io/review)
  'orphaned', // carries a gate under its tenant's prefixes that no GatePolicy names (tenant's orphanedGates applies)
  'waiting', // no gate of ours, another controller's gate still on it (ours removed, or never ours)
  'pending', // released, no gates left, not yet bound: in flight for the scheduler
  'unschedulable', // released, scheduler said PodScheduled=False Unschedulable
  'scheduled', // bound to a node, not yet running
  'running',
  'succeeded',
  'failed',
] as const;
export type PodState = (typeof podStates)[number];

/** `owned`: the pod's `ownedGate`, when the caller has it already (a pass asks once per pod). */
export function classifyPod(
  pod: PodLike,
  policy: Policy,
  owned: OwnedGate | undefined = ownedGate(pod, policy),
): PodState {
  const phase = pod.status?.phase;
  if (phase === 'Succeeded') return 'succeeded';
  if (phase === 'Failed') return 'failed';
  if (owned) {
    return pod.metadata?.annotations?.[REVIEW_ANNOTATION] !== undefined ? 'review' : 'gated';
  }
  if (orphanedGate(pod, policy)) return 'orphaned';
  if (!pod.spec?.nodeName) {
    if ((pod.spec?.schedulingGates ?? []).length > 0) return 'waiting';
    const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
    if (scheduled?.status === 'False' && scheduled.reason === 'Unschedulable')
      return 'unschedulable';
    return 'pending';
  }
  return phase === 'Running' ? 'running' : 'scheduled';
}

/** Released but not yet scheduled: what `maxInFlight` bounds. */
export function isInFlight(state: PodState): boolean {
  return state === 'pending' || state === 'unschedulable';
}

/**
 * Released and unfinished: what the tenant budget charges. A pod that still carries any
 * scheduling gate, ours or another controller's (Kueue's `kueue.x-k8s.io/admission`, say),
 * cannot be scheduled, so it takes nothing from the budget: charging it would let pods
 * another controller holds starve tollgate's own. It is charged once its last gate goes.
 */
export function chargesBudget(state: PodState): boolean {
  return (
    state === 'pending' || state === 'unschedulable' || state === 'scheduled' || state === 'running'
  );
}

/** Why a pod takes from its tenant's budget: tollgate released it, or it never gated it. */
export const chargeReasons = ['released', 'neverGated'] as const;
export type ChargeReason = (typeof chargeReasons)[number];

/**
 * How the gate removal marks this pod released: the JSON patch adds the annotation into
 * the pod's annotations, or adds the annotations map when the pod has none (decided on
 * the version the patch tests, so it never replaces annotations it did not see).
 */
export function releaseMarkFor(pod: PodLike): { readonly annotationsPresent: boolean } {
  return { annotationsPresent: Object.keys(pod.metadata?.annotations ?? {}).length > 0 };
}

export function releasedByTollgate(pod: PodLike): boolean {
  return pod.metadata?.annotations?.[RELEASED_ANNOTATION] !== undefined;
}

/**
 * Why this pod, in this state, is charged to its tenant's budget, or undefined when it is
 * not. A pod tollgate released (its mark, or `releasing`: tollgate's gate removal is sent
 * and the view does not show it yet) is always charged, and so is a pod tollgate held
 * whose gate was removed by hand (its `tollgate.io/Released` condition); any other pod that can be
 * scheduled or runs only when the tenant's `budget.neverGatedPods` is Charge.
 */
export function chargeReason(
  pod: PodLike,
  state: PodState,
  tenant: Pick<Tenant, 'budget'>,
  releasing = false,
): ChargeReason | undefined {
  if (!chargesBudget(state)) return undefined;
  if (releasing || releasedByTollgate(pod)) return 'released';
  // tollgate held it (its condition is on the pod) and the gate went by hand: break-glass.
  if (shownReleasedCondition(pod) !== undefined) return 'released';
  return tenant.budget.neverGatedPods === 'Charge' ? 'neverGated' : undefined;
}

/** Why a pod that would be charged is not: it is being deleted, or its node is not ready. */
export const freeReasons = ['nodeNotReady', 'terminating'] as const;
export type FreeReason = (typeof freeReasons)[number];

/**
 * Why this pod, which can be scheduled or runs, no longer takes from its tenant's budget,
 * or undefined when it still does. A pod being deleted (deletionTimestamp) frees its place
 * at once, as the Job controller replaces a terminating pod; a pod bound to a node whose
 * Ready condition has been False or Unknown for the tenant's `budget.unreadyNodeGrace`
 * cannot run there and is evicted about then by the node lifecycle controller: its
 * replacement must be releasable, so a failed node never stops its tenant.
 */
export function budgetFreedBy(
  pod: PodLike,
  tenant: Pick<Tenant, 'budget'>,
  nodes: NodeReadiness,
): FreeReason | undefined {
  if (pod.metadata?.deletionTimestamp) return 'terminating';
  const node = pod.spec?.nodeName;
  const since = node ? nodes.notReadySince.get(node) : undefined;
  if (since === undefined) return undefined;
  return nodes.now - since >= tenant.budget.unreadyNodeGraceMs ? 'nodeNotReady' : undefined;
}
