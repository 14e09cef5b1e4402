/**
 * The trim step every object passes through before it enters an informer's store.
 * Memory, not privacy, is the reason: `metadata.managedFields` is often larger than
 * the rest of a pod, and the last-applied annotation repeats the whole manifest.
 *
 * The pods the cluster view lists (`trimPod`, the view's pod informer) are kept in the
 * form tollgate's readers need, and nothing else: `podFieldsRead` lists it field by field.
 * Metadata: name, namespace, uid, resourceVersion, generation, creation and deletion
 * times, labels and annotations. Spec: node name, scheduling gates, pod-level resources
 * and overhead, and of each container and init container its name, image, resources,
 * resize policy and restart policy. Status: phase, observedGeneration, pod-level
 * resources, the conditions (type, status, reason, message, lastTransitionTime,
 * observedGeneration) and of each container's and init container's status its name,
 * restart count, state, last state, resources and allocated resources. Gate release,
 * resize, explain and queue, break-glass, the stale-guard and the read-back of writes
 * read nothing else of a pod. Of a Job pod's JSON as served about 40% is kept (about
 * half of the compact form below; `test/builders/served-pod.ts`). The rest
 * (ownerReferences, tolerations, affinity, node selector, volumes, the containers'
 * command, env, probes and mounts, IPs, QoS class, container IDs and image digests) is
 * only the scheduler's and the kubelet's. A reader of a new pod field adds it to
 * `podFieldsRead`. Cached pods are never written back whole (every write is a patch),
 * so what is not kept is never lost from the cluster.
 *
 * Every other object keeps its fields but those two (`trimObject`): an ObjectCondition
 * may compare any field of the object it names, and those objects are few. A pod named
 * that way is the one exception, kept from before: the compact form, its containers
 * without command, args, env, probes, mounts, ports, security context and termination
 * message settings, the pod without its volumes.
 *
 * The kept parts are copied into new objects rather than `delete`d in place: V8 turns
 * an object that loses a property into a slower, larger dictionary object, and 10,000
 * such pods held 60 MB of heap where the copies hold 36 MB.
 *
 * Repeated values are kept once (`SharedValues`): V8's JSON.parse gives every string value
 * its own copy, so 10,000 pods of a few Jobs held 10,000 copies of their namespace, images,
 * label values, tolerations, node names, condition types, reasons and messages. Values
 * unique to one object (its name, uid, resourceVersion, IPs, container IDs) are left out of
 * the table, and the table is bounded: a full table starts again.
 *
 * The view's pods share whole parts too (`SharedParts`): every pod of a Job lists the same
 * containers, the same gate and, created in one burst, the same conditions and phase, and
 * each held its own copy of every such object. A pod's spec and status are shared bottom
 * up: each object and list under them is replaced by the table's copy of an equal one,
 * then the object that holds it, up to the spec or status whole when it equals another
 * pod's. The shared copies are frozen, because a reader that wrote to one would change
 * every pod that shares it; it throws instead (tollgate's modules are strict). Metadata is
 * not shared: a pod's name and uid are its own, and an indexed Job gives each pod its own
 * completion index in its labels and annotations.
 */
import type { KubernetesObject } from '@kubernetes/client-node';

const lastApplied = 'kubectl.kubernetes.io/last-applied-configuration';

/** Container fields dropped from a pod an ObjectCondition names (`trimObject`). */
const containerFieldsDropped: ReadonlySet<string> = new Set([
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
]);

const containerLists: ReadonlySet<string> = new Set([
  'initContainers',
  'containers',
  'ephemeralContainers',
]);

type Fields = Record<string, unknown>;

/** Longer values (messages, JSON in annotations) are seldom shared by many objects. */
const maxSharedLength = 64;

/** Fields whose value belongs to one object or container: never worth a place in the table. */
const uniqueFields: ReadonlySet<string> = new Set([
  'uid',
  'resourceVersion',
  'podIP',
  'ip',
  'containerID',
]);

/** The same under `metadata`, where `name` is the object's own. */
const uniqueMetadataFields: ReadonlySet<string> = new Set([...uniqueFields, 'name']);

/** One copy of each short string value seen, handed back for every later equal value. */
export class SharedValues {
  readonly #values = new Map<string, string>();
  readonly #capacity: number;

  constructor(capacity = 20_000) {
    this.#capacity = capacity;
  }

  get size(): number {
    return this.#values.size;
  }

  has(value: string): boolean {
    return this.#values.has(value);
  }

