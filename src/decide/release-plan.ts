/**
 * One gate-release pass as a pure function:
 * `planReleases(policy, snapshot, state, now) -> { decisions, writes, nextState, requeueAfterMs }`.
 *
 * Steps, in order:
 * 1. classify every pod from the cluster alone (released = no tollgate gate), charging
 *    pods whose release tollgate has sent but the view has not shown yet (`state.acting`);
 * 2. per gated pod: approvals to cancel, conditions other than Budget, expiry;
 * 3. group candidates into release units (a gang is one unit: all or none);
 * 4. admit units in priority order, fair across tenants by weight, each unit checked
 *    against the tenant budget (ramped after an increase), max in flight, batch size and
 *    the token buckets (global, tenant, policy);
 * 5. record a Hold only when a pod's hold reason changes, so a quiet cluster produces no
 *    audit records.
 *
 * Safety never depends on `state`: budget and in-flight counts come from the snapshot
 * every pass, so a controller restarted with empty state cannot exceed them.
 */
import type { ConditionInput, Decision, DecisionKind, PolicyRef, Target } from './decision.ts';
import type { GatePolicy, Pacing, Policy, Tenant } from '../policy/model.ts';
import {
  addUsage,
  approvalFor,
  emptyUsage,
  evaluateApproved,
  evaluateBudget,
  evaluateGangComplete,
  evaluateImagePresent,
  indexNodeImages,
  evaluateObjectCondition,
  gangId,
  type NodeImageIndex,
  type BudgetLimits,
  type Usage,
} from './conditions.ts';
import { expiresAt, inReview, isExpired, nextHold, reviewMark, type HoldState } from './expiry.ts';
import { matchesSelector, ownedGate, tenantOfNamespace, type OwnedGate } from './gates.ts';
import {
  chargesBudget,
  classifyPod,
  isInFlight,
  podStates,
  REVIEW_ANNOTATION,
  type PodState,
} from './lifecycle.ts';
import { gateSetAt } from './expiry.ts';
import { podKey, type ClusterSnapshot, type PodLike } from './objects.ts';
import {
  bucketCapacity,
  canTake,
  combinePacing,
  msUntil,
  normaliseServed,
  rampBudget,
  refill,
  rejoinServed,
  take,
  virtualTime,
  type Bucket,
  type Ramp,
} from './pacing.ts';
import { podRequests } from './requests.ts';

/** A write the loop hands to the dispatcher; the shape mirrors dispatch's `WriteOperation`. */

/** A Release decided by an expiry whose action is Release starts its reason with this (the stale-guard's `ExpireRelease`). */
export const expiryReleasePrefix = 'expired (';
export type PlannedOperation =
  | { readonly type: 'removeGate'; readonly gate: string; readonly gateIndex: number }
  | { readonly type: 'delete'; readonly reason: string }
  | { readonly type: 'annotate'; readonly annotations: Readonly<Record<string, string | null>> };

export interface PlannedWrite {
  readonly key: string; // "namespace/name"
  readonly target: Target;
  readonly op: PlannedOperation;
  readonly priority: number;
  readonly tenant: string;
  readonly decisionId: string;
}

/** A write tollgate decided and has not yet seen reflected in the view. */
export type Acting = 'release' | 'cancel' | 'annotate';

export interface PlanState {
  readonly buckets: Readonly<Record<string, Bucket>>;
  /** Releases served per backlogged tenant, for weighted fair share. */
  readonly served: Readonly<Record<string, number>>;
  readonly ramps: Readonly<Record<string, Readonly<Record<string, Ramp>>>>;
  readonly holds: Readonly<Record<string, HoldState>>;
  /** uid -> the write decided for it, until the view shows it done (or the loop settles it as failed). */
  readonly acting: Readonly<Record<string, Acting>>;
}

export const emptyPlanState: PlanState = {
  buckets: {},
  served: {},
  ramps: {},
  holds: {},
  acting: {},
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
}

export interface Plan {
  readonly decisions: readonly Decision[];
  readonly writes: readonly PlannedWrite[];
  readonly nextState: PlanState;
  /** When the next pass is due even if nothing changes (refill, expiry, re-check); undefined = only on change. */
  readonly requeueAfterMs: number | undefined;
  readonly summary: PassSummary;
}

interface Candidate {
  readonly pod: PodLike;
  readonly owned: OwnedGate & { gatePolicy: GatePolicy };
  readonly inputs: ConditionInput[];
  readonly requests: Usage;
  readonly reasonPrefix: string;
}

