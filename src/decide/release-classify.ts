/**
 * Phase 1 of a gate-release pass: classify every pod from the cluster alone (released =
 * no tollgate gate), counting writes tollgate has decided but the view does not show yet
 * (`acting`) as done (one pending decision per pod: the judge skips such pods), and total
 * what the budget and pacing phases need: each tenant's charged usage (by `chargeReason`:
 * released by tollgate, or never gated when the tenant charges those; minus the pods
 * `budgetFreedBy` frees: being deleted, or on a node not ready past the tenant's grace),
 * the pods in flight, and the pass summary.
 */
import { addUsage, emptyUsage, type Usage } from './conditions.ts';
import { gateSetAt, inReview } from './expiry.ts';
import { gateIndex, ownedGate, ownedGates, tenantOfNamespace, type OwnedGate } from './gates.ts';
import {
  budgetFreedBy,
  chargeReason,
  chargesBudget,
  chargeReasons,
  classifyPod,
  freeReasons,
  isInFlight,
  podStates,
  releasedByTollgate,
  type ChargeReason,
  type FreeReason,
  type PodState,
} from './lifecycle.ts';
import { timestampMs, type PodLike } from './objects.ts';
import { podRequests } from './requests.ts';
import type { Acting, PassSummary } from './release-plan.ts';
import { allNodesReady, type NodeReadiness } from './unready-nodes.ts';
import type { Policy, Tenant } from '../policy/model.ts';
import { formatDuration } from '../lib/clock.ts';

export interface Classification {
  readonly pods: readonly PodLike[];
  /** The state of each pod: `states[i]` is `pods[i]`'s. */
  readonly states: readonly PodState[];
  /**
   * A pod's state looked up by its object (gang members): the map is made on the first
   * question, so a pass without gangs makes none (a map of every pod per pass was a fifth
   * of a steady 10,000-pod pass's garbage).
   */
  readonly stateOf: PodStates;
  /**
   * The pods the judge phase looks at, in pod order: gated, in review or orphaned, each
   * with its state and its first gate of tollgate's (`ownedGate`, found once per pass).
   */
  readonly held: readonly HeldPod[];
  /** uid -> a write of tollgate's still not shown by the view (carried over from the previous pass while the view lags). */
  readonly acting: ReadonlyMap<string, Acting>;
  /** Per tenant: requests of the pods that charge its budget. */
  readonly usage: ReadonlyMap<string, Usage>;
  /** Per tenant: pods released but not yet scheduled. */
  readonly inFlight: ReadonlyMap<string, number>;
  readonly globalInFlight: number;
  readonly inFlightPods: readonly PodLike[];
  /** Released pods no longer charged: node not Ready past the grace, or being deleted. */
  readonly freedPods: readonly FreedPod[];
  readonly summary: PassSummary;
}

export interface PodStates {
  get(pod: PodLike): PodState | undefined;
}

/** `stateOf`: pods to states, by a map made when first asked. */
function podStatesOf(pods: readonly PodLike[], states: readonly PodState[]): PodStates {
  let byPod: Map<PodLike, PodState> | undefined;
  return {
    get(pod) {
      if (byPod === undefined) {
        byPod = new Map();
        for (let i = 0; i < pods.length; i++) byPod.set(pods[i] as PodLike, states[i] as PodState);
      }
      return byPod.get(pod);
    },
  };
}

export interface HeldPod {
  readonly pod: PodLike;
  readonly state: 'gated' | 'review' | 'orphaned';
  readonly owned: OwnedGate | undefined;
}

export interface FreedPod {
  readonly pod: PodLike;
  readonly tenant: Tenant;
  readonly reason: FreeReason;
  readonly message: string;
}

function freedMessage(
  pod: PodLike,
  tenant: Tenant,
  reason: FreeReason,
  nodes: NodeReadiness,
): string {
  if (reason === 'terminating')
    return `no longer charged to tenant ${tenant.name}'s budget: the pod is being deleted`;
  const node = pod.spec?.nodeName ?? '';
  const since = new Date(nodes.notReadySince.get(node) ?? nodes.now).toISOString();
  return `no longer charged to tenant ${tenant.name}'s budget: node ${node} not Ready since ${since}, for longer than the tenant's budget.unreadyNodeGrace (${formatDuration(tenant.budget.unreadyNodeGraceMs)})`;
}

/** Is the write decided for this pod still not shown by the view? */
export function stillActing(pod: PodLike, acting: Acting): boolean {
  switch (acting.write) {
    case 'release':
      return gateIndex(pod, acting.gate) >= 0;
    case 'cancel':
      return !pod.metadata?.deletionTimestamp;
    case 'annotate':
      return !inReview(pod);
  }
}

/**
 * The state a pod counts in while a write of tollgate's is pending: a pod whose gate is
 * being removed is in flight (charged), unless another gate of tollgate's stays on it
 * (it still cannot be scheduled; that gate is judged once the view shows this one gone).
 */
