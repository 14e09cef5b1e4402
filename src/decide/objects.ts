/**
 * The slices of Kubernetes objects the gate-release decisions read. decide/ may not
 * import the client library (not even its types), so these are structural: a
 * `V1Pod` or `V1Node` from the cluster view is assignable to them as is.
 *
 * Timestamps may be `Date` (the client deserialises them) or RFC 3339 strings (test
 * builders, raw JSON); `timestampMs` reads either.
 */
import type { Target } from './decision.ts';

export type Quantities = Readonly<Record<string, string | number>> | undefined;

export interface ContainerLike {
  readonly name: string;
  readonly image?: string;
  readonly resources?: { readonly requests?: Quantities; readonly limits?: Quantities };
  /** `Always` marks a restartable init container (a sidecar). */
  readonly restartPolicy?: string;
}

export interface ConditionLike {
  readonly type: string;
  readonly status: string;
  readonly reason?: string;
  readonly lastTransitionTime?: Date | string;
}

export interface MetaLike {
  readonly name?: string;
  readonly namespace?: string;
  readonly uid?: string;
  readonly resourceVersion?: string;
  readonly creationTimestamp?: Date | string;
  readonly deletionTimestamp?: Date | string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
}

export interface PodLike {
  readonly metadata?: MetaLike;
  readonly spec?: {
    readonly nodeName?: string;
    readonly schedulingGates?: readonly { readonly name: string }[];
    readonly containers: readonly ContainerLike[];
    readonly initContainers?: readonly ContainerLike[];
    readonly overhead?: Quantities;
    /** Pod-level resources: where set, they are the pod's requests for those resources. */
    readonly resources?: { readonly requests?: Quantities; readonly limits?: Quantities };
  };
  readonly status?: { readonly phase?: string; readonly conditions?: readonly ConditionLike[] };
}

export interface NodeLike {
  readonly metadata?: MetaLike;
  readonly spec?: { readonly unschedulable?: boolean };
  readonly status?: {
    readonly conditions?: readonly ConditionLike[];
    readonly images?: readonly { readonly names?: readonly string[] }[];
  };
}

export interface ObjectRefLike {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace?: string;
  readonly name: string;
}

/**
 * What one pass reads: the cluster view's read side. `ClusterView` satisfies it, and
 * unit tests build one from plain arrays (`snapshotOf`).
 */
export interface ClusterSnapshot {
  pods(): Iterable<PodLike>;
  nodes(): Iterable<NodeLike>;
  object(ref: ObjectRefLike): unknown;
  /** Why the object cannot be judged (unreadable kind, not listed yet); undefined when `object` is the truth. */
  objectProblem?(ref: ObjectRefLike): string | undefined;
}

export function timestampMs(value: Date | string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ms = value instanceof Date ? value.getTime() : Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

/** The pod as a decision's target: namespace, name, uid and the resourceVersion decided on. */
export function podTarget(pod: PodLike): Target {
  return {
    namespace: pod.metadata?.namespace ?? '',
    name: pod.metadata?.name ?? '',
    uid: pod.metadata?.uid ?? '',
    resourceVersion: pod.metadata?.resourceVersion ?? '',
  };
}

export function podKey(pod: PodLike): string {
  return `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
}

/** Succeeded or Failed: the pod holds no resources and no budget any more. */
export function isFinished(pod: PodLike): boolean {
  const phase = pod.status?.phase;
  return phase === 'Succeeded' || phase === 'Failed';
}

export function snapshotOf(
  pods: readonly PodLike[],
  nodes: readonly NodeLike[] = [],
  objects: readonly (ObjectRefLike & { readonly object: unknown })[] = [],
): ClusterSnapshot {
  return {
    pods: () => pods,
    nodes: () => nodes,
    object: (ref) =>
      objects.find(
        (o) =>
          o.apiVersion === ref.apiVersion &&
          o.kind === ref.kind &&
          o.name === ref.name &&
          (o.namespace ?? '') === (ref.namespace ?? ''),
      )?.object,
  };
}
