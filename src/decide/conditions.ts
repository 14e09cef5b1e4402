/**
 * Each GatePolicy condition evaluated to a `ConditionInput`: whether it holds and the
 * value it was judged on, so the audit record explains the decision on its own.
 * Pure: everything the evaluation needs is passed in.
 */
import type { ConditionInput } from './decision.ts';
import type { Approval, GateCondition, GatePolicy, Policy } from '../policy/model.ts';
import { approvalInForce, approvalTargets } from './approvals.ts';
import { imageMatches, normaliseImage, type ImageRef } from './images.ts';
import { budgetFreedBy, chargeReason, classifyPod } from './lifecycle.ts';
import type { NodeLike, PodLike, ClusterSnapshot } from './objects.ts';
import { podRequests, addInto, type Amounts } from './requests.ts';
import { tenantOfNamespace } from './gates.ts';
import { allNodesReady, type NodeReadiness } from './unready-nodes.ts';

export interface Usage {
  pods: number;
  resources: Amounts;
}

export function emptyUsage(): Usage {
  return { pods: 0, resources: {} };
}

export function addUsage(target: Usage, add: Usage): Usage {
  target.pods += add.pods;
  addInto(target.resources, add.resources);
  return target;
}

/**
 * Released-but-unfinished pods of each tenant (by namespace), with their summed requests;
 * pods being deleted or on a node not ready past the tenant's grace are not charged.
 */
export function tenantUsage(
  policy: Policy,
  pods: Iterable<PodLike>,
  nodes: NodeReadiness = allNodesReady,
): Map<string, Usage> {
  const usage = new Map<string, Usage>();
  for (const name of policy.tenants.keys()) usage.set(name, emptyUsage());
  for (const pod of pods) {
    const tenant = tenantOfNamespace(policy, pod.metadata?.namespace ?? '');
    if (!tenant || !chargeReason(pod, classifyPod(pod, policy), tenant)) continue;
    if (budgetFreedBy(pod, tenant, nodes)) continue;
    addUsage(usage.get(tenant.name) as Usage, { pods: 1, resources: podRequests(pod) });
  }
  return usage;
}

/** The budget a tenant may use now: `pods` and each resource; an absent key is unlimited. */
export interface BudgetLimits {
  readonly pods?: number;
  readonly resources: Readonly<Record<string, number>>;
}

/**
 * Whether `adding` fits next to `used` under `limits`. The value names every limited
 * dimension with used / adding / limit, and the first one that does not fit.
 */
export function evaluateBudget(used: Usage, adding: Usage, limits: BudgetLimits): ConditionInput {
  const value: Record<string, { used: number; adding: number; limit: number }> = {};
  const exceeded: string[] = [];
  if (limits.pods !== undefined) {
    value.pods = { used: used.pods, adding: adding.pods, limit: limits.pods };
    if (used.pods + adding.pods > limits.pods) exceeded.push('pods');
  }
  for (const [resource, limit] of Object.entries(limits.resources)) {
    const u = used.resources[resource] ?? 0;
    const a = adding.resources[resource] ?? 0;
    value[resource] = { used: u, adding: a, limit };
    if (a > 0 && u + a > limit) exceeded.push(resource);
  }
  return { condition: 'Budget', met: exceeded.length === 0, value: { ...value, exceeded } };
}

/**
 * Whether `input` says what `evaluateBudget(used + ahead, adding, limits)` would say (with
 * `queuedAhead: ahead.pods` added when `ahead` is given, as a unit held behind the units
 * queued ahead of it records it), without making that input: the same dimensions, each
 * with the same used, adding and limit (whether it fits, and so `exceeded`, follows from
 * those). Their order is the limits' order, one order per policy snapshot, and an input is
 * only ever asked about under the snapshot it was made under. A pass hands a unit held
 * again as it was its last Hold (release-admit.ts): a steady pass over 10,000 pods held by
 * their budget made an input for every one.
 */
