/**
 * The trim step every object passes through before it enters an informer's store.
 * Memory, not privacy, is the reason: `metadata.managedFields` is often larger than
 * the rest of a pod, and the last-applied annotation repeats the whole manifest.
 * Nothing tollgate decides on is removed (spec, status, labels, other annotations,
 * ownerReferences, resourceVersion, uid stay).
 */
import type { KubernetesObject } from '@kubernetes/client-node';

const lastApplied = 'kubectl.kubernetes.io/last-applied-configuration';

/** Returns the object without managedFields and the last-applied annotation. Mutates and returns its argument: it is called on freshly parsed JSON that nothing else holds. */
export function trimObject<T extends KubernetesObject>(object: T): T {
  const metadata = object.metadata;
  if (metadata) {
    delete metadata.managedFields;
    if (metadata.annotations && lastApplied in metadata.annotations) {
      delete metadata.annotations[lastApplied];
    }
  }
  return object;
}