interface Unit {
  readonly tenant: Tenant;
  readonly gatePolicy: GatePolicy;
  readonly members: Candidate[];
  readonly requests: Usage;
  readonly order: number;
  readonly key: string;
}

const LOOP = 'gate-release';

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

export function planReleases(
  policy: Policy,
  snapshot: ClusterSnapshot,
  state: PlanState,
  now: number,
  options: PlanOptions = {},
): Plan {
  const rampMs = options.budgetRampMs ?? 10_000;
  const pods = [...snapshot.pods()];
  const nodes = [...snapshot.nodes()];
  const decisions: Decision[] = [];
  const writes: PlannedWrite[] = [];
  const holds: Record<string, HoldState> = {};
  const acting: Record<string, Acting> = {};
  const wakeups: number[] = [];

  const decide = (
    kind: DecisionKind,
    pod: PodLike,
    tenant: Tenant,
    gatePolicy: GatePolicy | undefined,
    inputs: readonly ConditionInput[],
    reason: string,
  ): Decision => {
    const target = targetOf(pod);
    const decision: Decision = {
      // Unique per act: a pod decided again at the same resourceVersion (after a restart,
      // or a cancelled intent) gets a new id, so recovery never confuses two acts.
      id: `${LOOP}:${kind}:${target.uid}:${target.resourceVersion}:${now}`,
      at: now,
      loop: LOOP,
      kind,
      tenant: tenant.name,
      target,
      policy: policyRef(policy, gatePolicy, tenant),
      inputs,
      reason,
      outcome:
        kind === 'Hold' || kind === 'Expire' ? { result: 'recorded' } : { result: 'pending' },
    };
    decisions.push(decision);
    return decision;
  };
  const write = (
    decision: Decision,
    pod: PodLike,
    op: PlannedOperation,
    tenant: Tenant,
    priority: number,
  ): void => {
    writes.push({
      key: podKey(pod),
      target: decision.target,
      op,
      priority,
      tenant: tenant.name,
      decisionId: decision.id,
    });
  };

  // 1. Classify from the cluster; writes still in flight count as done.
  const stateOf = new Map<PodLike, PodState>();
  const stillActing = (pod: PodLike, kind: Acting, podState: PodState): boolean => {
    if (kind === 'release') return podState === 'gated' || podState === 'review';
    if (kind === 'cancel') return !pod.metadata?.deletionTimestamp;
    return !inReview(pod);
  };
  const usage = new Map<string, Usage>();
  const inFlight = new Map<string, number>();
  let globalInFlight = 0;
  const inFlightPods: PodLike[] = [];
  const summaryStates: Record<string, Record<PodState, number>> = {};
  const gatedCounts = new Map<string, { tenant: string; gate: string; count: number }>();
  for (const t of policy.tenants.values()) {
    usage.set(t.name, emptyUsage());
    inFlight.set(t.name, 0);
    summaryStates[t.name] = Object.fromEntries(podStates.map((s) => [s, 0])) as Record<
      PodState,
      number
    >;
  }
  for (const pod of pods) {
    let podState = classifyPod(pod, policy);
    const uid = pod.metadata?.uid ?? '';
    const previous = state.acting[uid];
    if (previous && stillActing(pod, previous, podState)) {
      acting[uid] = previous;
      if (previous === 'release') podState = 'pending';
    }
    stateOf.set(pod, podState);
    const tenant = tenantOfNamespace(policy, pod.metadata?.namespace ?? '');
    if (!tenant) continue;
    (summaryStates[tenant.name] as Record<PodState, number>)[podState] += 1;
    if (podState === 'gated' || podState === 'review') {
      const gate = ownedGate(pod, policy)?.gate ?? '';
      const key = `${tenant.name}\u0000${gate}`;
      const entry = gatedCounts.get(key) ?? { tenant: tenant.name, gate, count: 0 };
      entry.count += 1;
      gatedCounts.set(key, entry);
    }
    if (chargesBudget(podState))
      addUsage(usage.get(tenant.name) as Usage, { pods: 1, resources: podRequests(pod) });
    if (isInFlight(podState)) {
      inFlight.set(tenant.name, (inFlight.get(tenant.name) ?? 0) + 1);
      globalInFlight += 1;
      inFlightPods.push(pod);
    }
  }

  // Gang members: unfinished pods per (namespace, group label value).
  const gangMembers = (pod: PodLike, groupLabel: string): PodLike[] => {
    const value = pod.metadata?.labels?.[groupLabel];
    return pods.filter(
      (p) =>
        p.metadata?.namespace === pod.metadata?.namespace &&
        p.metadata?.labels?.[groupLabel] === value &&
        stateOf.get(p) !== 'succeeded' &&
        stateOf.get(p) !== 'failed' &&
        !p.metadata?.deletionTimestamp,
    );
  };

  // 2. Per gated pod: cancel approvals, conditions, expiry.
  const candidates: Candidate[] = [];
  let imageIndex: NodeImageIndex | undefined; // built once, on the first ImagePresent
  const hold = (
    pod: PodLike,
    tenant: Tenant,
    gatePolicy: GatePolicy | undefined,
    inputs: readonly ConditionInput[],
    reasonKey: string,
    reason: string,
  ): void => {
    const uid = pod.metadata?.uid ?? '';
    const recheck = gatePolicy?.recheck ?? { initialMs: 10_000, maxMs: 300_000, maxAttempts: 10 };
    const { hold: next, changed } = nextHold(state.holds[uid], reasonKey, recheck, now);
    holds[uid] = next;
    if (next.nextCheckAt !== undefined) wakeups.push(next.nextCheckAt);
    if (changed) decide('Hold', pod, tenant, gatePolicy, inputs, reason);
  };

  for (const pod of pods) {
    const podState = stateOf.get(pod);
    if (podState !== 'gated' && podState !== 'review') continue;
    if (pod.metadata?.deletionTimestamp) continue;
    const owned = ownedGate(pod, policy) as OwnedGate;
    const { tenant, gatePolicy } = owned;
    if (!gatePolicy) {
      hold(
        pod,
        tenant,
        undefined,
        [],
        'NoPolicy',
        `no GatePolicy for gate ${owned.gate} selects this pod`,
      );
      continue;
    }
    const cancel = approvalFor(policy.approvals, pod, 'Cancel', now);
    if (cancel) {
      const inputs: ConditionInput[] = [
        {
          condition: 'Approved',
          met: true,
          value: {
            approval: cancel.name,
            action: 'Cancel',
            approvedBy: cancel.approvedBy,
            file: cancel.source.file,
          },
        },
      ];
      const reason = `approval ${cancel.name} by ${cancel.approvedBy}: ${cancel.reason}`;
      const d = decide('Cancel', pod, tenant, gatePolicy, inputs, reason);
      write(d, pod, { type: 'delete', reason }, tenant, gatePolicy.priority);
      acting[pod.metadata?.uid ?? ''] = 'cancel';
      continue;
    }

    const inputs: ConditionInput[] = [];
    for (const condition of gatePolicy.conditions) {
      switch (condition.type) {
        case 'Budget':
          break; // judged per release unit in step 4, next to everything released this pass
        case 'ImagePresent':
          imageIndex ??= indexNodeImages(nodes);
          inputs.push(evaluateImagePresent(pod, condition.minNodes, imageIndex));
          break;
        case 'ObjectCondition':
          inputs.push(evaluateObjectCondition(pod, condition, snapshot));
          break;
        case 'GangComplete':
          inputs.push(evaluateGangComplete(pod, condition, gangMembers(pod, condition.groupLabel)));
          break;
        case 'Approved':
          inputs.push(evaluateApproved(pod, policy.approvals, now));
          break;
      }
    }
    const failing = inputs.filter((i) => !i.met).map((i) => i.condition);
    const requests = { pods: 1, resources: podRequests(pod) };
    const owned2 = owned as Candidate['owned'];
    if (failing.length === 0) {
      candidates.push({ pod, owned: owned2, inputs, requests, reasonPrefix: 'conditions met' });
      continue;
    }

    const expiry = gatePolicy.expiry;
    if (!expiry || !isExpired(gatePolicy, pod, now)) {
      const at = expiresAt(gatePolicy, pod);
      if (at !== undefined) wakeups.push(at);
      hold(pod, tenant, gatePolicy, inputs, failing.join('+'), `waiting for ${failing.join(', ')}`);
      continue;
    }
    const age = `gated ${Math.round((now - (gateSetAt(pod) ?? now)) / 1000)}s, expiry after ${Math.round(expiry.afterMs / 1000)}s`;
    switch (expiry.action) {
      case 'Release':
        candidates.push({
          pod,
          owned: owned2,
          inputs,
          requests,
          reasonPrefix: `${expiryReleasePrefix}${age}); policy action Release waives ${failing.join(', ')}`,
        });
        break;
      case 'Cancel': {
        decide('Expire', pod, tenant, gatePolicy, inputs, `${age}; action Cancel`);
        const reason = `expired (${age}) waiting for ${failing.join(', ')}`;
        const d = decide('Cancel', pod, tenant, gatePolicy, inputs, reason);
        write(d, pod, { type: 'delete', reason }, tenant, gatePolicy.priority);
        acting[pod.metadata?.uid ?? ''] = 'cancel';
        break;
      }
      case 'Review': {
        if (!inReview(pod)) {
          decide('Expire', pod, tenant, gatePolicy, inputs, `${age}; action Review`);
          const d = decide(
            'Review',
            pod,
            tenant,
            gatePolicy,
            inputs,
            `expired (${age}) waiting for ${failing.join(', ')}; awaiting an Approval`,
          );
          write(
            d,
            pod,
            { type: 'annotate', annotations: { [REVIEW_ANNOTATION]: reviewMark(gatePolicy, now) } },
            tenant,
            gatePolicy.priority,
          );
          acting[pod.metadata?.uid ?? ''] = 'annotate';
          break;
        }
        const approved = evaluateApproved(pod, policy.approvals, now);
        if (approved.met) {
          candidates.push({
            pod,
            owned: owned2,
            inputs: [...inputs, approved],
            requests,
            reasonPrefix: 'in review; approved',
          });
        } else {
          hold(
            pod,
            tenant,
            gatePolicy,
            [...inputs, approved],
            'Review',
            'in review: waiting for an Approval (Release or Cancel)',
          );
        }
        break;
      }
    }
  }

  // 3. Release units: a gang goes whole or not at all.
  const units: Unit[] = [];
  const byGang = new Map<string, Candidate[]>();
  const candidateUids = new Set(candidates.map((c) => c.pod.metadata?.uid));
  for (const candidate of candidates) {
    const gang = candidate.owned.gatePolicy.conditions.find((c) => c.type === 'GangComplete');
    const id = gang ? gangId(candidate.pod, gang) : undefined;
    if (gang && id !== undefined) {
      const list = byGang.get(id) ?? [];
      list.push(candidate);
      byGang.set(id, list);
      continue;
    }
    units.push(unitOf([candidate]));
  }
  for (const [id, members] of byGang) {
    const first = members[0] as Candidate;
    const gang = first.owned.gatePolicy.conditions.find(
      (c) => c.type === 'GangComplete',
    ) as Extract<GatePolicy['conditions'][number], { type: 'GangComplete' }>;
    const gatedMembers = gangMembers(first.pod, gang.groupLabel).filter((p) => {
      const s = stateOf.get(p);
      return s === 'gated' || s === 'review';
    });
    const notReady = gatedMembers.filter((p) => !candidateUids.has(p.metadata?.uid));
    if (notReady.length > 0) {
      const names = notReady.map((p) => p.metadata?.name).join(', ');
      for (const m of members) {
        hold(
          m.pod,
          m.owned.tenant,
          m.owned.gatePolicy,
          m.inputs,
          'GangMember',
          `gang ${id}: members not ready (${names})`,
        );
      }
      continue;
    }
    units.push(unitOf(members));
  }

  // 4. Admission: priority, then weighted fair share, under budget and pacing.
  const buckets: Record<string, Bucket> = {};
  const bucketOf = (key: string, pacing: Pacing): Bucket => {
    buckets[key] ??= refill(
      state.buckets[key],
      pacing.releasesPerSecond,
      bucketCapacity(pacing),
      now,
    );
    return buckets[key];
  };
  const globalPacing = policy.settings.pacing;
  const ramps: Record<string, Record<string, Ramp>> = {};
  const limits = new Map<string, BudgetLimits>();
  for (const tenant of policy.tenants.values()) {
    const ramped = rampBudget(state.ramps[tenant.name], tenant.budget, now, rampMs);
    ramps[tenant.name] = ramped.ramps;
    limits.set(tenant.name, ramped.limits);
    if (ramped.rampingUntil !== undefined) wakeups.push(ramped.rampingUntil);
  }
  const policyInFlight = (tenant: Tenant, gatePolicy: GatePolicy): number =>
    inFlightPods.filter(
      (p) =>
        tenant.namespaces.includes(p.metadata?.namespace ?? '') &&
        matchesSelector(p.metadata?.labels ?? {}, gatePolicy.selector),
    ).length;
  const policyInFlightCount = new Map<string, number>();

  const queues = new Map<string, Unit[]>();
  for (const unit of units) {
    const list = queues.get(unit.tenant.name) ?? [];
    list.push(unit);
    queues.set(unit.tenant.name, list);
  }
  for (const list of queues.values()) {
    list.sort(
      (a, b) =>
        b.gatePolicy.priority - a.gatePolicy.priority ||
        a.order - b.order ||
        a.key.localeCompare(b.key),
    );
  }
  const backlogged = [...queues.keys()].map((name) => ({
    name,
    weight: (policy.tenants.get(name) as Tenant).weight,
  }));
  const served = rejoinServed(state.served, backlogged);
  let releasedThisPass = 0;
  const releasedByTenant = new Map<string, number>();
  const releasedByPolicy = new Map<string, number>();
  let globalBlock: string | undefined;
  const tenantBlock = new Map<string, string>();
  const policyBlock = new Map<string, string>();

  const pacingHold = (unit: Unit, why: string): void => {
    for (const m of unit.members) {
      hold(
        m.pod,
        unit.tenant,
        unit.gatePolicy,
        [...m.inputs, { condition: 'Pacing', met: false, value: why }],
        'Pacing',
        `queued: ${why}`,
      );
    }
  };

  for (;;) {
    // Next unit: highest priority among queue heads, then lowest virtual time, then tenant name.
    let best: { tenant: string; unit: Unit } | undefined;
    for (const [name, list] of queues) {
      const head = list[0];
      if (!head) continue;
      if (
        !best ||
        head.gatePolicy.priority > best.unit.gatePolicy.priority ||
        (head.gatePolicy.priority === best.unit.gatePolicy.priority &&
          (virtualTime(served, name, head.tenant.weight) <
            virtualTime(served, best.tenant, best.unit.tenant.weight) ||
            (virtualTime(served, name, head.tenant.weight) ===
              virtualTime(served, best.tenant, best.unit.tenant.weight) &&
              name < best.tenant)))
      ) {
        best = { tenant: name, unit: head };
      }
    }
    if (!best) break;
    const unit = (queues.get(best.tenant) as Unit[]).shift() as Unit;
    const { tenant, gatePolicy } = unit;
    const cost = unit.members.length;
    const tenantPacing = tenant.pacing;
    const policyPacing = combinePacing(tenant.pacing, gatePolicy.pacing);
    const policyKey = `${tenant.name}/${gatePolicy.name}`;

    if (globalBlock) {
      pacingHold(unit, globalBlock);
      continue;
    }
    if (tenantBlock.has(tenant.name)) {
      pacingHold(unit, tenantBlock.get(tenant.name) as string);
      continue;
    }
    if (policyBlock.has(policyKey)) {
      pacingHold(unit, policyBlock.get(policyKey) as string);
      continue;
    }

    // Budget first: it is a condition of the pod, and a smaller unit behind may still fit.
    const budget = evaluateBudget(
      usage.get(tenant.name) as Usage,
      unit.requests,
      limits.get(tenant.name) as BudgetLimits,
    );
    const wantsBudget = gatePolicy.conditions.some((c) => c.type === 'Budget');
    if (wantsBudget && !budget.met) {
      for (const m of unit.members) {
        const why =
          cost > 1 ? `budget does not fit the whole gang (${cost} pods)` : 'waiting for Budget';
        hold(m.pod, tenant, gatePolicy, [...m.inputs, budget], 'Budget', why);
      }
      continue;
    }

    const pInFlight = policyInFlightCount.get(policyKey) ?? policyInFlight(tenant, gatePolicy);
    policyInFlightCount.set(policyKey, pInFlight);
    const exceedsForever =
      cost > globalPacing.maxInFlight ||
      cost > tenantPacing.maxInFlight ||
      cost > policyPacing.maxInFlight;
    if (exceedsForever) {
      pacingHold(unit, `unit of ${cost} pods is larger than maxInFlight; it can never be released`);
      continue;
    }
    const checks: [scope: 'global' | 'tenant' | 'policy', ok: boolean, why: string][] = [
      [
        'global',
        globalInFlight + cost <= globalPacing.maxInFlight,
        `global maxInFlight ${globalPacing.maxInFlight} reached`,
      ],
      [
        'tenant',
        (inFlight.get(tenant.name) ?? 0) + cost <= tenantPacing.maxInFlight,
        `tenant maxInFlight ${tenantPacing.maxInFlight} reached`,
      ],
      [
        'policy',
        pInFlight + cost <= policyPacing.maxInFlight,
        `policy maxInFlight ${policyPacing.maxInFlight} reached`,
      ],
      [
        'global',
        releasedThisPass === 0 || releasedThisPass + cost <= globalPacing.batchSize,
        `global batch of ${globalPacing.batchSize} done`,
      ],
      [
        'tenant',
        (releasedByTenant.get(tenant.name) ?? 0) === 0 ||
          (releasedByTenant.get(tenant.name) ?? 0) + cost <= tenantPacing.batchSize,
        `tenant batch of ${tenantPacing.batchSize} done`,
      ],
      [
        'policy',
        (releasedByPolicy.get(policyKey) ?? 0) === 0 ||
          (releasedByPolicy.get(policyKey) ?? 0) + cost <= policyPacing.batchSize,
        `policy batch of ${policyPacing.batchSize} done`,
      ],
    ];
    const bucketChecks: [scope: 'global' | 'tenant' | 'policy', key: string, pacing: Pacing][] = [
      ['global', 'global', globalPacing],
      ['tenant', `tenant:${tenant.name}`, tenantPacing],
      ['policy', `policy:${policyKey}`, policyPacing],
    ];
    for (const [scope, key, pacing] of bucketChecks) {
      const bucket = bucketOf(key, pacing);
      const capacity = bucketCapacity(pacing);
      const ok = canTake(bucket, cost, capacity);
      if (!ok) wakeups.push(now + msUntil(bucket, cost, pacing.releasesPerSecond, capacity));
      checks.push([scope, ok, `${scope} release rate ${pacing.releasesPerSecond}/s`]);
    }
    const failed = checks.find(([, ok]) => !ok);
    if (failed) {
      const [scope, , why] = failed;
      if (scope === 'global') globalBlock = why;
      else if (scope === 'tenant') tenantBlock.set(tenant.name, why);
      else policyBlock.set(policyKey, why);
      pacingHold(unit, why);
      continue;
    }

    // Admit the unit.
    for (const [, key] of bucketChecks) buckets[key] = take(buckets[key] as Bucket, cost);
    addUsage(usage.get(tenant.name) as Usage, unit.requests);
    inFlight.set(tenant.name, (inFlight.get(tenant.name) ?? 0) + cost);
    globalInFlight += cost;
    policyInFlightCount.set(policyKey, pInFlight + cost);
    releasedThisPass += cost;
    releasedByTenant.set(tenant.name, (releasedByTenant.get(tenant.name) ?? 0) + cost);
    releasedByPolicy.set(policyKey, (releasedByPolicy.get(policyKey) ?? 0) + cost);
    served[tenant.name] = (served[tenant.name] ?? 0) + cost;
    for (const m of unit.members) {
      const inputs = wantsBudget ? [...m.inputs, budget] : m.inputs;
      const reason =
        cost > 1 ? `${m.reasonPrefix}; gang of ${cost} released together` : m.reasonPrefix;
      const d = decide('Release', m.pod, tenant, gatePolicy, inputs, reason);
      write(
        d,
        m.pod,
        { type: 'removeGate', gate: m.owned.gate, gateIndex: m.owned.index },
        tenant,
        gatePolicy.priority,
      );
      acting[m.pod.metadata?.uid ?? ''] = 'release';
    }
  }

  const weights = new Map([...policy.tenants.values()].map((t) => [t.name, t.weight]));
  const future = wakeups.filter((w) => Number.isFinite(w)).map((w) => Math.max(0, w - now));
  const requeueAfterMs = future.length ? Math.max(1, Math.min(...future)) : undefined;
  const keptBuckets: Record<string, Bucket> = { ...state.buckets, ...buckets };

  return {
    decisions,
    writes,
    nextState: {
      buckets: keptBuckets,
      served: normaliseServed(served, weights),
      ramps,
      holds,
      acting,
    },
    requeueAfterMs,
    summary: { gated: [...gatedCounts.values()], states: summaryStates },
  };
}

function unitOf(members: Candidate[]): Unit {
  const first = members[0] as Candidate;
  const requests = emptyUsage();
  for (const m of members) addUsage(requests, m.requests);
  const order = Math.min(...members.map((m) => gateSetAt(m.pod) ?? 0));
  return {
    tenant: first.owned.tenant,
    gatePolicy: first.owned.gatePolicy,
    members,
    requests,
    order,
    key: members.map((m) => podKey(m.pod)).sort()[0] as string,
  };
}