export function budgetReadsAs(
  input: ConditionInput,
  used: Usage,
  ahead: Usage | undefined,
  adding: Usage,
  limits: BudgetLimits,
): boolean {
  if (input.condition !== 'Budget') return false;
  const value = input.value as Readonly<Record<string, unknown>>;
  let dimensions = 0;
  if (limits.pods !== undefined) {
    const u = ahead === undefined ? used.pods : used.pods + ahead.pods;
    if (!dimensionReads(value.pods, u, adding.pods, limits.pods)) return false;
    dimensions += 1;
  }
  for (const resource in limits.resources) {
    const u = (used.resources[resource] ?? 0) + (ahead?.resources[resource] ?? 0);
    const a = adding.resources[resource] ?? 0;
    if (!dimensionReads(value[resource], u, a, limits.resources[resource] as number)) return false;
    dimensions += 1;
  }
  if (ahead !== undefined && value.queuedAhead !== ahead.pods) return false;
  let keys = 0;
  for (const key in value) if (Object.hasOwn(value, key)) keys += 1;
  // Each dimension, `exceeded`, and `queuedAhead` when asked with `ahead`.
  return keys === dimensions + 1 + (ahead === undefined ? 0 : 1);
}

function dimensionReads(dimension: unknown, used: number, adding: number, limit: number): boolean {
  const d = dimension as { used: number; adding: number; limit: number } | undefined;
  return d !== undefined && d.used === used && d.adding === adding && d.limit === limit;
}

/**
 * `evaluateBudget(used + ahead, adding, limits).met`, without building the sum or the
 * input: the admission phase asks it for every unit held behind a blocked pacing scope
 * (49,000 units in a 50,000-pod pass), and needs the full input only for a unit that does
 * not fit. Sums as `addUsage` does (0, then used, then ahead), so the answer is the same.
 */
export function budgetFits(
  used: Usage,
  ahead: Usage,
  adding: Usage,
  limits: BudgetLimits,
): boolean {
  if (limits.pods !== undefined && used.pods + ahead.pods + adding.pods > limits.pods) return false;
  for (const resource in limits.resources) {
    const limit = limits.resources[resource] as number;
    const u = (used.resources[resource] ?? 0) + (ahead.resources[resource] ?? 0);
    const a = adding.resources[resource] ?? 0;
    if (a > 0 && u + a > limit) return false;
  }
  return true;
}

