/**
 * Budget freed and charged again, as audit records (issue 16). A released pod that stops
 * taking from its tenant's budget (`budgetFreedBy`: its node not Ready for the tenant's
 * `budget.unreadyNodeGrace`, or the pod being deleted) gets one `Uncharge` record; when
 * it takes from the budget again (its node came back Ready) it gets one `Recharge` record,
 * which says whether the tenant now stands above its limit. Over the limit, the budget
 * holds every new release of the tenant until enough pods finish (`evaluateBudget`): the
 * pods already running are never touched.
 *
 * The pods freed so far are plan state (uid -> why), so each change is recorded once per
 * leader term; a new term records the pods freed at its start once more (it cannot tell
 * what the last term recorded) and cannot record a recharge of a pod it never saw freed.
 */
import type { ConditionInput, Decision } from './decision.ts';
import { tenantOfNamespace } from './gates.ts';
import { chargeReason, type FreeReason } from './lifecycle.ts';
import { podTarget, type PodLike } from './objects.ts';
import type { Classification, FreedPod } from './release-classify.ts';
import type { NodeReadiness } from './unready-nodes.ts';
import { formatDuration } from '../lib/clock.ts';
import type { Policy, Tenant } from '../policy/model.ts';

export interface ChargeChanges {
  /** `Uncharge` and `Recharge` records, no write of their own. */
  readonly decisions: readonly Decision[];
  /** Pods newly freed this pass (the loop raises an Event on those freed by their node). */
  readonly newlyFreed: readonly FreedPod[];
  /** uid -> why the pod is not charged, for the next pass. */
  readonly freed: Readonly<Record<string, FreeReason>>;
}

export function chargeChanges(
  policy: Policy,
  classified: Pick<Classification, 'pods' | 'states' | 'freedPods' | 'usage'>,
  previous: Readonly<Record<string, FreeReason>>,
  nodes: NodeReadiness,
): ChargeChanges {
  const { now } = nodes;
  const decisions: Decision[] = [];
  const newlyFreed: FreedPod[] = [];
  const freed: Record<string, FreeReason> = {};
  for (const f of classified.freedPods) {
    const uid = f.pod.metadata?.uid ?? '';
    freed[uid] = f.reason;
    if (previous[uid] !== undefined) continue;
    newlyFreed.push(f);
    decisions.push(unchargeDecision(policy, f, now));
  }
  for (const { pod, tenant } of rechargedPods(classified, previous, freed, policy))
    decisions.push(rechargeDecision(policy, pod, tenant, classified.usage, nodes));
  return { decisions, newlyFreed, freed };
}

/** Pods freed last pass, not freed now, and charged again (not finished, not gone). */
function rechargedPods(
  classified: Pick<Classification, 'pods' | 'states'>,
  previous: Readonly<Record<string, FreeReason>>,
  freed: Readonly<Record<string, FreeReason>>,
  policy: Policy,
): { pod: PodLike; tenant: Tenant }[] {
  const waiting = Object.keys(previous).filter((uid) => freed[uid] === undefined);
  if (waiting.length === 0) return [];
  const wanted = new Set(waiting);
  const found: { pod: PodLike; tenant: Tenant }[] = [];
  for (let i = 0; i < classified.pods.length; i++) {
    const pod = classified.pods[i] as PodLike;
    if (!wanted.has(pod.metadata?.uid ?? '')) continue;
    const tenant = tenantOfNamespace(policy, pod.metadata?.namespace ?? '');
    const state = classified.states[i];
    if (tenant && state && chargeReason(pod, state, tenant)) found.push({ pod, tenant });
  }
  return found;
}

function recordOf(
  policy: Policy,
  kind: 'Uncharge' | 'Recharge',
  pod: PodLike,
  tenant: Tenant,
  input: ConditionInput,
  reason: string,
  now: number,
): Decision {
  const target = podTarget(pod);
  return {
    id: `gate-release:${kind}:${target.uid}:${target.resourceVersion}:${now}`,
    at: now,
    loop: 'gate-release',
    kind,
    tenant: tenant.name,
    target,
    policy: { commit: policy.commit, file: tenant.source.file, name: tenant.name },
    inputs: [input],
    reason,
    outcome: { result: 'recorded' },
  };
}

function unchargeDecision(policy: Policy, freed: FreedPod, now: number): Decision {
  const node = freed.pod.spec?.nodeName;
  const value =
    freed.reason === 'nodeNotReady' ? { freedBy: freed.reason, node } : { freedBy: freed.reason };
  const input: ConditionInput = { condition: 'Budget', met: true, value };
  return recordOf(policy, 'Uncharge', freed.pod, freed.tenant, input, freed.message, now);
}

function rechargeDecision(
  policy: Policy,
  pod: PodLike,
  tenant: Tenant,
  usage: Classification['usage'],
  nodes: NodeReadiness,
): Decision {
  const used = usage.get(tenant.name)?.pods ?? 0;
  const limit = tenant.budget.pods;
  const over = limit !== undefined && used > limit;
  const node = pod.spec?.nodeName ?? '';
  const why = nodes.notReadySince.has(node)
    ? `node ${node} is not Ready for less than the tenant's budget.unreadyNodeGrace (${formatDuration(tenant.budget.unreadyNodeGraceMs)})`
    : `node ${node} is Ready again`;
  const standing =
    limit === undefined
      ? `the tenant uses ${used} pods`
      : `the tenant uses ${used} of ${limit} pods${over ? ', over its limit: no pod of the tenant is released until it is under it' : ''}`;
  const input: ConditionInput = {
    condition: 'Budget',
    met: !over,
    value: { pods: { used, limit: limit ?? null }, overLimit: over },
  };
  const reason = `charged again to tenant ${tenant.name}'s budget: ${why}; ${standing}`;
  return recordOf(policy, 'Recharge', pod, tenant, input, reason, nodes.now);
}
