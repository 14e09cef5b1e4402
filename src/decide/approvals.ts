/**
 * Which pods an Approval reaches. An approval binds to pods, never to names:
 * - a Pod target with a uid: that one pod;
 * - a Pod target by name: the pod of that name created before the approval was merged
 *   (`mergedAt`, from Git), so a later pod of the same name (a StatefulSet replica, a
 *   re-created job) is not hit; a name-only approval hits one pod once;
 * - a group target (Pods by selector, a Gang, a whole GatePolicy): the pods it names
 *   that were created before `mergedAt`; without a merge time a group reaches nothing.
 * "Before" is in whole seconds: a pod's creationTimestamp and a Git commit time are both
 * whole seconds, so a pod created in the second the approval was merged may be newer than
 * it and is not hit (an approval must never reach a pod created after it); `plan` names
 * such a pod, and its uid approves it.
 * Used by the gate-release judge and by `tollgate plan` (which pods an approval hits).
 */
import type { Approval, ApprovalTarget, GatePolicy, Policy } from '../policy/model.ts';
import { gateSetAt } from './expiry.ts';
import { matchesSelector, orphanedGate, ownedGate } from './gates.ts';
import type { PodLike } from './objects.ts';

/**
 * Whether an approval reaches a pod its target names: `hit`; `miss`; or `mergeSecond`,
 * not hit because the pod was created in the second the approval was merged.
 */
export type ApprovalReach = 'hit' | 'miss' | 'mergeSecond';

const secondOf = (ms: number): number => Math.floor(ms / 1_000);

/**
 * Was the pod created before `mergedAt`, in whole seconds? A creationTimestamp and a Git
 * commit time are both truncated to the second, so the same second cannot tell which came
 * first: `mergeSecond`, never a hit. A folder's merge time has milliseconds; its second
 * is taken too, so the rule is the same for both sources. Unknown merge time: a Pod target
 * by name matches, a group never; unknown creation time: never.
 */
function createdBefore(pod: PodLike, mergedAt: number | undefined, group: boolean): ApprovalReach {
  if (mergedAt === undefined) return group ? 'miss' : 'hit';
  const created = gateSetAt(pod);
  if (created === undefined) return 'miss';
  const [c, m] = [secondOf(created), secondOf(mergedAt)];
  return c < m ? 'hit' : c === m ? 'mergeSecond' : 'miss';
}

/** Does the approval's target name this pod (gated under `gatePolicy`, when known)? */
function targetNames(
  approval: Approval,
  pod: PodLike,
  gatePolicy: GatePolicy | undefined,
): boolean {
  const t = approval.target;
  const namespace = pod.metadata?.namespace;
  const labels = pod.metadata?.labels ?? {};
  switch (t.kind) {
    case 'Pod':
      return t.namespace === namespace && t.name === pod.metadata?.name;
    case 'Pods':
      return t.namespace === namespace && matchesSelector(labels, t.selector);
    case 'Gang':
      return (
        t.namespace === namespace &&
        gatePolicy?.name === t.gatePolicy &&
        labels[t.groupLabel] === t.gang
      );
    case 'GatePolicy':
      return gatePolicy?.name === t.name;
    case 'ResizePolicy':
      return false;
  }
}

/** How the approval reaches this pod: by its uid, else by when the pod was created. */
export function approvalReach(
  approval: Approval,
  pod: PodLike,
  gatePolicy: GatePolicy | undefined,
): ApprovalReach {
  if (!targetNames(approval, pod, gatePolicy)) return 'miss';
  const t = approval.target;
  if (t.kind === 'Pod' && t.uid !== undefined)
    return t.uid === pod.metadata?.uid?.toLowerCase() ? 'hit' : 'miss';
  return createdBefore(pod, approval.mergedAt, t.kind !== 'Pod');
}

/** Does the approval reach this pod (gated under `gatePolicy`, when known)? */
export function approvalTargets(
  approval: Approval,
  pod: PodLike,
  gatePolicy: GatePolicy | undefined,
): boolean {
  return approvalReach(approval, pod, gatePolicy) === 'hit';
}

/** In force at `now`: not expired. */
export function approvalInForce(approval: Approval, now: number): boolean {
  return approval.expiresAt === undefined || approval.expiresAt > now;
}

/** A pod as `tollgate plan` names it. */
export interface PodRef {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
}

