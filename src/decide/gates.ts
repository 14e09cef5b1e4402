/**
 * Which scheduling gates on a pod tollgate owns. A gate is tollgate's only when a
 * GatePolicy names it, the pod lives in that policy's tenant's namespaces, and the gate
 * sits under one of that tenant's prefixes. Every other gate is foreign and is never
 * touched: removing ours leaves theirs in place.
 */
import type { GatePolicy, LabelSelector, Policy, Tenant } from '../policy/model.ts';
import { gateUnderPrefix } from '../policy/gate-prefix.ts';
import type { PodLike } from './objects.ts';

/** The index of `gate` in the pod's scheduling gates, or -1. The JSON patch tests this index. */
export function gateIndex(pod: PodLike, gate: string): number {
  return (pod.spec?.schedulingGates ?? []).findIndex((g) => g.name === gate);
}

export function tenantOwnsGate(tenant: Tenant, namespace: string, gate: string): boolean {
  return (
    tenant.namespaces.includes(namespace) &&
    tenant.gatePrefixes.some((p) => gateUnderPrefix(gate, p))
  );
}

export function matchesSelector(
  labels: Readonly<Record<string, string>>,
  selector: LabelSelector,
): boolean {
  for (const [key, value] of Object.entries(selector.matchLabels)) {
    if (labels[key] !== value) return false;
  }
  for (const expression of selector.matchExpressions) {
    const has = Object.hasOwn(labels, expression.key);
    const value = labels[expression.key];
    switch (expression.operator) {
      case 'In':
        if (!has || !expression.values.includes(value as string)) return false;
        break;
      case 'NotIn':
        if (has && expression.values.includes(value as string)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
    }
  }
  return true;
}

export interface OwnedGate {
  readonly gate: string;
  readonly index: number;
  readonly tenant: Tenant;
  /** The policy deciding this gate; absent when no policy for the gate selects the pod (the pod is held, with that reason). */
  readonly gatePolicy?: GatePolicy;
}

/**
 * Every gate on the pod that tollgate owns, in the pod's order, each with the policy that
 * decides it. When several policies name the same gate, the highest-priority one whose
 * selector matches the pod wins (ties: policy name order, so the choice is stable). A pod
 * may carry several: each is judged by its own policy, one at a time, first to last.
 */
export function ownedGates(pod: PodLike, policy: Policy): OwnedGate[] {
  const namespace = pod.metadata?.namespace ?? '';
  const labels = pod.metadata?.labels ?? {};
  const gates = pod.spec?.schedulingGates ?? [];
  const owned: OwnedGate[] = [];
  for (let index = 0; index < gates.length; index++) {
    const gate = (gates[index] as { name: string }).name;
    const named = policy.gatePolicies.filter((gp) => {
      const tenant = policy.tenants.get(gp.tenant);
      return gp.gate === gate && tenant !== undefined && tenantOwnsGate(tenant, namespace, gate);
    });
    if (named.length === 0) continue;
    const selecting = named
      .filter((gp) => matchesSelector(labels, gp.selector))
      .sort((a, b) => b.priority - a.priority || a.name.localeCompare(b.name));
    const gatePolicy = selecting[0];
    const tenant = policy.tenants.get((gatePolicy ?? (named[0] as GatePolicy)).tenant) as Tenant;
    owned.push(gatePolicy ? { gate, index, tenant, gatePolicy } : { gate, index, tenant });
  }
  return owned;
}

/** The first gate on the pod that tollgate owns (see `ownedGates`): the one judged now. */
export function ownedGate(pod: PodLike, policy: Policy): OwnedGate | undefined {
  return ownedGates(pod, policy)[0];
}

export interface OrphanedGate {
  readonly gate: string;
  readonly index: number;
  readonly tenant: Tenant;
}

/**
 * The first gate on the pod under a prefix of the tenant owning its namespace that no
 * GatePolicy of that tenant names: its policy was renamed or deleted while the pod
 * carried it. Nobody else may remove such a gate (the shipped admission policy), so
 * tollgate gives it the tenant's `orphanedGates` treatment instead of ignoring it.
 */
export function orphanedGate(pod: PodLike, policy: Policy): OrphanedGate | undefined {
  const namespace = pod.metadata?.namespace ?? '';
  const tenant = tenantOfNamespace(policy, namespace);
  if (!tenant) return undefined;
  const gates = pod.spec?.schedulingGates ?? [];
  for (let index = 0; index < gates.length; index++) {
    const gate = (gates[index] as { name: string }).name;
    if (!tenantOwnsGate(tenant, namespace, gate)) continue;
    if (policy.gatePolicies.some((gp) => gp.tenant === tenant.name && gp.gate === gate)) continue;
    return { gate, index, tenant };
  }
  return undefined;
}

/** Whether any gate on the pod is tollgate's (whatever its selector): such a pod is not yet released. */
export function carriesOwnedGate(pod: PodLike, policy: Policy): boolean {
  return ownedGate(pod, policy) !== undefined;
}

/** The tenant whose namespaces hold the pod, if any. */
export function tenantOfNamespace(policy: Policy, namespace: string): Tenant | undefined {
  for (const tenant of policy.tenants.values()) {
    if (tenant.namespaces.includes(namespace)) return tenant;
  }
  return undefined;
}
