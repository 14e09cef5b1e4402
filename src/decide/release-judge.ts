/**
 * Phase 2 of a gate-release pass: judge each gated pod on its own. A pod is held (no
 * GatePolicy selects it; conditions other than Budget not met; in review without an
 * Approval), cancelled (a Cancel approval; an expiry whose action is Cancel), marked for
 * review (an expiry whose action is Review), or becomes a release candidate (conditions
 * met; an expiry whose action is Release; in review and approved). Budget is judged per
 * release unit in the admission phase, next to everything released this pass.
 */
import equal from 'fast-deep-equal';
import {
  approvalFor,
  evaluateApproved,
  evaluateGangComplete,
  evaluateImagePresent,
  evaluateObjectCondition,
  indexNodeImages,
  type NodeImageIndex,
} from './conditions.ts';
import type { ConditionInput } from './decision.ts';
import { evaluateSchedule, scheduleOpensAt } from './schedule.ts';
import { expiresAt, gateSetAt, inReview, isExpired, reviewMark } from './expiry.ts';
import { orphanedGate, type OrphanedGate, type OwnedGate } from './gates.ts';
import type { ClusterSnapshot, PodLike } from './objects.ts';
import { podRequests } from './requests.ts';
import { blockedNow, type BlockedWrite } from './release-blocked.ts';
import { gangCompleteRemembered, type GangReleases } from './release-gang-memory.ts';
import { gangMembersPresent, type Classification, type HeldPod } from './release-classify.ts';
import { holdVerdict, type Candidate, type Verdict } from './release-verdict.ts';
import type { GatePolicy, Policy, Tenant } from '../policy/model.ts';

export interface Judgement {
  readonly candidates: readonly Candidate[];
  readonly verdicts: readonly Verdict[];
  /** When a held pod's expiry falls due. */
  readonly wakeups: readonly number[];
}

/** What judging one pod needs besides the pod. */
interface JudgeContext {
  readonly policy: Policy;
  readonly snapshot: ClusterSnapshot;
  readonly classified: Classification;
  readonly now: number;
  /**
   * Members whose release was decided with their whole gang (release-gang-memory.ts);
   * undefined when there are none, so a pass without any looks no uid up (a missed
   * lookup by a uid string cost about 0.3 µs per gang pod in a 50,000-pod profile).
   */
  readonly gangReleases: GangReleases | undefined;
  /** Built once, on the first ImagePresent condition of the pass. */
  imageIndex?: NodeImageIndex;
  /** GangComplete judgements shared by the members of a gang (`gangJudgement`). */
  readonly gangJudgements: Map<readonly PodLike[], GangJudgement>;
  /** Per GatePolicy of the pass: its GangComplete condition when that is all it judges here. */
  readonly soleGangs: Map<GatePolicy, GangCondition | undefined>;
}

/**
 * One gang's GangComplete input, and the inputs list of a pod whose only condition
 * besides Budget is GangComplete, as judged for its first member: every member with the
 * same present members (the same list from the gang index), condition, namespace, group
 * label value and size text is judged alike, so shares both (read only). A 50,000-pod gang
 * pass made an input, its value, its group id and a list for every pod.
 */
interface GangJudgement {
  readonly condition: GangCondition;
  readonly namespace: string | undefined;
  readonly group: string | undefined;
  readonly sizeText: string | undefined;
  readonly input: ConditionInput;
  readonly inputsAlone: readonly ConditionInput[];
}

type GangCondition = Extract<GatePolicy['conditions'][number], { type: 'GangComplete' }>;

type PodJudgement =
  | { readonly candidate: Candidate; readonly verdicts?: undefined; readonly wakeup?: undefined }
  | {
      readonly candidate?: undefined;
      readonly verdicts: readonly Verdict[];
      readonly wakeup?: number;
    };