/** One approval of a policy and the pods it would reach now (`tollgate plan`). */
export interface ApprovalHit {
  readonly approval: string;
  readonly action: 'Release' | 'Cancel';
  readonly file: string;
  /** Pods tollgate holds (they carry one of its gates) that the approval reaches. */
  readonly pods: readonly PodRef[];
  /** Held pods its target names that it does not hit: created in the second it was merged. */
  readonly mergeSecond?: readonly PodRef[];
  /** Why it reaches nothing at all, when that is the approval's state rather than the cluster's. */
  readonly note?: 'expired';
}

/**
 * For every Release or Cancel approval of `policy`: the pods tollgate holds (one of its
 * gates, owned or orphaned, is on them) that it reaches at `now`.
 */
export function approvalHits(policy: Policy, pods: readonly PodLike[], now: number): ApprovalHit[] {
  const held = pods.flatMap((pod) => {
    const owned = ownedGate(pod, policy);
    if (owned) return [{ pod, gatePolicy: owned.gatePolicy }];
    return orphanedGate(pod, policy) ? [{ pod, gatePolicy: undefined }] : [];
  });
  return policy.approvals.flatMap((approval): ApprovalHit[] => {
    if (approval.action === 'Resume') return [];
    const base = { approval: approval.name, action: approval.action, file: approval.source.file };
    if (!approvalInForce(approval, now)) return [{ ...base, pods: [], note: 'expired' }];
    const reached = (reach: ApprovalReach) =>
      held
        .filter(({ pod, gatePolicy }) => approvalReach(approval, pod, gatePolicy) === reach)
        .map(({ pod }) => podRef(pod));
    const mergeSecond = reached('mergeSecond');
    return [{ ...base, pods: reached('hit'), ...(mergeSecond.length > 0 ? { mergeSecond } : {}) }];
  });
}

function podRef(pod: PodLike): PodRef {
  return {
    namespace: pod.metadata?.namespace ?? '',
    name: pod.metadata?.name ?? '',
    uid: pod.metadata?.uid ?? '',
  };
}

/** A group target in words, for a warning. */
function groupTargetOf(target: ApprovalTarget): string | undefined {
  switch (target.kind) {
    case 'Pods':
      return `the pods of namespace ${target.namespace} its label selector picks`;
    case 'Gang':
      return `gang "${target.gang}" of GatePolicy ${target.gatePolicy} in namespace ${target.namespace}`;
    case 'GatePolicy':
      return `every pod GatePolicy ${target.name} gates`;
    default:
      return undefined;
  }
}

/**
 * `tollgate plan` warnings: a Release or Cancel approval aimed at a group (a label
 * selector, a gang, a GatePolicy) that is in force and hits no pod tollgate holds. Likely
 * a mistake worth a look before the merge: a selector no pod carries, a gang value or
 * GatePolicy name with a typo, or pods created after the approval's merge (a group
 * approval reaches only pods created before it). A Pod target hitting nothing is the
 * plain case of a pod already gone, and is left to the approvals table.
 */
export function groupApprovalsHittingNothing(
  policy: Policy,
  hits: readonly ApprovalHit[],
): string[] {
  const byName = new Map(policy.approvals.map((a) => [a.name, a]));
  return hits.flatMap((hit) => {
    const approval = byName.get(hit.approval);
    const group = approval && groupTargetOf(approval.target);
    if (!group || hit.note === 'expired' || hit.pods.length > 0) return [];
    return [
      `approval "${hit.approval}" (${hit.action}, ${hit.file}) targets ${group} but hits no pod tollgate holds: check the target; a group approval reaches only pods created before it was merged`,
    ];
  });
}

/** The plan's lines for the approvals: which pods each would hit. */
export function formatApprovalHits(hits: readonly ApprovalHit[], markdown: boolean): string {
  if (hits.length === 0) return '';
  const named = (pods: readonly PodRef[]) =>
    pods.map((p) => `${p.namespace}/${p.name} (uid ${p.uid})`).join(', ');
  const line = (h: ApprovalHit) => {
    const hits =
      h.note === 'expired'
        ? 'expired: hits no pod'
        : h.pods.length === 0
          ? 'hits no pod tollgate holds'
          : `hits ${named(h.pods)}`;
    const what = h.mergeSecond
      ? `${hits}; does not hit ${named(h.mergeSecond)}: created in the second the approval was merged, it may be newer than the approval (name its uid to approve it)`
      : hits;
    return markdown
      ? `| ${h.approval} | ${h.action} | ${h.file} | ${what} |`
      : `  ${h.approval} (${h.action}, ${h.file}): ${what}`;
  };
  const head = markdown
    ? [
        '',
        '### Approvals',
        '',
        '| approval | action | file | would hit |',
        '| --- | --- | --- | --- |',
      ]
    : ['Approvals:'];
  return `${[...head, ...hits.map(line)].join('\n')}\n`;
}
