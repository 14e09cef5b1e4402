/**
 * An informer's store: objects by key, plus the pure functions that turn a watch
 * event or a full relist into the changes listeners see.
 *
 * A relist is an atomic replace: the new map is built from the complete list, the
 * store swaps to it in one step, and only then are the differences reported, with a
 * synthetic DELETED for every object that vanished while tollgate was not watching.
 * Loops therefore never observe a half-listed store, and the stale-guard sees one
 * resourceVersion for the whole replace.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { objectKey, type ObjectKey, type WatchEventType } from './types.ts';

export interface StoreChange {
  readonly type: WatchEventType;
  readonly key: ObjectKey;
  readonly object: KubernetesObject;
  /** MODIFIED: the object the store held before this change. */
  readonly previous?: KubernetesObject;
}

export function keyOf(object: KubernetesObject): ObjectKey {
  const name = object.metadata?.name;
  if (!name) throw new Error(`object of kind ${object.kind ?? '?'} has no metadata.name`);
  return objectKey(object.metadata?.namespace, name);
}

/**
 * The changes that turn `previous` into `next`: ADDED for new keys, MODIFIED when
 * the resourceVersion (or uid: deleted and re-created under the same name) differs,
 * DELETED (carrying the last known object) for keys missing from `next`.
 */
export function diffRelist(
  previous: ReadonlyMap<ObjectKey, KubernetesObject>,
  next: ReadonlyMap<ObjectKey, KubernetesObject>,
): StoreChange[] {
  const changes: StoreChange[] = [];
  for (const [key, object] of next) {
    const before = previous.get(key);
    if (!before) {
      changes.push({ type: 'ADDED', key, object });
    } else if (
      before.metadata?.resourceVersion !== object.metadata?.resourceVersion ||
      before.metadata?.uid !== object.metadata?.uid
    ) {
      changes.push({ type: 'MODIFIED', key, object, previous: before });
    }
  }
  for (const [key, object] of previous) {
    if (!next.has(key)) changes.push({ type: 'DELETED', key, object });
  }
  return changes;
}

export class ObjectStore {
  #objects = new Map<ObjectKey, KubernetesObject>();

  get size(): number {
    return this.#objects.size;
  }
  get(key: ObjectKey): KubernetesObject | undefined {
    return this.#objects.get(key);
  }
  values(): IterableIterator<KubernetesObject> {
    return this.#objects.values();
  }

  /** Applies one watch event; returns the change to report, or undefined when it changes nothing. */
  apply(type: WatchEventType, object: KubernetesObject): StoreChange | undefined {
    const key = keyOf(object);
    if (type === 'DELETED') {
      const had = this.#objects.delete(key);
      return had ? { type, key, object } : undefined;
    }
    const before = this.#objects.get(key);
    this.#objects.set(key, object);
    // An ADDED for a key already present (a resumed watch replaying) is a modification.
    return before
      ? { type: 'MODIFIED', key, object, previous: before }
      : { type: 'ADDED', key, object };
  }

  /** Swaps in the complete new content and returns the differences. */
  replace(objects: Iterable<KubernetesObject>): StoreChange[] {
    const next = new Map<ObjectKey, KubernetesObject>();
    for (const object of objects) next.set(keyOf(object), object);
    const changes = diffRelist(this.#objects, next);
    this.#objects = next;
    return changes;
  }
}
