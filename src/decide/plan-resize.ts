/**
 * The resize part of `tollgate plan`, pure: for every running pod a ResizePolicy
 * manages, the requests/limits tollgate would set under the base and under the proposed
 * policy, and the pods where the two differ (or where the managing policy changes).
 *
 * Two bases, never mixed in one plan:
 *
 * - `usage`: the loop's own `decidePodResize`, fed the signal readings the loop's own
 *   queries returned (src/loops/resize-readings.ts). The target is the one a pass run
 *   now would write; a pod whose signals hold keeps its current resources.
 * - `bounds`: no Prometheus was given, so no usage is known. The target is the current
 *   request brought inside the policy's min/max (limits follow as the loop moves them,
 *   `moveRequest`). The loop applies such a correction at the pod's next resize, which
 *   a signal past its threshold triggers; a step down may go further than the bound.
 *   Pods a pass would leave alone for other reasons (paused, RestartContainer without
 *   allowRestart, for pod-level changes too, a QoS class change) keep their current
 *   resources here too, and a resource whose target would break the pod-level budget
 *   keeps its current value.
 *
 * `features` says per proposed ResizePolicy what its resizes can do on the cluster's
 * nodes (in-place resize by kubelet version, pod-level resize by declared feature), as
 * the loop judges it before sending anything (`resize-features.ts`).
 *
 * Quotas are not read (the resize loop `tollgate run` starts reads none either) and no
 * in-memory loop state (Defer backoff, a refused write) is known: like the gate part of
 * the plan, it judges from an empty memory at one instant.
 *
 * Ordering is total: pods by namespace/name, units by container name with the pod-level
 * unit last, resources cpu then memory. Two runs on the same inputs give the same bytes.
 */
import type { Policy, ResizePolicy, ResourceBounds } from '../policy/model.ts';
import type { ResizeNodeLike, ResizePodLike, ResourceListRecord } from './resize-objects.ts';
import { decidePodResize, revertResource, type SignalReading } from './resize-plan.ts';
import { podBudgetProblems } from './resize-budget.ts';
import {
  policyResizeSupport,
  type ApiResizeSupport,
  type PolicyResizeSupport,
} from './resize-features.ts';
import type { ObservedPolicyHistory } from './plan-observed.ts';
import { resizePodsByPolicy } from './resize-match.ts';
import {
  type PodResources,
  type Requirements,
  type ResourcesRecord,
  desiredResources,
  fromRecord,
  moveRequest,
  qosClass,
  resizableResources,
  restartPolicyOf,
  sameRequirements,
  toResourceList,
} from './resize-resources.ts';
import { judgeWindow, type WindowSample } from './resize-signals.ts';
import { readResizeState } from './resize-state.ts';

export type ResizeBasis = 'usage' | 'bounds';

/** The pod-level unit (spec.resources) is named so in outputs. */
export const podUnit = '(pod)';

/** Signal readings of one pod under one ResizePolicy, as the loop would read them now. */
export interface PodSignals {
  readonly readings: readonly SignalReading[];
  readonly slo?: { readonly samples?: readonly WindowSample[]; readonly error?: string };
  readonly stepMs: number;
}

export type SignalsFor = (rp: ResizePolicy, podKey: string) => PodSignals;

export interface PodResizeTarget {
  /** The ResizePolicy that manages the pod. */
  readonly policy: string;
  readonly current: PodResources;
  readonly target: PodResources;
  /** Usage basis only: false when a signal had no data covering its window (it then holds). */
  readonly covered: boolean;
}

export interface ResizeUnitChange {
  /** A container name, or `(pod)` for pod-level resources. */
  readonly unit: string;
  readonly current: ResourceListRecord;
  /** null: the pod is not managed under that policy. */
  readonly base: ResourceListRecord | null;
  readonly proposed: ResourceListRecord | null;
}

export interface ResizeChange {
  readonly pod: string; // namespace/name
  readonly basePolicy: string | null;
  readonly proposedPolicy: string | null;
  /** Units whose target differs (all changed units when the managing policy changes). */
  readonly units: readonly ResizeUnitChange[];
}

export interface ResizePlan {
  readonly basis: ResizeBasis;
  /** Pods managed by a ResizePolicy under base and under proposed. */
  readonly managedBase: number;
  readonly managedProposed: number;
  readonly changes: readonly ResizeChange[];
  /**
   * Usage basis: pods (namespace/name) with a signal whose data did not cover the window
   * under base or proposed, or whose query failed. Their signals hold, so their targets
   * are the current resources: said, so "no change" is never mistaken for "no data".
   */
  readonly uncovered: readonly string[];
  /** Per proposed ResizePolicy (by name): what its resizes can do on the cluster's nodes. */
  readonly features: readonly PolicyResizeSupport[];
  /** Observe-only ResizePolicies' would-be decisions from the audit trail (`plan --audit`). */
  readonly observed?: readonly ObservedPolicyHistory[];
}

