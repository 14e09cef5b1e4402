/**
 * The contracts between the cluster edge and the loops. Implementations live beside
 * this file (informers, the view, the writer); loops and decide/ see only these types
 * and the plain Kubernetes object types.
 */
import type { KubernetesObject, V1Node, V1Pod } from '@kubernetes/client-node';

export type { KubernetesObject, V1Node, V1Pod };

/** "namespace/name" for namespaced objects, "name" for cluster-scoped ones. */
export type ObjectKey = string;

export function objectKey(namespace: string | undefined, name: string): ObjectKey {
  return namespace ? `${namespace}/${name}` : name;
}

export interface ObjectReference {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace?: string;
  readonly name: string;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface ViewChange {
  readonly type: WatchEventType;
  readonly resource: 'pods' | 'nodes' | 'objects';
  readonly key: ObjectKey;
  readonly object: KubernetesObject;
  /** MODIFIED: the object the view held before this change (trimmed like `object`). */
  readonly previous?: KubernetesObject;
}

/**
 * A read-only, eventually consistent view of the cluster built from list+watch.
 * Objects are trimmed (no managedFields); never mutate them.
 */
export interface ClusterView {
  /** True once pods, nodes and quotas are listed (referenced objects: per reference, `objectProblem`). */
  readonly synced: boolean;
  whenSynced(signal?: AbortSignal): Promise<void>;
  pods(): Iterable<V1Pod>;
  pod(namespace: string, name: string): V1Pod | undefined;
  nodes(): Iterable<V1Node>;
  /** An object a policy references (ObjectCondition); undefined when absent or not watched. */
  object(ref: ObjectReference): KubernetesObject | undefined;
  /** Why a referenced object cannot be judged (its kind is unserved, forbidden, not listed yet); undefined when it can. */
  objectProblem?(ref: ObjectReference): string | undefined;
  /** The newest resourceVersion the given informer has seen (list or event or bookmark). */
  lastResourceVersion(resource: 'pods' | 'nodes' | 'objects'): string | undefined;
  /** Called after the view has applied a change. Returns an unsubscribe function. */
  onChange(listener: (change: ViewChange) => void): () => void;
}
