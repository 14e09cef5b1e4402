/**
 * A pod's cpu and memory as tollgate reasons about them for in-place resize: desired
 * (spec) and actual (status) kept apart, QoS class, and the step of one resource
 * within its bounds. Only cpu and memory are resizable in place; other resources are
 * never read or written here. Amounts are stored units (millicores, bytes).
 */
import type {
  ResizeContainerLike as V1Container,
  ResizePodLike as V1Pod,
  ResourceRequirementsLike as V1ResourceRequirements,
  ResourceListRecord as ResourceList,
} from './resize-objects.ts';
import type { Bounds } from '../policy/model.ts';
import { formatStoredAmount, toStoredAmount } from '../lib/quantity.ts';

export const resizableResources = ['cpu', 'memory'] as const;
export type ResizableResource = (typeof resizableResources)[number];

export type Amounts = Partial<Record<ResizableResource, number>>;

export interface Requirements {
  readonly requests: Amounts;
  readonly limits: Amounts;
}

/** The resizable part of a pod: per container (regular containers only) and pod-level. */
export interface PodResources {
  readonly containers: Readonly<Record<string, Requirements>>;
  readonly pod?: Requirements;
}

export type QosClass = 'Guaranteed' | 'Burstable' | 'BestEffort';

function amountsOf(list: Record<string, string> | undefined): Amounts {
  const out: Amounts = {};
  for (const resource of resizableResources) {
    const text = list?.[resource];
    if (text !== undefined) out[resource] = toStoredAmount(resource, text);
  }
  return out;
}

function requirementsOf(resources: V1ResourceRequirements | undefined): Requirements {
  return { requests: amountsOf(resources?.requests), limits: amountsOf(resources?.limits) };
}

function hasAny(requirements: Requirements | undefined): boolean {
  if (!requirements) return false;
  return Object.keys(requirements.requests).length + Object.keys(requirements.limits).length > 0;
}

/**
 * Requests default to limits when only limits are set (the API server does the same
 * at admission), so what we compare is what the scheduler and kubelet see.
 */
function withDefaultedRequests(requirements: Requirements): Requirements {
  const requests: Amounts = { ...requirements.requests };
  for (const resource of resizableResources) {
    if (requests[resource] === undefined && requirements.limits[resource] !== undefined) {
      requests[resource] = requirements.limits[resource];
    }
  }
  return { requests, limits: { ...requirements.limits } };
}

/** Desired resources: what the pod spec asks for. */
export function desiredResources(pod: V1Pod): PodResources {
  const containers: Record<string, Requirements> = {};
  for (const container of pod.spec?.containers ?? []) {
    containers[container.name] = withDefaultedRequests(requirementsOf(container.resources));
  }
  const podLevel = pod.spec?.resources
    ? withDefaultedRequests(requirementsOf(pod.spec.resources))
    : undefined;
  return hasAny(podLevel) ? { containers, pod: podLevel } : { containers };
}

/**
 * Actual resources: what the kubelet reports it runs with
 * (`status.containerStatuses[].resources`, `status.resources`). Undefined when the
 * kubelet has not reported them for every container yet.
 */
export function actualResources(pod: V1Pod): PodResources | undefined {
  const containers: Record<string, Requirements> = {};
  const statuses = new Map((pod.status?.containerStatuses ?? []).map((s) => [s.name, s]));
  for (const container of pod.spec?.containers ?? []) {
    const status = statuses.get(container.name);
    if (!status?.resources) return undefined;
    containers[container.name] = withDefaultedRequests(requirementsOf(status.resources));
  }
  const podLevelSpec = pod.spec?.resources;
  if (podLevelSpec && hasAny(requirementsOf(podLevelSpec))) {
    const reported = pod.status?.resources;
    // Without a pod-level status the pod-level part is taken as applied only when
    // every container is: older kubelets do not report status.resources.
    const podLevel = reported ? withDefaultedRequests(requirementsOf(reported)) : undefined;
    return podLevel ? { containers, pod: podLevel } : { containers };
  }
  return { containers };
}

/** What the kubelet has admitted (requests only): `status.containerStatuses[].allocatedResources`. */
export function allocatedRequests(pod: V1Pod): Readonly<Record<string, Amounts>> {
  const out: Record<string, Amounts> = {};
  for (const status of pod.status?.containerStatuses ?? []) {
    if (status.allocatedResources) out[status.name] = amountsOf(status.allocatedResources);
  }
  return out;
}

function sameAmounts(a: Amounts, b: Amounts): boolean {
  return resizableResources.every((r) => a[r] === b[r]);
}

export function sameRequirements(
  a: Requirements | undefined,
  b: Requirements | undefined,
): boolean {
  if (!a || !b) return !hasAny(a) && !hasAny(b);
  return sameAmounts(a.requests, b.requests) && sameAmounts(a.limits, b.limits);
}