function stateWhileActing(
  pod: PodLike,
  acting: Acting,
  podState: PodState,
  policy: Policy,
): PodState {
  if (acting.write !== 'release') return podState;
  const others = ownedGates(pod, policy).filter((g) => g.gate !== acting.gate);
  return others.length > 0 ? podState : 'pending';
}

export function classifyPods(
  policy: Policy,
  pods: readonly PodLike[],
  previouslyActing: ReadonlyMap<string, Acting>,
  nodes: NodeReadiness = allNodesReady,
): Classification {
  const stateList: PodState[] = [];
  const held: HeldPod[] = [];
  const acting = new Map<string, Acting>();
  const usage = new Map<string, Usage>();
  const inFlight = new Map<string, number>();
  let globalInFlight = 0;
  const inFlightPods: PodLike[] = [];
  const freedPods: FreedPod[] = [];
  const states: Record<string, Record<PodState, number>> = {};
  const charged: Record<string, Record<ChargeReason, number>> = {};
  const uncharged: Record<string, number> = {};
  const freed: Record<string, Record<FreeReason, number>> = {};
  const gatedCounts: GatedCounts = { inOrder: [], byTenant: new Map() };
  const oldestGatedAt: Record<string, number> = {};
  const anyActing = previouslyActing.size > 0;
  for (const t of policy.tenants.values()) {
    usage.set(t.name, emptyUsage());
    inFlight.set(t.name, 0);
    states[t.name] = Object.fromEntries(podStates.map((s) => [s, 0])) as Record<PodState, number>;
    charged[t.name] = Object.fromEntries(chargeReasons.map((r) => [r, 0])) as Record<
      ChargeReason,
      number
    >;
    uncharged[t.name] = 0;
    freed[t.name] = Object.fromEntries(freeReasons.map((r) => [r, 0])) as Record<
      FreeReason,
      number
    >;
  }
  for (let i = 0; i < pods.length; i++) {
    const pod = pods[i] as PodLike;
    const owned = ownedGate(pod, policy);
    let podState = classifyPod(pod, policy, owned);
    const uid = pod.metadata?.uid ?? '';
    const previous = anyActing ? previouslyActing.get(uid) : undefined;
    const actingNow = previous !== undefined && stillActing(pod, previous) ? previous : undefined;
    if (actingNow !== undefined) {
      acting.set(uid, actingNow);
      podState = stateWhileActing(pod, actingNow, podState, policy);
    }
    stateList.push(podState);
    if (podState === 'gated' || podState === 'review' || podState === 'orphaned')
      held.push({ pod, state: podState, owned });
    const tenant = tenantOfNamespace(policy, pod.metadata?.namespace ?? '');
    if (!tenant) continue;
    (states[tenant.name] as Record<PodState, number>)[podState] += 1;
    if (podState === 'gated' || podState === 'review') {
      countGated(gatedCounts, tenant.name, owned?.gate ?? '');
      const setAt = gateSetAt(pod);
      if (setAt !== undefined && !(setAt >= (oldestGatedAt[tenant.name] ?? Infinity)))
        oldestGatedAt[tenant.name] = setAt;
    }
    const releasing = actingNow?.write === 'release';
    const reason = chargeReason(pod, podState, tenant, releasing);
    // Only a pod that would be charged is freed (a pod never charged frees nothing).
    const freedBy = reason ? budgetFreedBy(pod, tenant, nodes) : undefined;
    if (freedBy) {
      (freed[tenant.name] as Record<FreeReason, number>)[freedBy] += 1;
      const message = freedMessage(pod, tenant, freedBy, nodes);
      freedPods.push({ pod, tenant, reason: freedBy, message });
    } else if (reason) {
      (charged[tenant.name] as Record<ChargeReason, number>)[reason] += 1;
      addUsage(usage.get(tenant.name) as Usage, { pods: 1, resources: podRequests(pod) });
    } else if (chargesBudget(podState)) uncharged[tenant.name] = (uncharged[tenant.name] ?? 0) + 1;
    if (isInFlight(podState)) {
      inFlight.set(tenant.name, (inFlight.get(tenant.name) ?? 0) + 1);
      globalInFlight += 1;
      inFlightPods.push(pod);
    }
  }
  return {
    pods,
    states: stateList,
    stateOf: podStatesOf(pods, stateList),
    held,
    acting,
    usage,
    inFlight,
    globalInFlight,
    inFlightPods,
    freedPods,
    summary: {
      gated: gatedCounts.inOrder,
      states,
      charged,
      uncharged,
      freed,
      oldestGatedAt,
    },
  };
}

interface GatedCount {
  readonly tenant: string;
  readonly gate: string;
  count: number;
}

/** Gated pods by tenant and gate, in the order first met. */
interface GatedCounts {
  readonly inOrder: GatedCount[];
  readonly byTenant: Map<string, Map<string, GatedCount>>;
}