  /** The table's copy of `value` (which becomes it when new and short). */
  share(value: string): string {
    if (value.length > maxSharedLength) return value;
    const known = this.#values.get(value);
    if (known !== undefined) return known;
    if (this.#values.size >= this.#capacity) this.#values.clear();
    this.#values.set(value, value);
    return value;
  }

  /** Replaces, in place, every shareable string value under `object` by the table's copy. */
  shareIn(object: Fields | unknown[], unique: ReadonlySet<string> = uniqueFields): void {
    if (Array.isArray(object)) {
      for (let i = 0; i < object.length; i++) object[i] = this.#shared(object[i]);
      return;
    }
    for (const key of Object.keys(object)) {
      if (unique.has(key)) continue;
      const value = object[key];
      if (key === 'metadata' && isObject(value)) this.shareIn(value, uniqueMetadataFields);
      else object[key] = this.#shared(value);
    }
  }

  #shared(value: unknown): unknown {
    if (typeof value === 'string') return this.share(value);
    if (typeof value === 'object' && value !== null) this.shareIn(value as Fields | unknown[]);
    return value;
  }
}

/** The table every informer's trim step shares (one per process). */
const processValues = new SharedValues();

/** A part whose key is longer (a long condition message) is seldom held alike by many pods. */
const maxSharedPartLength = 512;

/**
 * One frozen copy of each part of a pod seen (a container, a condition, a list of them, a
 * spec), handed back for every later equal part. A part is keyed by its fields, each
 * object under it by the number the table gave it when it was shared, so a key stays
 * short however deep the part. Bounded: a full table starts again (the parts already
 * handed out stay shared); a table of capacity 0 shares nothing and does no work.
 */
export class SharedParts {
  readonly #parts = new Map<string, object>();
  readonly #numbers = new Map<object, number>();
  readonly #capacity: number;
  #next = 0;

  constructor(capacity = 2_048) {
    this.#capacity = capacity;
  }

  get size(): number {
    return this.#parts.size;
  }

  /**
   * `value` with each object and list under it, then itself, replaced by the table's copy
   * of an equal one; a new part becomes that copy, frozen. A part with a field that could
   * not be shared, or whose key is too long, stays as it is (and its fields shared).
   */
  share<T>(value: T): T {
    if (this.#capacity === 0 || typeof value !== 'object' || value === null) return value;
    if (Object.isFrozen(value)) return value;
    const fields = value as Record<string, unknown>;
    let key = Array.isArray(value) ? '[' : '{';
    let everyFieldShared = true;
    for (const name of Object.keys(fields)) {
      const field = this.share(fields[name]);
      fields[name] = field;
      const fieldKey = this.#keyOf(field);
      if (fieldKey === undefined) everyFieldShared = false;
      else key += `${name.length}.${name}:${fieldKey},`;
    }
    if (!everyFieldShared || key.length > maxSharedPartLength) return value;
    const known = this.#parts.get(key);
    if (known !== undefined) return known as T;
    this.#keep(key, value);
    return value;
  }

  /**
   * A field's value in a key: tagged with its type, a string with its length, a shared
   * object by its number, so no two values read alike; undefined for an object not shared.
   */
  #keyOf(field: unknown): string | undefined {
    if (typeof field === 'string') return `s${field.length}.${field}`;
    if (typeof field !== 'object' || field === null) return String(field);
    const number = this.#numbers.get(field);
    return number === undefined ? undefined : `#${number}`;
  }

  #keep(key: string, part: object): void {
    if (this.#parts.size >= this.#capacity) {
      this.#parts.clear();
      this.#numbers.clear();
    }
    this.#parts.set(key, Object.freeze(part));
    this.#numbers.set(part, this.#next++);
  }
}

/** The table the view's trim step shares (one per process). */
const processParts = new SharedParts();

/** The fields of `object` for which `keep` holds, in a new object (values shared). */
function copyWithout(object: Fields, keep: (key: string) => boolean): Fields {
  const copy: Fields = {};
  for (const key of Object.keys(object)) if (keep(key)) copy[key] = object[key];
  return copy;
}

