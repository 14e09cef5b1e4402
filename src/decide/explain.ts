/**
 * Why a gated pod waits and when it would go, as data: the phases of a gate-release pass
 * (classify -> judge -> units -> admit, release-plan.ts) run on the snapshot, and each
 * gated pod's verdict explained with its tenant's order, budget, pacing and expiry.
 * `tollgate explain` and `tollgate queue` print these.
 *
 * Seen from outside the controller, the pass starts from empty plan state: token buckets
 * full, no releases in flight that the cluster does not show yet. So "Release" here means
 * "releasable on the controller's next pass unless its bucket is empty".
 *
 * The estimate (`estimate.basis` says which one applies):
 * - releasable now: now;
 * - held only by pacing: now + (pods ahead of it in its tenant's release order that only
 *   pacing holds, plus itself) / the slowest release rate of global, tenant and policy
 *   pacing. It assumes no higher-priority pod arrives, budget and in-flight room last and
 *   the buckets are full: a lower bound at the current pace, not a promise;
 * - held only by its Schedule: when its next window opens (or its expiry, action Release,
 *   when that comes first);
 * - held by a condition, budget, review or its gang: no time (it depends on something
 *   other than pace); when its expiry releases it anyway, the expiry deadline bounds it.
 */
import { byCodeUnits } from '../lib/compare.ts';
import type { ConditionInput } from './decision.ts';
import type { Usage } from './conditions.ts';
import {
  podConditionsOf,
  podLifeOf,
  type PodConditionView,
  type PodLifeView,
} from './explain-state.ts';
import { expiresAt, gateSetAt } from './expiry.ts';
import { scheduleOpensAt } from './schedule.ts';
import { ownedGate, tenantOfNamespace } from './gates.ts';
import { podKey, type ClusterSnapshot, type PodLike } from './objects.ts';
import { combinePacing } from './pacing.ts';
import { admitUnits } from './release-admit.ts';
import { classifyPods, type Classification } from './release-classify.ts';
import type { GangReleases } from './release-gang-memory.ts';
import { judgePods } from './release-judge.ts';
import { emptyPlanState } from './release-plan.ts';
import { groupReleaseUnits } from './release-units.ts';
import type { Verdict } from './release-verdict.ts';
import type { FreeReason } from './lifecycle.ts';
import { nodeReadiness } from './unready-nodes.ts';
import type { ExpiryAction, GatePolicy, Pacing, Policy, Tenant } from '../policy/model.ts';

/** What a pod waits for, a closed set. */
export type Waiting =
  | 'nothing' // releasable on the next pass
  | 'pacing'
  | 'budget'
  | 'conditions'
  | 'gang'
  | 'review'
  | 'suspended' // its GatePolicy is suspended
  | 'policy' // no GatePolicy selects it
  | 'cancel'; // about to be deleted (expiry or approval)

/** What explain says of any pod in a tenant's namespace, gated or released. */
export interface PodExplanation {
  readonly pod: string;
  readonly uid: string;
  readonly tenant: string;
  /** The policy commit explained against, and the file that decides this pod (GatePolicy, else Tenant). */
  readonly source: { readonly commit: string; readonly file: string };
  /** Where the pod is in its life: gated, unschedulable, pulling its image, crash-looping, ... */
  readonly life: PodLifeView;
  /** The pod's own conditions, with since when each holds. */
  readonly podConditions: readonly PodConditionView[];
}

export interface Explanation extends PodExplanation {
  readonly policy: string | null;
  readonly gate: string;
  readonly waiting: Waiting;
  readonly reason: string;
  readonly conditions: readonly ConditionInput[];
  /** 1-based place in the tenant's release order (priority, then oldest, then name). */
  readonly position: number;
  readonly queueLength: number;
  readonly budget: BudgetView;
  readonly pacing: Pacing | null;
  readonly gatedSince: string | null;
  readonly expiry: { readonly deadline: string; readonly action: ExpiryAction } | null;
  readonly estimate: { readonly releaseAt: string | null; readonly basis: string };
}

export interface BudgetView {
  readonly pods: { readonly used: number; readonly limit: number | null };
  readonly resources: Readonly<Record<string, { readonly used: number; readonly limit: number }>>;
  /** Released pods no longer charged: on a node not Ready for the grace, or being deleted. */
  readonly notCharged: Readonly<Record<FreeReason, number>>;
  /** The tenant's `budget.unreadyNodeGrace`. */
  readonly unreadyNodeGraceMs: number;
}

const iso = (ms: number | undefined): string | null =>
  ms === undefined ? null : new Date(ms).toISOString();