/** The names of the ResizePolicies in `mode: Observe` under either policy, sorted. */
export function observeOnlyPolicies(...policies: readonly Policy[]): string[] {
  const names = policies.flatMap((p) =>
    p.resizePolicies.filter((rp) => rp.mode === 'Observe').map((rp) => rp.name),
  );
  return [...new Set(names)].sort(byName);
}

const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

function keyOf(pod: ResizePodLike): string {
  return `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
}

function merged(current: PodResources, record: ResourcesRecord): PodResources {
  const partial = fromRecord(record);
  const containers: Record<string, Requirements> = { ...current.containers };
  for (const [name, req] of Object.entries(partial.containers))
    if (containers[name]) containers[name] = req;
  const pod = partial.pod ?? current.pod;
  return pod ? { containers, pod } : { containers };
}

/** Whether every signal reading of the pod covers the policy's window (as the loop judges it). */
function covers(rp: ResizePolicy, signals: PodSignals, now: number): boolean {
  const window = {
    startMs: now - rp.windowMs,
    endMs: now,
    stepMs: signals.stepMs,
    hysteresis: rp.hysteresis,
  };
  return rp.signals.every((signal) => {
    const readings = signals.readings.filter((r) => r.signal === signal.name);
    return (
      readings.length > 0 &&
      readings.every(
        (r) =>
          r.error === undefined &&
          r.samples !== undefined &&
          judgeWindow(signal, r.samples, window).covered,
      )
    );
  });
}

/** The usage-driven target: what one loop pass now would request, or the current resources. */
function usageTarget(
  policy: Policy,
  rp: ResizePolicy,
  pod: ResizePodLike,
  node: ResizeNodeLike | undefined,
  signals: PodSignals,
  now: number,
): PodResources {
  const current = desiredResources(pod);
  const plan = decidePodResize({
    policy: rp,
    commit: policy.commit,
    pod,
    ...(node ? { node } : {}),
    quotas: [],
    readings: signals.readings,
    ...(signals.slo ? { slo: signals.slo } : {}),
    approvals: policy.approvals,
    now,
    stepMs: signals.stepMs,
    // plan holds no state key: it previews from the state as written, and writes nothing.
    stateKeys: 'preview',
  });
  for (const d of plan.decisions) {
    if (d.kind !== 'Resize' && d.kind !== 'Rollback') continue;
    const target = d.inputs.find((i) => i.condition === 'target')?.value;
    if (target) return merged(current, target as unknown as ResourcesRecord);
  }
  return current;
}

function clampUnit(
  req: Requirements,
  bounds: ResourceBounds,
  skip: (r: 'cpu' | 'memory') => boolean,
): Requirements {
  let out = req;
  for (const r of resizableResources) {
    const b = bounds[r];
    const now = req.requests[r];
    if (!b || now === undefined || skip(r)) continue;
    const inside = Math.min(b.max, Math.max(b.min, now));
    if (inside !== now) out = moveRequest(out, r, inside);
  }
  return out;
}

/** The bounds-only target: current requests brought inside the policy's min/max. */
export function boundsTarget(rp: ResizePolicy, pod: ResizePodLike): PodResources {
  const current = desiredResources(pod);
  if (readResizeState(pod, 'preview').paused) return current;
  const specs = new Map((pod.spec?.containers ?? []).map((c) => [c.name, c]));
  const containers: Record<string, Requirements> = { ...current.containers };
  for (const [name, bounds] of Object.entries(rp.containers)) {
    const req = containers[name];
    if (!req) continue;
    containers[name] = clampUnit(
      req,
      bounds,
      (r) => restartPolicyOf(specs.get(name), r) === 'RestartContainer' && !rp.allowRestart,
    );
  }
  // A pod-level change of a resource is a change for every container: one container's
  // RestartContainer holds it, as in the loop.
  const restarts = (r: 'cpu' | 'memory') =>
    !rp.allowRestart &&
    [...specs.values()].some((c) => restartPolicyOf(c, r) === 'RestartContainer');
  const podLevel = current.pod && rp.pod ? clampUnit(current.pod, rp.pod, restarts) : current.pod;
  let target: PodResources = podLevel ? { containers, pod: podLevel } : { containers };
  // The loop never sends a target over the pod-level budget.
  for (const { resource } of podBudgetProblems(target))
    target = revertResource(target, current, resource);
  // The loop never writes a target that changes the QoS class.
  return qosClass(target) === qosClass(current) ? target : current;
}

/** Target per managed pod (key namespace/name) under one policy. */
export function resizeTargets(
  policy: Policy,
  pods: readonly ResizePodLike[],
  nodes: readonly ResizeNodeLike[],
  now: number,
  signals?: SignalsFor,
): Map<string, PodResizeTarget> {
  const nodeByName = new Map(nodes.map((n) => [n.metadata?.name ?? '', n]));
  const out = new Map<string, PodResizeTarget>();
  for (const [rp, mine] of resizePodsByPolicy(policy, pods)) {
    for (const pod of mine) {
      const key = keyOf(pod);
      const read = signals?.(rp, key);
      const target = read
        ? usageTarget(policy, rp, pod, nodeByName.get(pod.spec?.nodeName ?? ''), read, now)
        : boundsTarget(rp, pod);
      out.set(key, {
        policy: rp.name,
        current: desiredResources(pod),
        target,
        covered: read ? covers(rp, read, now) : true,
      });
    }
  }
  return out;
}

function unitsOf(resources: PodResources | undefined): string[] {
  if (!resources) return [];
  return [...Object.keys(resources.containers), ...(resources.pod ? [podUnit] : [])];
}

function unitOf(resources: PodResources, unit: string): Requirements | undefined {
  return unit === podUnit ? resources.pod : resources.containers[unit];
}

const empty: Requirements = { requests: {}, limits: {} };

/** The pods whose target differs between `base` and `proposed`, in namespace/name order. */
export function diffResizeTargets(
  base: ReadonlyMap<string, PodResizeTarget>,
  proposed: ReadonlyMap<string, PodResizeTarget>,
): ResizeChange[] {
  const changes: ResizeChange[] = [];
  for (const pod of [...new Set([...base.keys(), ...proposed.keys()])].sort(byName)) {
    const b = base.get(pod);
    const p = proposed.get(pod);
    const current = (b ?? p)?.current as PodResources;
    const names = [...new Set([...unitsOf(b?.target), ...unitsOf(p?.target)])];
    const units: ResizeUnitChange[] = [];
    const containers = names.filter((n) => n !== podUnit).sort(byName);
    for (const unit of names.includes(podUnit) ? [...containers, podUnit] : containers) {
      const now = unitOf(current, unit) ?? empty;
      const bt = b ? (unitOf(b.target, unit) ?? now) : undefined;
      const pt = p ? (unitOf(p.target, unit) ?? now) : undefined;
      // A pod only one policy manages: list the units that policy would change.
      const differs = bt && pt ? !sameRequirements(bt, pt) : !sameRequirements(bt ?? pt, now);
      if (!differs) continue;
      units.push({
        unit,
        current: toResourceList(now),
        base: bt ? toResourceList(bt) : null,
        proposed: pt ? toResourceList(pt) : null,
      });
    }
    const basePolicy = b?.policy ?? null;
    const proposedPolicy = p?.policy ?? null;
    if (units.length === 0 && basePolicy === proposedPolicy) continue;
    changes.push({ pod, basePolicy, proposedPolicy, units });
  }
  return changes;
}

export function planResize(
  base: Policy,
  proposed: Policy,
  pods: readonly ResizePodLike[],
  nodes: readonly ResizeNodeLike[],
  now: number,
  signals?: { readonly base: SignalsFor; readonly proposed: SignalsFor },
  api?: ApiResizeSupport,
): ResizePlan {
  const before = resizeTargets(base, pods, nodes, now, signals?.base);
  const after = resizeTargets(proposed, pods, nodes, now, signals?.proposed);
  return {
    basis: signals ? 'usage' : 'bounds',
    managedBase: before.size,
    managedProposed: after.size,
    changes: diffResizeTargets(before, after),
    uncovered: [
      ...new Set([...before, ...after].filter(([, t]) => !t.covered).map(([k]) => k)),
    ].sort(byName),
    features: proposed.resizePolicies
      .map((rp) => policyResizeSupport(rp, nodes, api))
      .sort((a, b) => byName(a.policy, b.policy)),
  };
}

/** `cpu 1500m (limit 3), memory 256Mi` */
export function describeResources(list: ResourceListRecord | null): string {
  if (list === null) return 'not managed';
  const parts: string[] = [];
  for (const r of resizableResources) {
    const request = list.requests?.[r];
    const limit = list.limits?.[r];
    if (request === undefined && limit === undefined) continue;
    const limitText = limit === undefined || limit === request ? '' : ` (limit ${limit})`;
    const guaranteed = limit !== undefined && limit === request ? ' (= limit)' : '';
    parts.push(`${r} ${request ?? 'none'}${limitText}${guaranteed}`);
  }
  return parts.length > 0 ? parts.join(', ') : 'none';
}