export function judgePods(
  policy: Policy,
  snapshot: ClusterSnapshot,
  classified: Classification,
  now: number,
  blocked: Readonly<Record<string, BlockedWrite>> = {},
  gangReleases: GangReleases = {},
): Judgement {
  const context: JudgeContext = {
    policy,
    snapshot,
    classified,
    now,
    gangReleases: Object.keys(gangReleases).length > 0 ? gangReleases : undefined,
    gangJudgements: new Map(),
    soleGangs: new Map(),
  };
  const candidates: Candidate[] = [];
  const verdicts: Verdict[] = [];
  const wakeups: number[] = [];
  // Looked up per pod only when there is something to find (most passes have little).
  const anyActing = classified.acting.size > 0;
  const anyBlocked = Object.keys(blocked).length > 0;
  const { held } = classified;
  for (let i = 0; i < held.length; i++) {
    const { pod, state: podState, owned } = held[i] as HeldPod;
    if (pod.metadata?.deletionTimestamp) continue;
    // One pending decision per pod: while a write decided for it is not shown by the view,
    // the pod is not decided again (a queued Review or Cancel is not re-recorded each pass).
    if (anyActing && classified.acting.has(pod.metadata?.uid ?? '')) continue;
    // A write that failed finally backs off, then is Blocked: no new decision meanwhile.
    const failed = anyBlocked ? blocked[pod.metadata?.uid ?? ''] : undefined;
    if (blockedNow(failed, pod, policy.commit, now)) {
      if (failed && !failed.blocked) wakeups.push(failed.until);
      continue;
    }
    const judged =
      podState === 'orphaned'
        ? judgeOrphan(pod, context)
        : judgePod(pod, owned as OwnedGate, context);
    if (judged.candidate) candidates.push(judged.candidate);
    else
      for (let v = 0; v < judged.verdicts.length; v++) verdicts.push(judged.verdicts[v] as Verdict);
    if (judged.wakeup !== undefined) wakeups.push(judged.wakeup);
  }
  return { candidates, verdicts, wakeups };
}

/**
 * One gated pod: held without a GatePolicy, cancelled by a Cancel approval, a candidate
 * when its conditions hold, held until its expiry, then what the expiry's action says.
 */
function judgePod(pod: PodLike, owned: OwnedGate, context: JudgeContext): PodJudgement {
  const { now } = context;
  const { tenant, gatePolicy } = owned;
  if (!gatePolicy) {
    const reason = `no GatePolicy for gate ${owned.gate} selects this pod`;
    return { verdicts: [holdVerdict(pod, tenant, undefined, [], 'NoPolicy', reason)] };
  }
  const cancel = cancelByApproval(pod, owned as PolicyGate, context);
  if (cancel) return { verdicts: [cancel] };
  if (gatePolicy.drain) return { verdicts: [drainVerdict(pod, tenant, gatePolicy)] };
  if (gatePolicy.suspend) {
    // Suspended by a reviewed commit: nothing is released, expired or cancelled by expiry.
    const inputs = [{ condition: 'Suspended', met: false, value: { policy: gatePolicy.name } }];
    const reason = `GatePolicy ${gatePolicy.name} is suspended (spec.suspend)`;
    return { verdicts: [holdVerdict(pod, tenant, gatePolicy, inputs, 'Suspended', reason)] };
  }
  const before = judgedBefore.get(pod);
  const inputs = inputsAsBefore(before, evaluateConditions(pod, gatePolicy, context, before));
  const same =
    before !== undefined &&
    before.inputs === inputs &&
    before.gatePolicy === gatePolicy &&
    before.tenant === tenant;
  // Checked before listing what fails: most pods of a large pass have their conditions
  // met, and the list took two arrays per pod.
  if (allMet(inputs)) {
    if (same && before.judgement.candidate?.owned === owned) return before.judgement;
    const judgement = candidateOf(pod, owned, inputs, 'conditions met');
    judgedBefore.set(pod, { tenant, gatePolicy, inputs, judgement });
    return judgement;
  }
  if (!gatePolicy.expiry || !isExpired(gatePolicy, pod, now)) {
    if (same && before.judgement.verdicts !== undefined) return before.judgement;
    const judgement = heldByConditions(pod, tenant, gatePolicy, inputs);
    judgedBefore.set(pod, { tenant, gatePolicy, inputs, judgement });
    return judgement;
  }
  const failing = inputs.filter((i) => !i.met).map((i) => i.condition);
  return judgeExpired(pod, { ...owned, gatePolicy }, inputs, failing, context);
}

function allMet(inputs: readonly ConditionInput[]): boolean {
  for (let i = 0; i < inputs.length; i++) if (!(inputs[i] as ConditionInput).met) return false;
  return true;
}

/** Held, not expired, for the conditions that are not met. */
function heldByConditions(
  pod: PodLike,
  tenant: Tenant,
  gatePolicy: GatePolicy,
  inputs: readonly ConditionInput[],
): PodJudgement {
  const failing = inputs.filter((i) => !i.met).map((i) => i.condition);
  const reason = `waiting for ${failing.join(', ')}`;
  return {
    verdicts: [holdVerdict(pod, tenant, gatePolicy, inputs, failing.join('+'), reason)],
    // Re-judged when its expiry falls due or its Schedule window opens, whichever is first.
    ...optionalWakeup(earliest(expiresAt(gatePolicy, pod), scheduleOpensAt(inputs))),
  };
}

