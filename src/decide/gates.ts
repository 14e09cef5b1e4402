/**
 * Which scheduling gates on a pod tollgate owns. A gate is tollgate's only when a
 * GatePolicy names it, the pod lives in that policy's tenant's namespaces, and the gate
 * sits under one of that tenant's prefixes. Every other gate is foreign and is never
 * touched: removing ours leaves theirs in place.
 */
import { byCodeUnits } from '../lib/compare.ts';
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

/** A GatePolicy that names a gate its tenant's prefixes own, with what matching it needs. */
interface NamingPolicy {
  readonly gatePolicy: GatePolicy;
  readonly tenant: Tenant;
  readonly namespaces: ReadonlySet<string>;
  /** Its selector matches every pod (no labels, no expressions): nothing to check. */
  readonly selectsAll: boolean;
  /** Its answers by gate index, made once (`ownedBy`). */
  readonly ownedAt: OwnedGate[];
}

/** The GatePolicies naming one gate: in the policy's order, and in the order one is chosen. */
interface GateNamers {
  readonly inOrder: readonly NamingPolicy[];
  /** Highest priority first, ties by name (a stable sort of `inOrder`). */
  readonly byChoice: readonly NamingPolicy[];
}

/**
 * What answering "which gates are tollgate's" needs, built once per policy snapshot (a
 * pass asks it several times for every pod): the policies by the gate they name, the
 * tenant of each namespace, and which gate names each tenant's prefixes own, learnt as
 * gate names are met. The answers are those of the rules written out in `ownedGates`'s
 * and `orphanedGate`'s comments; the index only avoids scanning the policy per question.
 */
interface GateIndex {
  readonly namers: ReadonlyMap<string, GateNamers>;
  readonly tenantOf: ReadonlyMap<string, Tenant>;
  /** `tenant\0gate` of every GatePolicy. */
  readonly named: ReadonlySet<string>;
  /** Per tenant: gate name -> under one of its prefixes. */
  readonly underPrefix: Map<Tenant, Map<string, boolean>>;
}

const gateIndexes = new WeakMap<Policy, GateIndex>();

function gateIndexOf(policy: Policy): GateIndex {
  let index = gateIndexes.get(policy);
  if (!index) {
    index = buildGateIndex(policy);
    gateIndexes.set(policy, index);
  }
  return index;
}

function buildGateIndex(policy: Policy): GateIndex {
  const index: GateIndex = {
    namers: new Map(),
    tenantOf: new Map(),
    named: new Set(),
    underPrefix: new Map(),
  };
  for (const tenant of policy.tenants.values())
    for (const namespace of tenant.namespaces)
      if (!index.tenantOf.has(namespace))
        (index.tenantOf as Map<string, Tenant>).set(namespace, tenant);
  const inOrder = new Map<string, NamingPolicy[]>();
  for (const gatePolicy of policy.gatePolicies) {
    (index.named as Set<string>).add(`${gatePolicy.tenant}\u0000${gatePolicy.gate}`);
    const tenant = policy.tenants.get(gatePolicy.tenant);
    if (tenant === undefined || !ownsGateName(index, tenant, gatePolicy.gate)) continue;
    const list = inOrder.get(gatePolicy.gate) ?? [];
    list.push({
      gatePolicy,
      tenant,
      namespaces: new Set(tenant.namespaces),
      selectsAll:
        Object.keys(gatePolicy.selector.matchLabels).length === 0 &&
        gatePolicy.selector.matchExpressions.length === 0,
      ownedAt: [],
    });
    inOrder.set(gatePolicy.gate, list);
  }
  for (const [gate, list] of inOrder) {
    const byChoice = [...list].sort(
      (a, b) =>
        b.gatePolicy.priority - a.gatePolicy.priority ||
        byCodeUnits(a.gatePolicy.name, b.gatePolicy.name),
    );
    (index.namers as Map<string, GateNamers>).set(gate, { inOrder: list, byChoice });
  }
  return index;
}

/** Gate names remembered per tenant at most (pods may carry any names: the memory stays bounded). */
const REMEMBERED_GATE_NAMES = 4096;

/** Whether the gate name sits under one of the tenant's prefixes (remembered per name). */
function ownsGateName(index: GateIndex, tenant: Tenant, gate: string): boolean {
  let names = index.underPrefix.get(tenant);
  if (!names) {
    names = new Map();
    index.underPrefix.set(tenant, names);
  }
  let owns = names.get(gate);
  if (owns === undefined) {
    owns = tenant.gatePrefixes.some((p) => gateUnderPrefix(gate, p));
    if (names.size < REMEMBERED_GATE_NAMES) names.set(gate, owns);
  }
  return owns;
}

/**
 * The gate at `index` on a pod in `namespace` with `labels`, when tollgate owns it: a
 * GatePolicy names it, the pod lives in that policy's tenant's namespaces and the gate
 * sits under one of that tenant's prefixes. The highest-priority such policy whose
 * selector matches the pod decides it (ties: policy name order); when none selects the
 * pod, the gate is still owned, by the tenant of the first policy naming it.
 */
