/**
 * The trim step every object passes through before it enters an informer's store.
 * Memory, not privacy, is the reason: `metadata.managedFields` is often larger than
 * the rest of a pod, and the last-applied annotation repeats the whole manifest.
 *
 * Pods are kept in a compact form: their containers lose what only the kubelet reads
 * (command, args, env, probes, mounts, ports, security context, termination message
 * settings) and the pod loses its volumes, about 40% of a batch worker's JSON.
 * Nothing tollgate decides on is removed: metadata (labels, annotations,
 * ownerReferences, resourceVersion, uid), the scheduling gates, node name, selectors
 * and tolerations, container names, images and pull policies, resources and resize
 * policies, and the whole status stay. Cached pods are never written back whole (every
 * write is a patch), so the dropped fields are never lost from the cluster.
 */
import type { KubernetesObject } from '@kubernetes/client-node';

const lastApplied = 'kubectl.kubernetes.io/last-applied-configuration';

/** Container fields no decision reads. */
const containerFieldsDropped = [
  'command',
  'args',
  'workingDir',
  'env',
  'envFrom',
  'ports',
  'volumeMounts',
  'volumeDevices',
  'livenessProbe',
  'readinessProbe',
  'startupProbe',
  'lifecycle',
  'securityContext',
  'terminationMessagePath',
  'terminationMessagePolicy',
] as const;

const containerLists = ['initContainers', 'containers', 'ephemeralContainers'] as const;

type PodSpecLike = Record<string, unknown> & { containers: unknown[] };

/** A pod: kind Pod, or (list items carry no kind) an object whose spec has containers. */
function podSpecOf(object: KubernetesObject): PodSpecLike | undefined {
  if (object.kind !== undefined && object.kind !== 'Pod') return undefined;
  const spec = (object as { spec?: unknown }).spec;
  if (typeof spec !== 'object' || spec === null) return undefined;
  return Array.isArray((spec as { containers?: unknown }).containers)
    ? (spec as PodSpecLike)
    : undefined;
}

function compactPodSpec(spec: PodSpecLike): void {
  delete spec.volumes;
  for (const list of containerLists) {
    const containers = spec[list];
    if (!Array.isArray(containers)) continue;
    for (const container of containers as Record<string, unknown>[])
      for (const field of containerFieldsDropped) delete container[field];
  }
}

/** Returns the object without managedFields and the last-applied annotation, a pod in its compact form. Mutates and returns its argument: it is called on freshly parsed JSON that nothing else holds. */
export function trimObject<T extends KubernetesObject>(object: T): T {
  const metadata = object.metadata;
  if (metadata) {
    delete metadata.managedFields;
    if (metadata.annotations && lastApplied in metadata.annotations) {
      delete metadata.annotations[lastApplied];
    }
  }
  const podSpec = podSpecOf(object);
  if (podSpec) compactPodSpec(podSpec);
  return object;
}