export function isReadyNode(node: NodeLike): boolean {
  if (node.spec?.unschedulable) return false;
  return (node.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

export function podImages(pod: PodLike): string[] {
  const images = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]
    .map((c) => c.image)
    .filter((image): image is string => typeof image === 'string' && image.length > 0);
  return [...new Set(images)];
}

/** A pod's images, each with its normalised reference. */
type WantedImages = readonly { readonly image: string; readonly ref: ImageRef }[];

/**
 * Per pod object (the view replaces a pod's object on every change and never edits one):
 * a pass judges ImagePresent for every held pod, and listing and normalising its images
 * again each pass was a tenth of a steady 10,000-pod pass.
 */
const wantedByPod = new WeakMap<PodLike, WantedImages>();

function wantedImages(pod: PodLike): WantedImages {
  let wanted = wantedByPod.get(pod);
  if (wanted === undefined) {
    wanted = podImages(pod).map((image) => ({ image, ref: normaliseImage(image) }));
    wantedByPod.set(pod, wanted);
  }
  return wanted;
}

/**
 * The ready nodes' images, normalised once and grouped by repository. A pass evaluates
 * ImagePresent for every gated pod; normalising every node's images again per pod made
 * that pods x nodes x images (about 3 s a pass at 10,000 pods and 10 nodes of 20 images).
 */
export interface NodeImageIndex {
  readonly readyNodes: number;
  /** repository -> for each ready node reporting it, the references it reports. */
  readonly byRepository: ReadonlyMap<string, readonly (readonly ImageRef[])[]>;
}

export function indexNodeImages(nodes: readonly NodeLike[]): NodeImageIndex {
  const ready = nodes.filter(isReadyNode);
  const byRepository = new Map<string, ImageRef[][]>();
  for (const node of ready) {
    const onNode = new Map<string, ImageRef[]>();
    for (const image of node.status?.images ?? [])
      for (const name of image.names ?? []) {
        const ref = normaliseImage(name);
        const refs = onNode.get(ref.repository) ?? [];
        refs.push(ref);
        onNode.set(ref.repository, refs);
      }
    for (const [repository, refs] of onNode) {
      const list = byRepository.get(repository) ?? [];
      list.push(refs);
      byRepository.set(repository, list);
    }
  }
  return { readyNodes: ready.length, byRepository };
}

/** What ImagePresent records: per image of the pod, on how many ready nodes it is. */
interface ImagePresentValue {
  readonly minNodes: number;
  readonly readyNodes: number;
  readonly images: readonly { readonly image: string; readonly nodes: number }[];
}

/**
 * Every image of the pod present on at least `minNodes` ready nodes. `before`: this pod's
 * ImagePresent input of an earlier pass, returned as it is when it reads the same (a
 * steady pass judges every held pod again, and most read what they read last time).
 */
export function evaluateImagePresent(
  pod: PodLike,
  minNodes: number,
  nodes: readonly NodeLike[] | NodeImageIndex,
  before?: ConditionInput,
): ConditionInput {
  const index = 'byRepository' in nodes ? nodes : indexNodeImages(nodes);
  const wanted = wantedImages(pod);
  if (before !== undefined && readsAsBefore(before, wanted, minNodes, index)) return before;
  const images = wanted.map(({ image, ref }) => ({ image, nodes: nodesWith(ref, index) }));
  const value: ImagePresentValue = { minNodes, readyNodes: index.readyNodes, images };
  return {
    condition: 'ImagePresent',
    met: images.every((i) => i.nodes >= minNodes),
    value,
  };
}

/** How many ready nodes report the image. */
function nodesWith(wanted: ImageRef, index: NodeImageIndex): number {
  // Indexed loops, no closure and no empty list for a repository no node has: asked for
  // every image of every held pod of every pass.
  const onRepository = index.byRepository.get(wanted.repository);
  if (onRepository === undefined) return 0;
  let onNodes = 0;
  for (let n = 0; n < onRepository.length; n++) {
    const refs = onRepository[n] as readonly ImageRef[];
    for (let r = 0; r < refs.length; r++)
      if (imageMatches(wanted, refs[r] as ImageRef)) {
        onNodes++;
        break;
      }
  }
  return onNodes;
}

/** Whether an earlier ImagePresent input says what one made now would say. */
function readsAsBefore(
  before: ConditionInput,
  wanted: WantedImages,
  minNodes: number,
  index: NodeImageIndex,
): boolean {
  if (before.condition !== 'ImagePresent') return false;
  const value = before.value as ImagePresentValue;
  if (value.minNodes !== minNodes || value.readyNodes !== index.readyNodes) return false;
  if (value.images.length !== wanted.length) return false;
  for (let i = 0; i < wanted.length; i++) {
    const { image, ref } = wanted[i] as WantedImages[number];
    const was = value.images[i] as ImagePresentValue['images'][number];
    if (was.image !== image || was.nodes !== nodesWith(ref, index)) return false;
  }
  return true;
}

function fieldAt(object: unknown, path: string): unknown {
  let current: unknown = object;
  for (const part of path.split('.')) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[part];
  }
  return current;
}

type ObjectConditionSpec = Extract<GateCondition, { type: 'ObjectCondition' }>;