/**
 * The last judgement a pass made for a pod object by its conditions (a Hold, or a
 * candidate whose conditions hold), with what it was made from. Either is a function of
 * the pod, its gate (`owned`, one object per policy snapshot and pod object), its tenant,
 * its GatePolicy and its condition inputs alone (a Hold's reason, reason key and wake-up
 * too), and the view replaces a pod's object on every change and never edits one; so a
 * pod judged again with the same tenant and GatePolicy objects (one policy snapshot) and
 * inputs equal to the last ones is judged the same, and handed the same judgement. A
 * steady pass re-judges every held pod: making its inputs, reason and verdict again was a
 * third of a 10,000-pod pass and most of its garbage; making a pod held by its budget a
 * candidate again (its requests, its inputs) was a tenth of that pass's 26 MB.
 * Held weakly: a pod the view drops takes its entry with it.
 */
interface JudgedBefore {
  readonly tenant: Tenant;
  readonly gatePolicy: GatePolicy;
  readonly inputs: readonly ConditionInput[];
  readonly judgement: PodJudgement;
}
const judgedBefore = new WeakMap<PodLike, JudgedBefore>();

/** The inputs judged last time for this pod when the new ones are equal to them, else the new ones. */
function inputsAsBefore(
  before: JudgedBefore | undefined,
  inputs: readonly ConditionInput[],
): readonly ConditionInput[] {
  if (before === undefined || before.inputs.length !== inputs.length) return inputs;
  for (let i = 0; i < inputs.length; i++) {
    const was = before.inputs[i] as ConditionInput;
    const is = inputs[i] as ConditionInput;
    if (was === is) continue;
    if (was.condition !== is.condition || was.met !== is.met) return inputs;
    if (!equal(was.value, is.value)) return inputs;
  }
  return before.inputs;
}

type PolicyGate = OwnedGate & { gatePolicy: GatePolicy };

/** Drained by a reviewed commit: a pod still gated is cancelled, whatever else holds. */
function drainVerdict(pod: PodLike, tenant: Tenant, gatePolicy: GatePolicy): Verdict {
  const inputs = [{ condition: 'Drained', met: false, value: { policy: gatePolicy.name } }];
  const reason = `GatePolicy ${gatePolicy.name} is drained (spec.drain): cancelled while waiting`;
  return { kind: 'Cancel', pod, tenant, gatePolicy, inputs, reason };
}

/**
 * The policy an orphaned gate is decided under: the tenant's (its `orphanedGates`), with
 * Budget as its only condition, so a released orphan is paced and charged like any pod.
 */
function orphanPolicy(tenant: Tenant, gate: string): GatePolicy {
  return {
    name: `${tenant.name}/orphaned-gates`,
    source: tenant.source,
    tenant: tenant.name,
    gate,
    selector: { matchLabels: {}, matchExpressions: [] },
    priority: 0,
    conditions: [{ type: 'Budget' }],
    recheck: { initialMs: 10_000, maxMs: 300_000, maxAttempts: 10 },
  };
}

/**
 * A gate under the tenant's prefixes that no GatePolicy names (renamed or deleted while
 * the pod carried it), by the tenant's `orphanedGates`: Release makes it a candidate
 * (Budget still applies); Cancel deletes the pod; Review marks it once, then holds it
 * until an Approval releases or cancels it.
 */
function judgeOrphan(pod: PodLike, context: JudgeContext): PodJudgement {
  const { policy, now } = context;
  const { gate, index, tenant } = orphanedGate(pod, policy) as OrphanedGate;
  const gatePolicy = orphanPolicy(tenant, gate);
  const owned: PolicyGate = { gate, index, tenant, gatePolicy };
  const why = `orphaned: no GatePolicy names gate ${gate} any more (tenant ${tenant.name} orphanedGates: ${tenant.orphanedGates})`;
  const inputs: ConditionInput[] = [
    { condition: 'OrphanedGate', met: false, value: { gate, action: tenant.orphanedGates } },
  ];
  const cancel = cancelByApproval(pod, owned, context);
  if (cancel) return { verdicts: [cancel] };
  switch (tenant.orphanedGates) {
    case 'Release':
      return candidateOf(pod, owned, inputs, why, true);
    case 'Cancel':
      return { verdicts: [{ kind: 'Cancel', pod, tenant, gatePolicy, inputs, reason: why }] };
    case 'Review': {
      if (!inReview(pod)) {
        const mark = reviewMark(gatePolicy, now);
        const reason = `${why}; awaiting an Approval`;
        return { verdicts: [{ kind: 'Review', pod, tenant, gatePolicy, inputs, reason, mark }] };
      }
      const approved = evaluateApproved(pod, policy.approvals, now, gatePolicy);
      if (approved.met) return candidateOf(pod, owned, [...inputs, approved], `${why}; approved`);
      const reason = `${why}; in review: waiting for an Approval (Release or Cancel)`;
      const held = holdVerdict(pod, tenant, gatePolicy, [...inputs, approved], 'Orphaned', reason);
      return { verdicts: [held] };
    }
  }
}