/** One more gated pod of this tenant under this gate. */
function countGated(counts: GatedCounts, tenant: string, gate: string): void {
  let byGate = counts.byTenant.get(tenant);
  if (!byGate) {
    byGate = new Map();
    counts.byTenant.set(tenant, byGate);
  }
  const entry = byGate.get(gate);
  if (entry) {
    entry.count += 1;
    return;
  }
  const first = { tenant, gate, count: 1 };
  byGate.set(gate, first);
  counts.inOrder.push(first);
}

/** Gang members: unfinished pods in the pod's namespace with the same group label value. */
export function gangMembers(
  pod: PodLike,
  groupLabel: string,
  classified: Pick<Classification, 'pods' | 'states'>,
): readonly PodLike[] {
  return membersOf(gangIndex(classified, groupLabel).unfinished, pod, groupLabel) ?? [];
}

/**
 * The members a gang pod counts as present: its unfinished members, and the members
 * tollgate released (marked `tollgate.io/released`) that were scheduled while this pod
 * existed and have finished since. A gang released in part (one member's write failed,
 * or its leader died between writes) is completed: its straggler, decided again after
 * the others ran, still has its whole gang. Finished pods of an earlier run of the group
 * (scheduled before this pod was created) do not count.
 */
export function gangMembersPresent(
  pod: PodLike,
  groupLabel: string,
  classified: Pick<Classification, 'pods' | 'states'>,
): readonly PodLike[] {
  // One key and one index lookup for both lists (asked once per gang pod of a pass).
  const index = gangIndex(classified, groupLabel);
  const unfinished = membersOf(index.unfinished, pod, groupLabel) ?? [];
  const finished = membersOf(index.finished, pod, groupLabel);
  if (finished === undefined) return unfinished;
  const created = timestampMs(pod.metadata?.creationTimestamp) ?? Infinity;
  const ranWithIt = (finished ?? []).filter(
    (p) =>
      releasedByTollgate(p) && (scheduledAt(p) ?? -Infinity) >= Math.floor(created / 1000) * 1000,
  );
  // The index's own list when none of them counts: members judged alike share their
  // GangComplete input by it (release-judge.ts).
  return ranWithIt.length === 0 ? unfinished : [...unfinished, ...ranWithIt];
}

function scheduledAt(pod: PodLike): number | undefined {
  const scheduled = pod.status?.conditions?.find(
    (c) => c.type === 'PodScheduled' && c.status === 'True',
  );
  return timestampMs(scheduled?.lastTransitionTime);
}

/** The group label's value, or a stand-in for a pod without it (those group together). */
function gangValueOf(pod: PodLike, groupLabel: string): string {
  return pod.metadata?.labels?.[groupLabel] ?? '\u0001';
}

/**
 * Pods by namespace, then group label value: looked up with the pod's own strings, whose
 * hashes are kept once computed. A key string per pod (namespace and value joined) was
 * made, flattened and hashed anew for every pod, twice per gang pod of a pass.
 */
type GangLists = Map<string, Map<string, PodLike[]>>;

function membersOf(lists: GangLists, pod: PodLike, groupLabel: string): PodLike[] | undefined {
  return lists.get(pod.metadata?.namespace ?? '')?.get(gangValueOf(pod, groupLabel));
}

function addMember(lists: GangLists, pod: PodLike, groupLabel: string): void {
  const namespace = pod.metadata?.namespace ?? '';
  let byValue = lists.get(namespace);
  if (byValue === undefined) {
    byValue = new Map();
    lists.set(namespace, byValue);
  }
  const value = gangValueOf(pod, groupLabel);
  const members = byValue.get(value);
  if (members) members.push(pod);
  else byValue.set(value, [pod]);
}

interface GangIndex {
  readonly unfinished: GangLists;
  readonly finished: GangLists;
}

/**
 * Pods by namespace and group label value (unfinished and finished apart; pods being
 * deleted left out), built once per classification and label (a pass asks for the
 * members of every gang pod: a scan per question would make a pass quadratic in pods).
 * Remembered beside the classification's states list, which is new for every pass.
 */
const gangIndexes = new WeakMap<
  readonly PodState[],
  { pods: readonly PodLike[]; byLabel: Map<string, GangIndex> }
>();

function gangIndex(
  classified: Pick<Classification, 'pods' | 'states'>,
  groupLabel: string,
): GangIndex {
  let memo = gangIndexes.get(classified.states);
  if (memo?.pods !== classified.pods) {
    memo = { pods: classified.pods, byLabel: new Map() };
    gangIndexes.set(classified.states, memo);
  }
  let index = memo.byLabel.get(groupLabel);
  if (index) return index;
  index = { unfinished: new Map(), finished: new Map() };
  for (let i = 0; i < classified.pods.length; i++) {
    const p = classified.pods[i] as PodLike;
    if (p.metadata?.deletionTimestamp) continue;
    const state = classified.states[i];
    const done = state === 'succeeded' || state === 'failed';
    addMember(done ? index.finished : index.unfinished, p, groupLabel);
  }
  memo.byLabel.set(groupLabel, index);
  return index;
}
