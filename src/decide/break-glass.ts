/**
 * Break-glass releases: a governed gate removed by someone other than tollgate (the
 * `tollgate-break-glass` binding, or the admission policies taken away), typically while
 * tollgate was down or not leading. At each term start tollgate looks for such pods and
 * records each once (a `BreakGlass` record, a Warning Event), then sets the pod's
 * `tollgate.io/Released` condition to True with reason `RemovedOutsideTollgate`, so the
 * next term does not record it again.
 *
 * A pod counts when it carries no gate under its tenant's prefixes, no release mark
 * (tollgate marks every pod it releases in the same patch) and
 * - `held`: its `tollgate.io/Released` condition is False: tollgate held it, and the
 *   gate went without tollgate; or
 * - `opt-in`: it carries the opt-in label naming a GatePolicy of its tenant that selects
 *   it, and no condition at all: the admission policies give such a pod its gate at
 *   creation and refuse it without, so the gate went after (tollgate never saw it held).
 *
 * Who removed it: Kubernetes keeps no user on the pod, and a manager whose only change
 * was a removal owns no field, so its managedFields entry is dropped. The record keeps
 * what the pod does show (its managedFields entries: manager, operation, time) and the
 * window the removal lies in (from when tollgate last showed it held to now); the API
 * server's audit log names the user (search it for the pod's uid in that window).
 */
import type { ConditionInput, Decision } from './decision.ts';
import { matchesSelector, tenantOfNamespace } from './gates.ts';
import { releasedByTollgate } from './lifecycle.ts';
import { podTarget, type PodLike } from './objects.ts';
import {
  releasedConditionType,
  shownReleasedCondition,
  type PodConditionWrite,
} from './released-condition.ts';
import { gateUnderPrefix } from '../policy/gate-prefix.ts';
import { optInLabel } from '../policy/opt-in-admission.ts';
import type { GatePolicy, Policy, Tenant } from '../policy/model.ts';

export const breakGlassReason = 'RemovedOutsideTollgate';

export interface FieldManager {
  readonly manager: string;
  readonly operation: string;
  readonly time?: string;
  readonly subresource?: string;
}

export interface BreakGlassFinding {
  readonly pod: PodLike;
  readonly tenant: Tenant;
  readonly gatePolicy?: GatePolicy;
  readonly evidence: 'held' | 'opt-in';
  /** When tollgate's condition last changed status (the pod was held since then). */
  readonly heldSince?: string;
  /** The Hold reason the condition showed. */
  readonly heldReason?: string;
  readonly fieldManagers: readonly FieldManager[];
}

interface ManagedFieldsEntry {
  readonly manager?: string;
  readonly operation?: string;
  readonly time?: Date | string;
  readonly subresource?: string;
}

type PodWithStatus = PodLike & {
  metadata?: PodLike['metadata'] & { managedFields?: readonly ManagedFieldsEntry[] };
};
type TimedCondition = { type?: string; lastTransitionTime?: Date | string };

function carriesTenantGate(pod: PodLike, tenant: Tenant): boolean {
  return (pod.spec?.schedulingGates ?? []).some((g) =>
    tenant.gatePrefixes.some((prefix) => gateUnderPrefix(g.name, prefix)),
  );
}

/** The GatePolicy the pod's opt-in label names, when it is its tenant's and selects the pod. */
function optedInto(pod: PodLike, policy: Policy, tenant: Tenant): GatePolicy | undefined {
  const labels = pod.metadata?.labels ?? {};
  const name = labels[optInLabel];
  return policy.gatePolicies.find(
    (gp) => gp.name === name && gp.tenant === tenant.name && matchesSelector(labels, gp.selector),
  );
}

function fieldManagersOf(pod: PodWithStatus): FieldManager[] {
  return (pod.metadata?.managedFields ?? []).map((entry) => ({
    manager: entry.manager ?? '',
    operation: entry.operation ?? '',
    ...(entry.time ? { time: new Date(entry.time).toISOString() } : {}),
    ...(entry.subresource ? { subresource: entry.subresource } : {}),
  }));
}