export function evaluateObjectCondition(
  pod: PodLike,
  condition: ObjectConditionSpec,
  snapshot: ClusterSnapshot,
): ConditionInput {
  const ref = condition.object;
  const namespace = ref.namespace ?? pod.metadata?.namespace;
  // The kind may be cluster-scoped; the policy cannot say, so an unqualified ref is
  // looked up in the pod's namespace first, then cluster-wide.
  const local = { ...ref, ...(namespace ? { namespace } : {}) };
  const object =
    snapshot.object(local) ??
    (ref.namespace === undefined
      ? snapshot.object({ apiVersion: ref.apiVersion, kind: ref.kind, name: ref.name })
      : undefined);
  const where = `${ref.kind}/${namespace ? `${namespace}/` : ''}${ref.name}`;
  if (object === undefined) {
    // An object that cannot be read is not an absent one: the pod holds, saying why.
    const unreadable = snapshot.objectProblem?.(local);
    return {
      condition: 'ObjectCondition',
      met: false,
      value: { object: where, found: false, ...(unreadable ? { unreadable } : {}) },
    };
  }
  if (condition.conditionType !== undefined) {
    const want = condition.status ?? 'True';
    const conditions = fieldAt(object, 'status.conditions');
    const found = Array.isArray(conditions)
      ? (conditions as { type?: string; status?: string }[]).find(
          (c) => c.type === condition.conditionType,
        )
      : undefined;
    return {
      condition: 'ObjectCondition',
      met: found?.status === want,
      value: {
        object: where,
        conditionType: condition.conditionType,
        want,
        status: found?.status ?? null,
      },
    };
  }
  const actual = fieldAt(object, condition.field ?? '');
  const text = actual === undefined || actual === null ? null : String(actual);
  return {
    condition: 'ObjectCondition',
    met: text === (condition.equals ?? ''),
    value: { object: where, field: condition.field, want: condition.equals, actual: text },
  };
}

/**
 * The unexpired approval of `action` that reaches this pod (gated under `gatePolicy`):
 * bound to the pod's uid, or to pods created before the approval was merged, so it
 * never carries over to a later pod of the same name (see approvals.ts).
 */
export function approvalFor(
  approvals: readonly Approval[],
  pod: PodLike,
  action: 'Release' | 'Cancel',
  now: number,
  gatePolicy?: GatePolicy,
): Approval | undefined {
  // A loop, not `find` with a closure: asked twice for every gated pod of every pass,
  // mostly of a policy with no Approval at all.
  for (const a of approvals)
    if (a.action === action && approvalInForce(a, now) && approvalTargets(a, pod, gatePolicy))
      return a;
  return undefined;
}

export function evaluateApproved(
  pod: PodLike,
  approvals: readonly Approval[],
  now: number,
  gatePolicy?: GatePolicy,
): ConditionInput {
  const approval = approvalFor(approvals, pod, 'Release', now, gatePolicy);
  return {
    condition: 'Approved',
    met: approval !== undefined,
    value: approval
      ? { approval: approval.name, approvedBy: approval.approvedBy, file: approval.source.file }
      : null,
  };
}

type GangSpec = Extract<GateCondition, { type: 'GangComplete' }>;

export function gangId(pod: PodLike, condition: GangSpec): string | undefined {
  const value = pod.metadata?.labels?.[condition.groupLabel];
  return value === undefined ? undefined : `${pod.metadata?.namespace ?? ''}/${value}`;
}

export function gangSize(pod: PodLike, condition: GangSpec): number | undefined {
  const text =
    pod.metadata?.annotations?.[condition.sizeAnnotation] ??
    pod.metadata?.labels?.[condition.sizeAnnotation];
  const size = text === undefined ? NaN : Number(text);
  return Number.isInteger(size) && size > 0 ? size : undefined;
}

/**
 * All members present: the unfinished pods of the namespace carrying the same group
 * label value number at least the expected size. Releasing "together" is the planner's
 * job; this only says whether the gang is whole.
 */
export function evaluateGangComplete(
  pod: PodLike,
  condition: GangSpec,
  members: readonly PodLike[],
): ConditionInput {
  const group = gangId(pod, condition);
  const size = gangSize(pod, condition);
  if (group === undefined || size === undefined) {
    return {
      condition: 'GangComplete',
      met: false,
      value: {
        error:
          group === undefined
            ? `label ${condition.groupLabel} missing`
            : `${condition.sizeAnnotation} missing or not a positive integer`,
      },
    };
  }
  return {
    condition: 'GangComplete',
    met: members.length >= size,
    value: { group, expected: size, present: members.length },
  };
}