/** Equal in every container both name, and pod-level when both report it. */
export function sameResources(a: PodResources, b: PodResources): boolean {
  const names = new Set([...Object.keys(a.containers), ...Object.keys(b.containers)]);
  for (const name of names) {
    if (!sameRequirements(a.containers[name], b.containers[name])) return false;
  }
  if (a.pod && b.pod) return sameRequirements(a.pod, b.pod);
  return true;
}

/**
 * The QoS class as the API server computes it (pkg/apis/core/helper/qos): Guaranteed
 * when every container (or the pod-level budget, when set) has cpu and memory limits
 * equal to requests; BestEffort when nothing is set anywhere; Burstable otherwise.
 */
export function qosClass(resources: PodResources): QosClass {
  const units: Requirements[] = resources.pod
    ? [resources.pod]
    : Object.values(resources.containers);
  const all = [...Object.values(resources.containers), ...(resources.pod ? [resources.pod] : [])];
  if (all.every((unit) => !hasAny(unit))) return 'BestEffort';
  const guaranteed = units.every((unit) =>
    resizableResources.every(
      (r) => unit.limits[r] !== undefined && unit.requests[r] === unit.limits[r],
    ),
  );
  return guaranteed ? 'Guaranteed' : 'Burstable';
}

/**
 * Moves a requirement's request to `request` and keeps the QoS shape: a limit equal to
 * the request follows it exactly (Guaranteed stays Guaranteed); a larger limit moves by
 * the same delta and never drops below the new request (Burstable headroom kept).
 */
export function moveRequest(
  requirements: Requirements,
  resource: ResizableResource,
  request: number,
): Requirements {
  const oldRequest = requirements.requests[resource];
  const oldLimit = requirements.limits[resource];
  const limits: Amounts = { ...requirements.limits };
  if (oldLimit !== undefined) {
    if (oldRequest === undefined || oldLimit === oldRequest) limits[resource] = request;
    else limits[resource] = Math.max(request, oldLimit + (request - oldRequest));
  }
  return { requests: { ...requirements.requests, [resource]: request }, limits };
}

/**
 * One step from `current` in a direction, clamped to [min, max]. A value outside the
 * bounds is first brought inside them (a workload created outside its policy is
 * corrected toward it, one step at most past the bound).
 */
export function stepWithin(current: number, direction: 'up' | 'down', bounds: Bounds): number {
  const next = direction === 'up' ? current + bounds.step : current - bounds.step;
  return Math.min(bounds.max, Math.max(bounds.min, next));
}

/** The restart policy a container declares for one resource (default NotRequired). */
export function restartPolicyOf(
  container: V1Container | undefined,
  resource: ResizableResource,
): string {
  const entry = container?.resizePolicy?.find((p) => p.resourceName === resource);
  return entry?.restartPolicy ?? 'NotRequired';
}

function listOf(amounts: Amounts): Record<string, string> {
  const out: Record<string, string> = {};
  for (const r of resizableResources) {
    const value = amounts[r];
    if (value !== undefined) out[r] = formatStoredAmount(r, value);
  }
  return out;
}

export function toResourceList(requirements: Requirements): ResourceList {
  const requests = listOf(requirements.requests);
  const limits = listOf(requirements.limits);
  return {
    ...(Object.keys(requests).length ? { requests } : {}),
    ...(Object.keys(limits).length ? { limits } : {}),
  };
}

/** JSON form of PodResources with quantity strings, as stored in annotations and audit inputs. */
export interface ResourcesRecord {
  readonly containers: Readonly<Record<string, ResourceList>>;
  readonly pod?: ResourceList;
}

export function toRecord(resources: PodResources): ResourcesRecord {
  const containers: Record<string, ResourceList> = {};
  for (const [name, req] of Object.entries(resources.containers))
    containers[name] = toResourceList(req);
  return resources.pod ? { containers, pod: toResourceList(resources.pod) } : { containers };
}

export function fromRecord(record: ResourcesRecord): PodResources {
  const containers: Record<string, Requirements> = {};
  for (const [name, list] of Object.entries(record.containers ?? {})) {
    containers[name] = requirementsOf(list as V1ResourceRequirements);
  }
  return record.pod
    ? { containers, pod: requirementsOf(record.pod as V1ResourceRequirements) }
    : { containers };
}

/** Sum of requests of a pod as the scheduler counts it: pod-level when set, else containers. */
export function podRequests(resources: PodResources): Amounts {
  if (resources.pod && Object.keys(resources.pod.requests).length > 0)
    return { ...resources.pod.requests };
  const out: Amounts = {};
  for (const req of Object.values(resources.containers)) {
    for (const r of resizableResources) {
      const value = req.requests[r];
      if (value !== undefined) out[r] = (out[r] ?? 0) + value;
    }
  }
  return out;
}

export function podLimits(resources: PodResources): Amounts {
  if (resources.pod && Object.keys(resources.pod.limits).length > 0)
    return { ...resources.pod.limits };
  const out: Amounts = {};
  for (const req of Object.values(resources.containers)) {
    for (const r of resizableResources) {
      const value = req.limits[r];
      if (value !== undefined) out[r] = (out[r] ?? 0) + value;
    }
  }
  return out;
}