function waitingOf(verdict: Verdict): Waiting {
  switch (verdict.kind) {
    case 'Release':
      return 'nothing';
    case 'Cancel':
      return 'cancel';
    case 'Review':
      return 'review';
    case 'Hold':
      if (verdict.reasonKey === 'Pacing') return 'pacing';
      if (verdict.reasonKey === 'Budget') return 'budget';
      if (verdict.reasonKey === 'GangMember') return 'gang';
      if (verdict.reasonKey === 'Review') return 'review';
      if (verdict.reasonKey === 'NoPolicy') return 'policy';
      if (verdict.reasonKey === 'Suspended') return 'suspended';
      return 'conditions';
  }
}

/** The slowest release rate of the scopes that pace this policy's releases. */
function effectivePacing(
  policy: Policy,
  tenant: Tenant,
  gatePolicy: GatePolicy | undefined,
): Pacing {
  const scoped = combinePacing(tenant.pacing, gatePolicy?.pacing);
  const global = policy.settings.pacing;
  return {
    maxInFlight: Math.min(global.maxInFlight, scoped.maxInFlight),
    releasesPerSecond: Math.min(global.releasesPerSecond, scoped.releasesPerSecond),
    batchSize: Math.min(global.batchSize, scoped.batchSize),
  };
}

function budgetView(
  tenant: Tenant,
  used: Usage | undefined,
  freed: Readonly<Record<FreeReason, number>> | undefined,
): BudgetView {
  const resources: Record<string, { used: number; limit: number }> = {};
  for (const [name, limit] of Object.entries(tenant.budget.resources)) {
    if (typeof limit === 'number') resources[name] = { used: used?.resources[name] ?? 0, limit };
  }
  return {
    pods: { used: used?.pods ?? 0, limit: tenant.budget.pods ?? null },
    resources,
    notCharged: { nodeNotReady: freed?.nodeNotReady ?? 0, terminating: freed?.terminating ?? 0 },
    unreadyNodeGraceMs: tenant.budget.unreadyNodeGraceMs,
  };
}

/** Gated pods of each tenant in release order: priority, then oldest gate, then name. */
function releaseOrder(verdicts: readonly Verdict[]): Map<string, Verdict[]> {
  const byTenant = new Map<string, Verdict[]>();
  for (const v of verdicts)
    byTenant.set(v.tenant.name, [...(byTenant.get(v.tenant.name) ?? []), v]);
  for (const list of byTenant.values())
    list.sort(
      (a, b) =>
        (b.gatePolicy?.priority ?? -Infinity) - (a.gatePolicy?.priority ?? -Infinity) ||
        (gateSetAt(a.pod) ?? 0) - (gateSetAt(b.pod) ?? 0) ||
        byCodeUnits(podKey(a.pod), podKey(b.pod)),
    );
  return byTenant;
}

function estimateOf(
  verdict: Verdict,
  waiting: Waiting,
  pacedAhead: number,
  pacing: Pacing,
  now: number,
): Explanation['estimate'] {
  if (waiting === 'nothing') return { releaseAt: iso(now), basis: 'releasable on the next pass' };
  if (waiting === 'pacing') {
    const ms = Math.ceil(((pacedAhead + 1) / pacing.releasesPerSecond) * 1000);
    return {
      releaseAt: iso(now + ms),
      basis: `pace: ${pacedAhead} pod(s) ahead held only by pacing, plus this one, at ${pacing.releasesPerSecond}/s`,
    };
  }
  const expiry = verdict.gatePolicy?.expiry;
  const deadline = verdict.gatePolicy ? expiresAt(verdict.gatePolicy, verdict.pod) : undefined;
  const opensAt = scheduleOpensAt(verdict.inputs);
  const onlySchedule = verdict.inputs.every((i) => i.met || i.condition === 'Schedule');
  if (waiting === 'conditions' && opensAt !== undefined && onlySchedule) {
    const byExpiry = expiry?.action === 'Release' && deadline !== undefined && deadline < opensAt;
    return byExpiry
      ? {
          releaseAt: iso(Math.max(now, deadline)),
          basis: 'at its expiry (action Release), before its Schedule window opens',
        }
      : {
          releaseAt: iso(opensAt),
          basis:
            'when its next Schedule window opens (only Schedule holds it); pacing may add to it',
        };
  }
  if (expiry?.action === 'Release' && deadline !== undefined && waiting === 'conditions')
    return {
      releaseAt: iso(Math.max(now, deadline)),
      basis: `at the latest at its expiry (action Release); earlier once ${verdict.reason.replace(/^waiting for /, '')} hold(s)`,
    };
  return { releaseAt: null, basis: `no estimate: ${verdict.reason}` };
}

/** Every gated pod tollgate governs, explained, grouped by tenant (by name) in release order. */
/**
 * `gangReleases`: the members whose release tollgate decided with their whole gang (the
 * plan's memory, as a term reads it from the audit trail), so a gang's straggler is
 * explained as tollgate run judges it.
 */