function isObject(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A pod: kind Pod, or (list items carry no kind) an object whose spec has containers. */
function isPod(object: Fields): boolean {
  if (object.kind !== undefined && object.kind !== 'Pod') return false;
  return isObject(object.spec) && Array.isArray(object.spec.containers);
}

function trimMetadata(metadata: Fields): Fields {
  const trimmed = copyWithout(metadata, (key) => key !== 'managedFields');
  const annotations = metadata.annotations;
  if (isObject(annotations) && lastApplied in annotations)
    trimmed.annotations = copyWithout(annotations, (key) => key !== lastApplied);
  return trimmed;
}

function compactContainer(container: unknown): unknown {
  return isObject(container)
    ? copyWithout(container, (key) => !containerFieldsDropped.has(key))
    : container;
}

function compactPodSpec(spec: Fields): Fields {
  const compact = copyWithout(spec, (key) => key !== 'volumes');
  for (const list of containerLists) {
    const containers = spec[list];
    if (Array.isArray(containers)) compact[list] = containers.map(compactContainer);
  }
  return compact;
}

/**
 * The object without managedFields and the last-applied annotation, a pod in its compact
 * form, its repeated values shared through `values`. A new object; its argument is freshly
 * parsed JSON that nothing else holds (its values are shared in place).
 */
export function trimObject<T extends KubernetesObject>(
  object: T,
  values: SharedValues = processValues,
): T {
  const fields = object as unknown as Fields;
  const trimmed: Fields = isObject(fields.metadata)
    ? { ...fields, metadata: trimMetadata(fields.metadata) }
    : { ...fields };
  if (isPod(fields)) trimmed.spec = compactPodSpec(fields.spec as Fields);
  values.shareIn(trimmed);
  return trimmed as unknown as T;
}

/** Which fields of an object to keep: `true` keeps the value whole, a shape keeps those fields of an object, or of each object of a list. */
interface Shape {
  readonly [field: string]: true | Shape;
}

const containerRead: Shape = {
  name: true,
  image: true,
  resources: true,
  resizePolicy: true,
  /** `Always` marks a restartable init container (a sidecar). */
  restartPolicy: true,
};

const conditionRead: Shape = {
  type: true,
  status: true,
  reason: true,
  message: true,
  lastTransitionTime: true,
  observedGeneration: true,
};

const containerStatusRead: Shape = {
  name: true,
  restartCount: true,
  /** Waiting reasons (explain: image pulls, crash loops); terminated reasons (resize: OOMKilled). */
  state: true,
  lastState: true,
  resources: true,
  allocatedResources: true,
};

/** Every field of a pod some part of tollgate reads; the view's pods keep these and no other. */
export const podFieldsRead: Shape = {
  apiVersion: true,
  kind: true,
  metadata: {
    name: true,
    namespace: true,
    uid: true,
    resourceVersion: true,
    generation: true,
    creationTimestamp: true,
    deletionTimestamp: true,
    labels: true,
    annotations: true,
  },
  spec: {
    nodeName: true,
    schedulingGates: true,
    initContainers: containerRead,
    containers: containerRead,
    overhead: true,
    resources: true,
  },
  status: {
    phase: true,
    observedGeneration: true,
    conditions: conditionRead,
    initContainerStatuses: containerStatusRead,
    containerStatuses: containerStatusRead,
    resources: true,
  },
};

/** The fields of `value` that `shape` lists, in `shape`'s order (one hidden class for every pod), in new objects. */
function keepOnly(value: unknown, shape: Shape): unknown {
  if (Array.isArray(value)) return value.map((item) => keepOnly(item, shape));
  if (!isObject(value)) return value;
  const kept: Fields = {};
  for (const key in shape) {
    const field = value[key];
    if (field === undefined) continue;
    const keep = shape[key] as true | Shape;
    kept[key] = keep === true ? field : keepOnly(field, keep);
  }
  return kept;
}

/**
 * A pod as the cluster view keeps it: the fields of `podFieldsRead` only, without the
 * last-applied annotation, its repeated values shared through `values` and its spec and
 * status through `parts`. A new object; its argument is freshly parsed JSON that nothing
 * else holds (its values are shared in place).
 */
export function trimPod<T extends KubernetesObject>(
  object: T,
  values: SharedValues = processValues,
  parts: SharedParts = processParts,
): T {
  const kept = keepOnly(object, podFieldsRead) as Fields;
  const metadata = kept.metadata;
  if (isObject(metadata) && isObject(metadata.annotations) && lastApplied in metadata.annotations)
    metadata.annotations = copyWithout(metadata.annotations, (key) => key !== lastApplied);
  values.shareIn(kept);
  if (kept.spec !== undefined) kept.spec = parts.share(kept.spec);
  if (kept.status !== undefined) kept.status = parts.share(kept.status);
  return kept as unknown as T;
}