function candidateOf(
  pod: PodLike,
  owned: OwnedGate,
  inputs: readonly ConditionInput[],
  reasonPrefix: string,
  expiryForced = false,
): PodJudgement {
  return {
    candidate: {
      pod,
      owned: owned as PolicyGate,
      inputs,
      requests: { pods: 1, resources: podRequests(pod) },
      reasonPrefix,
      expiryForced,
    },
  };
}

/** A Cancel approval in force for this pod, as a Cancel verdict. */
function cancelByApproval(
  pod: PodLike,
  { tenant, gatePolicy }: PolicyGate,
  context: JudgeContext,
): Verdict | undefined {
  const cancel = approvalFor(context.policy.approvals, pod, 'Cancel', context.now, gatePolicy);
  if (!cancel) return undefined;
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
  return { kind: 'Cancel', pod, tenant, gatePolicy, inputs, reason };
}

/**
 * An expired pod whose conditions do not hold, by the expiry's action: Release waives
 * them (a candidate, `expiryForced`); Cancel deletes the pod; Review marks it once, then
 * holds it until an Approval releases it (a candidate) or cancels it.
 */
function judgeExpired(
  pod: PodLike,
  owned: PolicyGate,
  inputs: readonly ConditionInput[],
  failing: readonly string[],
  { policy, now }: JudgeContext,
): PodJudgement {
  const { tenant, gatePolicy } = owned;
  const expiry = gatePolicy.expiry as NonNullable<GatePolicy['expiry']>;
  const age = `gated ${Math.round((now - (gateSetAt(pod) ?? now)) / 1000)}s, expiry after ${Math.round(expiry.afterMs / 1000)}s`;
  const waiting = failing.join(', ');
  switch (expiry.action) {
    case 'Release': {
      const reason = `expired (${age}); policy action Release waives ${waiting}`;
      return candidateOf(pod, owned, inputs, reason, true);
    }
    case 'Cancel': {
      const reason = `expired (${age}) waiting for ${waiting}`;
      const expiredReason = `${age}; action Cancel`;
      return {
        verdicts: [{ kind: 'Cancel', pod, tenant, gatePolicy, inputs, reason, expiredReason }],
      };
    }
    case 'Review': {
      if (!inReview(pod)) {
        const reason = `expired (${age}) waiting for ${waiting}; awaiting an Approval`;
        const expiredReason = `${age}; action Review`;
        const mark = reviewMark(gatePolicy, now);
        return {
          verdicts: [
            { kind: 'Review', pod, tenant, gatePolicy, inputs, reason, expiredReason, mark },
          ],
        };
      }
      const approved = evaluateApproved(pod, policy.approvals, now, gatePolicy);
      if (approved.met)
        return candidateOf(pod, owned, [...inputs, approved], 'in review; approved');
      const reason = 'in review: waiting for an Approval (Release or Cancel)';
      return {
        verdicts: [holdVerdict(pod, tenant, gatePolicy, [...inputs, approved], 'Review', reason)],
      };
    }
  }
}

function earliest(...times: (number | undefined)[]): number | undefined {
  const known = times.filter((t): t is number => t !== undefined);
  return known.length > 0 ? Math.min(...known) : undefined;
}

function optionalWakeup(at: number | undefined): { wakeup?: number } {
  return at === undefined ? {} : { wakeup: at };
}

/**
 * Every condition of the policy except Budget, in the policy's order. `before`: the pod's
 * last judgement, whose inputs a condition may hand back as they are when they read the
 * same; while every one is handed back, so is the list (no list is made per pod), and a
 * policy that judges nothing but Budget hands every pod one shared empty list.
 */