export function explainPods(
  policy: Policy,
  snapshot: ClusterSnapshot,
  now: number,
  gangReleases: GangReleases = {},
): Explanation[] {
  const classified = classifyPods(
    policy,
    [...snapshot.pods()],
    new Map(),
    nodeReadiness(snapshot.nodes(), now),
  );
  const judged = judgePods(policy, snapshot, classified, now, {}, gangReleases);
  const grouped = groupReleaseUnits(judged.candidates, classified);
  const admitted = admitUnits({
    policy,
    units: grouped.units,
    classified,
    state: emptyPlanState,
    now,
    rampMs: 0,
  });
  const verdicts = [...judged.verdicts, ...grouped.verdicts, ...admitted.verdicts];
  const explanations: Explanation[] = [];
  const tenants = [...releaseOrder(verdicts)].sort(([a], [b]) => byCodeUnits(a, b));
  for (const [, ordered] of tenants) {
    let pacedAhead = 0;
    ordered.forEach((verdict, index) => {
      const waiting = waitingOf(verdict);
      const pacing = effectivePacing(policy, verdict.tenant, verdict.gatePolicy);
      explanations.push(
        explain(policy, verdict, waiting, index + 1, ordered.length, pacing, classified, {
          now,
          pacedAhead,
        }),
      );
      // Releasable pods take the tokens there are now; each paced pod ahead takes a later one.
      if (waiting === 'pacing') pacedAhead += 1;
    });
  }
  return explanations;
}

function explain(
  policy: Policy,
  verdict: Verdict,
  waiting: Waiting,
  position: number,
  queueLength: number,
  pacing: Pacing,
  classified: Pick<Classification, 'usage' | 'summary'>,
  at: { now: number; pacedAhead: number },
): Explanation {
  const { pod, tenant, gatePolicy } = verdict;
  const deadline = gatePolicy ? expiresAt(gatePolicy, pod) : undefined;
  return {
    pod: podKey(pod),
    uid: pod.metadata?.uid ?? '',
    tenant: tenant.name,
    source: { commit: policy.commit, file: (gatePolicy ?? tenant).source.file },
    life: podLifeOf(pod, true),
    podConditions: podConditionsOf(pod),
    policy: gatePolicy?.name ?? null,
    gate: ownedGate(pod, policy)?.gate ?? '',
    waiting,
    reason: verdict.reason,
    conditions: verdict.inputs,
    position,
    queueLength,
    budget: budgetView(
      tenant,
      classified.usage.get(tenant.name),
      classified.summary.freed[tenant.name],
    ),
    pacing: gatePolicy ? pacing : null,
    gatedSince: iso(gateSetAt(pod)),
    expiry:
      gatePolicy?.expiry && deadline !== undefined
        ? { deadline: iso(deadline) as string, action: gatePolicy.expiry.action }
        : null,
    estimate: estimateOf(verdict, waiting, at.pacedAhead, pacing, at.now),
  };
}

/**
 * A pod of a tenant's namespace that tollgate no longer gates (released, or never gated):
 * where it is in its life, so "released but unschedulable" or "crash-looping" is told
 * apart from "held". Undefined outside every tenant's namespaces.
 */
export function explainReleasedPod(policy: Policy, pod: PodLike): PodExplanation | undefined {
  const tenant = tenantOfNamespace(policy, pod.metadata?.namespace ?? '');
  if (!tenant) return undefined;
  return {
    pod: podKey(pod),
    uid: pod.metadata?.uid ?? '',
    tenant: tenant.name,
    source: { commit: policy.commit, file: tenant.source.file },
    life: podLifeOf(pod, false),
    podConditions: podConditionsOf(pod),
  };
}

export interface QueueFilter {
  readonly tenant?: string;
  readonly policy?: string;
  /** Index of the first entry (the previous page's `next`). */
  readonly offset?: number;
  readonly limit?: number;
}

export interface QueuePage {
  readonly items: readonly Explanation[];
  readonly total: number;
  /** Offset of the next page; null on the last. */
  readonly next: number | null;
}

/** Held and releasable pods in release order, filtered and paged. */
export function queuePage(explanations: readonly Explanation[], filter: QueueFilter): QueuePage {
  const matching = explanations.filter(
    (e) =>
      (filter.tenant === undefined || e.tenant === filter.tenant) &&
      (filter.policy === undefined || e.policy === filter.policy),
  );
  const offset = filter.offset ?? 0;
  const limit = filter.limit ?? 50;
  const items = matching.slice(offset, offset + limit);
  return {
    items,
    total: matching.length,
    next: offset + limit < matching.length ? offset + limit : null,
  };
}