function heldSinceOf(pod: PodLike): string | undefined {
  const conditions = pod.status?.conditions as readonly TimedCondition[] | undefined;
  const shown = conditions?.find((c) => c.type === releasedConditionType);
  return shown?.lastTransitionTime ? new Date(shown.lastTransitionTime).toISOString() : undefined;
}

/** The pod as a break-glass release, or undefined when it is not one. */
export function breakGlassOf(pod: PodLike, policy: Policy): BreakGlassFinding | undefined {
  if (pod.metadata?.deletionTimestamp) return undefined;
  const tenant = tenantOfNamespace(policy, pod.metadata?.namespace ?? '');
  if (!tenant || carriesTenantGate(pod, tenant) || releasedByTollgate(pod)) return undefined;
  const shown = shownReleasedCondition(pod);
  const optIn = optedInto(pod, policy, tenant);
  const fieldManagers = fieldManagersOf(pod as PodWithStatus);
  if (shown?.status === 'False') {
    const heldSince = heldSinceOf(pod);
    return {
      pod,
      tenant,
      ...(optIn ? { gatePolicy: optIn } : {}),
      evidence: 'held',
      ...(heldSince ? { heldSince } : {}),
      ...(shown.reason ? { heldReason: shown.reason } : {}),
      fieldManagers,
    };
  }
  if (shown === undefined && optIn)
    return { pod, tenant, gatePolicy: optIn, evidence: 'opt-in', fieldManagers };
  return undefined;
}

export function findBreakGlass(pods: Iterable<PodLike>, policy: Policy): BreakGlassFinding[] {
  const found: BreakGlassFinding[] = [];
  for (const pod of pods) {
    const finding = breakGlassOf(pod, policy);
    if (finding) found.push(finding);
  }
  return found;
}

function reasonOf(finding: BreakGlassFinding, now: number): string {
  const { evidence, heldSince, heldReason } = finding;
  const why =
    evidence === 'held'
      ? `tollgate held it (${heldReason ?? 'Held'}${heldSince ? ` since ${heldSince}` : ''})`
      : `it opted in to GatePolicy ${finding.gatePolicy?.name} (label ${optInLabel})`;
  const window = `between ${heldSince ?? 'its creation'} and ${new Date(now).toISOString()}`;
  return `governed gate removed outside tollgate (break-glass) ${window}: ${why}, and it carries no gate and no release mark; the pod keeps no user, see the API server's audit log for uid ${finding.pod.metadata?.uid ?? ''}`;
}

/** The audit record of a break-glass release: no write of its own, noticed at `now`. */
export function breakGlassDecision(
  finding: BreakGlassFinding,
  policy: Policy,
  now: number,
): Decision {
  const { pod, tenant, gatePolicy } = finding;
  const metadata = pod.metadata ?? {};
  const uid = metadata.uid ?? '';
  const input: ConditionInput = {
    condition: 'BreakGlass',
    met: true,
    value: {
      evidence: finding.evidence,
      ...(finding.heldSince ? { heldSince: finding.heldSince } : {}),
      ...(finding.heldReason ? { heldReason: finding.heldReason } : {}),
      noticedAt: new Date(now).toISOString(),
      fieldManagers: finding.fieldManagers,
    },
  };
  return {
    id: `gate-release:BreakGlass:${uid}:${metadata.resourceVersion ?? ''}`,
    at: now,
    loop: 'gate-release',
    kind: 'BreakGlass',
    tenant: tenant.name,
    target: podTarget(pod),
    policy: gatePolicy
      ? { commit: policy.commit, file: gatePolicy.source.file, name: gatePolicy.name }
      : { commit: policy.commit, file: tenant.source.file, name: tenant.name },
    inputs: [input],
    reason: reasonOf(finding, now),
    outcome: { result: 'recorded' },
  };
}

/** The pod's condition once recorded: True, reason RemovedOutsideTollgate. */
export function breakGlassCondition(decision: Decision, now: number): PodConditionWrite {
  return {
    type: releasedConditionType,
    status: 'True',
    reason: breakGlassReason,
    message: decision.reason.slice(0, 1024),
    lastTransitionTime: new Date(now).toISOString(),
  };
}