function evaluateConditions(
  pod: PodLike,
  gatePolicy: GatePolicy,
  context: JudgeContext,
  before: JudgedBefore | undefined,
): readonly ConditionInput[] {
  const sole = soleGangCondition(gatePolicy, context);
  if (sole) {
    const judged = gangJudgement(pod, sole, context);
    const remembered = rememberedGang(pod, judged.input, context);
    return remembered === judged.input ? judged.inputsAlone : [remembered];
  }
  const was = before?.gatePolicy === gatePolicy ? before.inputs : undefined;
  let inputs: ConditionInput[] | undefined; // made at the first input that is not `was`'s
  let count = 0;
  const { conditions } = gatePolicy;
  for (let i = 0; i < conditions.length; i++) {
    const condition = conditions[i] as GatePolicy['conditions'][number];
    const input = evaluateCondition(pod, gatePolicy, condition, context, was?.[count]);
    if (input === undefined) continue;
    if (inputs === undefined) {
      if (was?.[count] === input) {
        count += 1;
        continue;
      }
      inputs = was === undefined ? [] : was.slice(0, count);
    }
    inputs.push(input);
    count += 1;
  }
  if (inputs !== undefined) return inputs;
  // Every input was `was`'s own (none made without `was`): hand `was` back, or the shared empty list.
  if (was === undefined || count === 0) return noInputs;
  return was.length === count ? was : was.slice(0, count);
}

/** The inputs of a pod whose GatePolicy judges nothing but Budget here: one list, shared (read only). */
const noInputs: readonly ConditionInput[] = Object.freeze([]);

/** One condition's input; undefined for Budget, judged per release unit in the admission phase. */
function evaluateCondition(
  pod: PodLike,
  gatePolicy: GatePolicy,
  condition: GatePolicy['conditions'][number],
  context: JudgeContext,
  was: ConditionInput | undefined,
): ConditionInput | undefined {
  switch (condition.type) {
    case 'Budget':
      return undefined;
    case 'ImagePresent':
      context.imageIndex ??= indexNodeImages([...context.snapshot.nodes()]);
      return evaluateImagePresent(pod, condition.minNodes, context.imageIndex, was);
    case 'ObjectCondition':
      return evaluateObjectCondition(pod, condition, context.snapshot);
    case 'GangComplete':
      return rememberedGang(pod, gangJudgement(pod, condition, context).input, context);
    case 'Approved':
      return evaluateApproved(pod, context.policy.approvals, context.now, gatePolicy);
    case 'Schedule':
      return evaluateSchedule(condition.windows, context.now);
  }
}

/** GangComplete as judged, or met for a member whose release was decided with its whole gang. */
function rememberedGang(
  pod: PodLike,
  input: ConditionInput,
  context: JudgeContext,
): ConditionInput {
  if (context.gangReleases === undefined) return input;
  return gangCompleteRemembered(input, context.gangReleases[pod.metadata?.uid ?? '']);
}

/** The GangComplete judgement of this pod: its gang's, when a member was judged alike before. */
function gangJudgement(
  pod: PodLike,
  condition: GangCondition,
  context: JudgeContext,
): GangJudgement {
  const present = gangMembersPresent(pod, condition.groupLabel, context.classified);
  const namespace = pod.metadata?.namespace;
  const group = pod.metadata?.labels?.[condition.groupLabel];
  const sizeText =
    pod.metadata?.annotations?.[condition.sizeAnnotation] ??
    pod.metadata?.labels?.[condition.sizeAnnotation];
  const known = context.gangJudgements.get(present);
  if (
    known !== undefined &&
    known.condition === condition &&
    known.namespace === namespace &&
    known.group === group &&
    known.sizeText === sizeText
  )
    return known;
  const input = evaluateGangComplete(pod, condition, present);
  const judged = { condition, namespace, group, sizeText, input, inputsAlone: [input] };
  context.gangJudgements.set(present, judged);
  return judged;
}

/**
 * GangComplete when it is the policy's only condition besides Budget (its members then
 * share one inputs list), else undefined; found once per GatePolicy of the pass.
 */
function soleGangCondition(
  gatePolicy: GatePolicy,
  context: JudgeContext,
): GangCondition | undefined {
  if (context.soleGangs.has(gatePolicy)) return context.soleGangs.get(gatePolicy);
  const judged = gatePolicy.conditions.filter((c) => c.type !== 'Budget');
  const only = judged.length === 1 ? judged[0] : undefined;
  const sole = only?.type === 'GangComplete' ? only : undefined;
  context.soleGangs.set(gatePolicy, sole);
  return sole;
}