function ownedGateAt(
  namers: GateNamers | undefined,
  gate: string,
  index: number,
  namespace: string,
  labels: Readonly<Record<string, string>>,
): OwnedGate | undefined {
  if (namers === undefined) return undefined;
  const first = namers.inOrder.find((n) => n.namespaces.has(namespace));
  if (first === undefined) return undefined;
  for (const n of namers.byChoice) {
    if (!n.namespaces.has(namespace)) continue;
    if (n.selectsAll || matchesSelector(labels, n.gatePolicy.selector)) return ownedBy(n, index);
  }
  return { gate, index, tenant: first.tenant };
}

/**
 * The gate at `index` decided by this policy: one object per policy and index, shared
 * (read only) by every pod it answers. A pass asks for every gated pod's gate and keeps
 * the answer to its end (judge, units, record), so a new object per pod was 50,000 more
 * objects for the young generation to copy in a 50,000-pod pass.
 */
function ownedBy(n: NamingPolicy, index: number): OwnedGate {
  return (n.ownedAt[index] ??= {
    gate: n.gatePolicy.gate,
    index,
    tenant: n.tenant,
    gatePolicy: n.gatePolicy,
  });
}

/**
 * Every gate on the pod that tollgate owns, in the pod's order, each with the policy that
 * decides it. When several policies name the same gate, the highest-priority one whose
 * selector matches the pod wins (ties: policy name order, so the choice is stable). A pod
 * may carry several: each is judged by its own policy, one at a time, first to last.
 */
export function ownedGates(pod: PodLike, policy: Policy): OwnedGate[] {
  const gates = pod.spec?.schedulingGates;
  if (gates === undefined || gates.length === 0) return [];
  const { namers } = gateIndexOf(policy);
  const namespace = pod.metadata?.namespace ?? '';
  const labels = pod.metadata?.labels ?? {};
  const owned: OwnedGate[] = [];
  for (let index = 0; index < gates.length; index++) {
    const gate = (gates[index] as { name: string }).name;
    const found = ownedGateAt(namers.get(gate), gate, index, namespace, labels);
    if (found) owned.push(found);
  }
  return owned;
}

/**
 * Owned gates already found, per policy and pod object (null: none). A pod's object is
 * replaced on every change and never edited, and a policy is replaced whole, so a pass
 * reads most pods' answers here (ownedGate was 5.6% of a steady 10,000-pod pass).
 */
const ownedGateMemo = new WeakMap<Policy, WeakMap<PodLike, OwnedGate | null>>();

/** The first gate on the pod that tollgate owns (see `ownedGates`): the one judged now. */
export function ownedGate(pod: PodLike, policy: Policy): OwnedGate | undefined {
  if (!pod.spec?.schedulingGates?.length) return undefined;
  let byPod = ownedGateMemo.get(policy);
  if (byPod === undefined) ownedGateMemo.set(policy, (byPod = new WeakMap()));
  let owned = byPod.get(pod);
  if (owned === undefined) {
    owned = findOwnedGate(pod, policy) ?? null;
    byPod.set(pod, owned);
  }
  return owned ?? undefined;
}

function findOwnedGate(pod: PodLike, policy: Policy): OwnedGate | undefined {
  const gates = pod.spec?.schedulingGates;
  if (gates === undefined || gates.length === 0) return undefined;
  const { namers } = gateIndexOf(policy);
  const namespace = pod.metadata?.namespace ?? '';
  const labels = pod.metadata?.labels ?? {};
  for (let index = 0; index < gates.length; index++) {
    const gate = (gates[index] as { name: string }).name;
    const found = ownedGateAt(namers.get(gate), gate, index, namespace, labels);
    if (found) return found;
  }
  return undefined;
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
  const gates = pod.spec?.schedulingGates;
  if (gates === undefined || gates.length === 0) return undefined;
  const index = gateIndexOf(policy);
  const tenant = index.tenantOf.get(pod.metadata?.namespace ?? '');
  if (!tenant) return undefined;
  for (let at = 0; at < gates.length; at++) {
    const gate = (gates[at] as { name: string }).name;
    if (!ownsGateName(index, tenant, gate)) continue;
    if (index.named.has(`${tenant.name}\u0000${gate}`)) continue;
    return { gate, index: at, tenant };
  }
  return undefined;
}

/** Whether any gate on the pod is tollgate's (whatever its selector): such a pod is not yet released. */
export function carriesOwnedGate(pod: PodLike, policy: Policy): boolean {
  return ownedGate(pod, policy) !== undefined;
}

/** The tenant whose namespaces hold the pod, if any. */
export function tenantOfNamespace(policy: Policy, namespace: string): Tenant | undefined {
  return gateIndexOf(policy).tenantOf.get(namespace);
}
