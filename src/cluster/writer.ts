/**
 * The API side of the dispatcher: carries out one `WriteOperation` against a pod.
 * Every write asserts the state it was decided on, so a decision made on stale data
 * fails instead of overwriting someone else's change:
 *
 * - removeGate: JSON Patch `test` of metadata.resourceVersion and of the gate's name
 *   at its index, then `remove` of that index, and (when asked) the annotation
 *   tollgate.io/released in the same patch. Only tollgate's gate goes; a foreign
 *   gate at another index stays. Removing the last gate leaves `schedulingGates: []`,
 *   which the API server accepts (gates may be removed, never added, after creation).
 * - resize: strategic merge patch on the `pods/resize` subresource carrying
 *   metadata.resourceVersion, which the API server treats as a precondition (409).
 * - delete: preconditions {uid, resourceVersion}, so a re-created pod of the same name
 *   or a pod changed since the decision is not deleted (409).
 * - annotate: merge patch of metadata.annotations with metadata.resourceVersion.
 * - podCondition: strategic merge patch of one condition on pods/status (conditions
 *   merge by type). No precondition: the condition is tollgate's own report, and the
 *   dispatcher drops it for a pod the view shows gone or replaced.
 * - event: create of an events.k8s.io/v1 Event, or merge patch of its `series` (the
 *   rest of an Event is immutable). No precondition: an Event is tollgate's own record.
 *
 * Errors: HTTP failures are thrown as `KubeApiError` with `statusCode` and the API's
 * Status message; network failures keep their `code` (ECONNREFUSED, ...); an aborted
 * signal surfaces as an AbortError.
 *
 * What the real API server answers when a JSON Patch `test` fails (measured against
 * kube-apiserver v1.37.2, test/e2e/cluster-view/writer.test.ts):
 *   HTTP 422, Status {reason: "Invalid", message: "the server rejected our request due
 *   to an error in our request", details: {}} -- no causes, no field, nothing that says
 *   "test". A `remove` of an index that no longer exists answers exactly the same.
 *   A real validation failure (e.g. adding a gate) is also 422/Invalid but names the
 *   pod and lists causes in details.
 * So a 422 with that generic message and no causes, answering one of tollgate's JSON
 * Patches, means "the pod is not in the state the decision assumed": it is thrown with
 * `conflict: true` (statusCode stays 422) and the dispatcher must send the key back to
 * be decided again from fresh state, never retry it blindly and never record it as a
 * final 422. Every 409 is thrown with `conflict: true` as well.
 */
import {
  CoreV1Api,
  EventsV1Api,
  Observable,
  PatchStrategy,
  V1MicroTime,
  type ConfigurationOptions,
  type KubeConfig,
  type ObservableMiddleware,
} from '@kubernetes/client-node';
import type {
  ReadBack,
  ReadBackVerdict,
  WriteExecutor,
  WriteOperation,
  WriteRequest,
  ResourceList,
} from '../dispatch/types.ts';
import type { Dispatcher } from 'undici';
import { RELEASED_ANNOTATION } from '../decide/lifecycle.ts';
import { createApiCaller, type ApiCall } from './api-request.ts';
import { KubeApiError, toKubeError } from './errors.ts';

/** The HTTP status kube-apiserver returns for a JSON Patch whose `test` fails (measured; see the module comment). */
export const failedPatchTestStatus = 422;
/** The Status message that comes with it (the same for any JSON Patch that does not apply). */
export const failedPatchTestMessage =
  'the server rejected our request due to an error in our request';

/** True when the API rejected a JSON Patch because it did not apply to the current object (a failed `test`, a vanished index). */
export function isFailedPatchTest(error: unknown): boolean {
  return (
    error instanceof KubeApiError &&
    error.statusCode === failedPatchTestStatus &&
    error.apiMessage === failedPatchTestMessage &&
    error.causes.length === 0
  );
}

/** The errors a writer throws: KubeApiError plus `conflict` for failed preconditions of any kind. */
export type WriteError = KubeApiError & { readonly conflict: boolean };

export interface WriteExecutorOptions {
  /** managedFields manager name of tollgate's patches. */
  readonly fieldManager?: string;
  /**
   * The leader's fence, asked again at the moment a request is written to its connection
   * (see `fenceAtTheWire`): false means the request is never sent.
   */
  readonly fence?: () => boolean;
}

/**
 * The term closed before the request reached a connection: it was never sent. The
 * dispatcher knows it by `fencedBeforeSend` and ends the write `cancelled`.
 */
export class FencedBeforeSendError extends Error {
  readonly fencedBeforeSend = true;
  constructor(context: string) {
    super(
      `leadership lost: ${context} was never sent (the fence closed before it reached a connection)`,
    );
    this.name = 'FencedBeforeSendError';
  }
}

/** True for a write the fence kept off the wire, wherever it sits in an error's cause chain. */
export function isFencedBeforeSend(error: unknown): error is FencedBeforeSendError {
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 8; depth++) {
    if (e instanceof FencedBeforeSendError) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

type Handler = Dispatcher.DispatchHandler;

/**
 * The fence asked at the last moment: undici calls a handler's `onRequestStart` right
 * before it writes the request to a connection, and a request aborted there is not
 * written. Between the dispatcher's own fence check and that moment, a request may wait
 * for the pool, a TCP connect or a TLS handshake; a leader paused there past its lease
 * and resumed runs that I/O before its lease loop notices the term is over (I/O callbacks
 * come before timers in the event loop), so without this check the request goes out
 * while the next leader writes.
 */
function fenceAtTheWire(fence: () => boolean): Dispatcher.DispatcherComposeInterceptor {
  return (dispatch) => (options, handler: Handler) =>
    dispatch(options, {
      onRequestStart(controller, requestContext) {
        handler.onRequestStart?.(controller, requestContext);
        if (!fence()) controller.abort(new FencedBeforeSendError('the request'));
      },
      onRequestUpgrade: (...args) => handler.onRequestUpgrade?.(...args),
      onResponseStart: (...args) => handler.onResponseStart?.(...args),
      onResponseData: (...args) => handler.onResponseData?.(...args),
      onResponseEnd: (...args) => handler.onResponseEnd?.(...args),
      onResponseError: (...args) => handler.onResponseError?.(...args),
    });
}

/** The generated object-parameter APIs take observable middleware; this one hands the caller's signal to the fetch. */
function signalMiddleware(signal: AbortSignal): ObservableMiddleware {
  return {
    pre: (context) => {
      context.setSignal(signal);
      return new Observable(Promise.resolve(context));
    },
    post: (response) => new Observable(Promise.resolve(response)),
  };
}

/** A read's options: the caller's signal; the answer whole (a read-back judges all of it). */
function readOptions(signal: AbortSignal): ConfigurationOptions {
  return { middleware: [signalMiddleware(signal)], middlewareMergeStrategy: 'append' };
}

/**
 * The resourceVersion a write's answer carries (undefined without one: a delete that
 * removed the object at once may answer with a Status). The rest of the answer is not
 * read: no model of the answered pod is built.
 */
export function answeredResourceVersion(text: string): string | undefined {
  const metadata = (JSON.parse(text) as { metadata?: { resourceVersion?: unknown } } | null)
    ?.metadata;
  const resourceVersion = metadata?.resourceVersion;
  return typeof resourceVersion === 'string' && resourceVersion !== ''
    ? resourceVersion
    : undefined;
}

function resourcesPatch(resources: ResourceList): Record<string, Record<string, string>> {
  const patch: Record<string, Record<string, string>> = {};
  if (resources.requests) patch.requests = { ...resources.requests };
  if (resources.limits) patch.limits = { ...resources.limits };
  return patch;
}

/**
 * The JSON Patch that removes tollgate's gate only if the pod is still at the decided
 * version and the gate still sits at the decided index; with `markReleased`, the same
 * patch sets the annotation tollgate.io/released to the gate (a JSON Patch `add` needs
 * the annotations map to exist: the decided version says whether it does).
 */
export function removeGatePatch(
  resourceVersion: string,
  gate: string,
  gateIndex: number,
  markReleased?: { readonly annotationsPresent: boolean },
): object[] {
  if (!Number.isInteger(gateIndex) || gateIndex < 0)
    throw new Error(`removeGate: gateIndex must be a non-negative integer, got ${gateIndex}`);
  return [
    { op: 'test', path: '/metadata/resourceVersion', value: resourceVersion },
    { op: 'test', path: `/spec/schedulingGates/${gateIndex}/name`, value: gate },
    { op: 'remove', path: `/spec/schedulingGates/${gateIndex}` },
    ...(markReleased ? [releasedMarkPatch(gate, markReleased.annotationsPresent)] : []),
  ];
}

function releasedMarkPatch(gate: string, annotationsPresent: boolean): object {
  return annotationsPresent
    ? {
        op: 'add',
        path: `/metadata/annotations/${RELEASED_ANNOTATION.replace('/', '~1')}`,
        value: gate,
      }
    : { op: 'add', path: '/metadata/annotations', value: { [RELEASED_ANNOTATION]: gate } };
}

/** The strategic merge patch for pods/resize; containers merge by name. */
export function resizePatch(
  resourceVersion: string,
  op: Extract<WriteOperation, { type: 'resize' }>,
): object {
  const spec: Record<string, unknown> = {
    containers: op.containers.map((container) => ({
      name: container.name,
      resources: resourcesPatch(container.resources),
    })),
  };
  if (op.pod) spec.resources = resourcesPatch(op.pod);
  return { metadata: { resourceVersion }, spec };
}

function classify(error: unknown, context: string, jsonPatch: boolean): Error {
  const normalised = toKubeError(error, context);
  if (normalised instanceof KubeApiError) {
    const conflict = normalised.statusCode === 409 || (jsonPatch && isFailedPatchTest(normalised));
    return Object.assign(normalised, { conflict }) as WriteError;
  }
  return normalised;
}

const podPath = (namespace: string, name: string, subresource = ''): string =>
  `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}${subresource}`;
const eventsPath = (namespace: string): string =>
  `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/events`;

/** The API call that carries out one write (pure): method, path, query, media type and body. */
export function apiCallOf(request: WriteRequest, fieldManager: string): ApiCall {
  const { namespace, name, uid, resourceVersion } = request.target;
  const op = request.op;
  const query = `fieldManager=${encodeURIComponent(fieldManager)}`;
  switch (op.type) {
    case 'removeGate':
      return {
        method: 'PATCH',
        path: podPath(namespace, name),
        query,
        contentType: PatchStrategy.JsonPatch,
        body: removeGatePatch(resourceVersion, op.gate, op.gateIndex, op.markReleased),
      };
    case 'resize':
      return {
        method: 'PATCH',
        path: podPath(namespace, name, '/resize'),
        query,
        contentType: PatchStrategy.StrategicMergePatch,
        body: resizePatch(resourceVersion, op),
      };
    case 'delete':
      return {
        method: 'DELETE',
        path: podPath(namespace, name),
        query: '',
        contentType: 'application/json',
        body: { preconditions: { uid, resourceVersion } },
      };
    case 'annotate':
      return {
        method: 'PATCH',
        path: podPath(namespace, name),
        query,
        contentType: PatchStrategy.MergePatch,
        body: { metadata: { resourceVersion, annotations: { ...op.annotations } } },
      };
    case 'podCondition':
      return {
        method: 'PATCH',
        path: podPath(namespace, name, '/status'),
        query,
        contentType: PatchStrategy.StrategicMergePatch,
        body: { status: { conditions: [op.condition] } },
      };
    case 'event':
      return op.event.action === 'create'
        ? {
            method: 'POST',
            path: eventsPath(namespace),
            query,
            contentType: 'application/json',
            body: op.event.body,
          }
        : {
            method: 'PATCH',
            path: `${eventsPath(namespace)}/${encodeURIComponent(name)}`,
            query,
            contentType: PatchStrategy.MergePatch,
            body: {
              series: {
                count: op.event.count,
                lastObservedTime: new V1MicroTime(op.event.lastObservedTime),
              },
            },
          };
    default: {
      const unknown: never = op;
      throw new Error(`unknown write operation ${JSON.stringify(unknown)}`);
    }
  }
}

/**
 * Carries out each write as one API call (`apiCallOf`) straight through the KubeConfig's
 * connection pool (api-request.ts), with the fence at the wire; the answer is read for
 * its resourceVersion alone. Errors are named after the write.
 */
export function createWriteExecutor(
  kubeConfig: KubeConfig,
  options: WriteExecutorOptions = {},
): WriteExecutor {
  const fieldManager = options.fieldManager ?? 'tollgate';
  const fence = options.fence;
  const send = createApiCaller(
    kubeConfig,
    fence ? { wrapPool: (pool) => pool.compose(fenceAtTheWire(fence)) } : {},
  );

  return async (
    request: WriteRequest,
    signal: AbortSignal,
  ): Promise<{ resourceVersion: string }> => {
    signal.throwIfAborted();
    const { namespace, name } = request.target;
    const op = request.op;
    const context =
      op.type === 'event' ? `event ${namespace}/${name}` : `${op.type} pod ${namespace}/${name}`;
    let written: string | undefined;
    try {
      written = answeredResourceVersion(await send(apiCallOf(request, fieldManager), signal));
    } catch (error) {
      if (isFencedBeforeSend(error)) throw new FencedBeforeSendError(context);
      if (signal.aborted)
        throw signal.reason instanceof Error
          ? signal.reason
          : new DOMException('aborted', 'AbortError');
      throw classify(error, context, op.type === 'removeGate');
    }
    // A delete that removed the object at once may answer with a Status without metadata.
    if (!written && op.type !== 'delete')
      throw new Error(`${context}: the API answered without metadata.resourceVersion`);
    return { resourceVersion: written ?? '' };
  };
}

/** The parts of a pod a read-back looks at. */
interface ObservedPod {
  readonly metadata?: {
    readonly uid?: string;
    readonly resourceVersion?: string;
    readonly deletionTimestamp?: unknown;
    readonly annotations?: Readonly<Record<string, string>>;
  };
  readonly spec?: {
    readonly schedulingGates?: readonly { readonly name?: string }[];
    readonly containers?: readonly {
      readonly name?: string;
      readonly resources?: {
        readonly requests?: Readonly<Record<string, unknown>>;
        readonly limits?: Readonly<Record<string, unknown>>;
      };
    }[];
    readonly resources?: {
      readonly requests?: Readonly<Record<string, unknown>>;
      readonly limits?: Readonly<Record<string, unknown>>;
    };
  };
  readonly status?: {
    readonly conditions?: readonly {
      readonly type?: string;
      readonly status?: string;
      readonly reason?: string;
    }[];
  };
}

function sameValues(
  wanted: Readonly<Record<string, string>> | undefined,
  seen: Readonly<Record<string, unknown>> | undefined,
): boolean {
  return Object.entries(wanted ?? {}).every(([name, value]) => String(seen?.[name]) === value);
}

function resourcesShown(
  wanted: ResourceList,
  seen:
    | {
        readonly requests?: Readonly<Record<string, unknown>>;
        readonly limits?: Readonly<Record<string, unknown>>;
      }
    | undefined,
): boolean {
  return sameValues(wanted.requests, seen?.requests) && sameValues(wanted.limits, seen?.limits);
}

/**
 * Whether a pod as read now shows a pod write as applied (pure; the read is the
 * caller's). `undefined` pod = 404. A pod of another uid is a different object: for a
 * delete that means the decided pod is gone (applied); for anything else, `gone`.
 * Quantities are compared as the API returns them; a write whose values the API
 * normalised differently reads as `absent` and its retry meets the resourceVersion
 * precondition (a conflict, decided again), never a blind second write.
 */
export function podWriteVisible(
  request: WriteRequest,
  pod: ObservedPod | undefined,
): ReadBackVerdict {
  const op = request.op;
  const { uid, resourceVersion } = request.target;
  const seenVersion = pod?.metadata?.resourceVersion ?? '';
  if (op.type === 'delete') {
    if (!pod || pod.metadata?.uid !== uid) return { state: 'applied', resourceVersion: '' };
    return pod.metadata?.deletionTimestamp
      ? { state: 'applied', resourceVersion: seenVersion }
      : { state: 'absent' };
  }
  if (!pod) return { state: 'gone', message: `the pod no longer exists` };
  if (pod.metadata?.uid !== uid)
    return {
      state: 'gone',
      message: `the pod was replaced (uid ${pod.metadata?.uid ?? '?'}, decided on ${uid})`,
    };
  // Unchanged since the decision: the write did not land.
  if (seenVersion === resourceVersion) return { state: 'absent' };
  switch (op.type) {
    case 'removeGate': {
      const gates = pod.spec?.schedulingGates ?? [];
      return gates.some((gate) => gate.name === op.gate)
        ? { state: 'absent' }
        : { state: 'applied', resourceVersion: seenVersion };
    }
    case 'resize': {
      const containers = pod.spec?.containers ?? [];
      const shown =
        op.containers.every((wanted) =>
          resourcesShown(
            wanted.resources,
            containers.find((c) => c.name === wanted.name)?.resources,
          ),
        ) &&
        (!op.pod || resourcesShown(op.pod, pod.spec?.resources));
      return shown ? { state: 'applied', resourceVersion: seenVersion } : { state: 'absent' };
    }
    case 'annotate': {
      const annotations = pod.metadata?.annotations ?? {};
      const shown = Object.entries(op.annotations).every(([name, value]) =>
        value === null ? !(name in annotations) : annotations[name] === value,
      );
      return shown ? { state: 'applied', resourceVersion: seenVersion } : { state: 'absent' };
    }
    case 'podCondition': {
      const shown = (pod.status?.conditions ?? []).find((c) => c.type === op.condition.type);
      return shown?.status === op.condition.status && shown.reason === op.condition.reason
        ? { state: 'applied', resourceVersion: seenVersion }
        : { state: 'absent' };
    }
    case 'event':
      return { state: 'absent' };
    default: {
      const unknown: never = op;
      throw new Error(`unknown write operation ${JSON.stringify(unknown)}`);
    }
  }
}

/** Whether an Event as read now (undefined = 404) shows the Event write as applied. */
export function eventWriteVisible(
  op: Extract<WriteOperation, { type: 'event' }>,
  event: { metadata?: { resourceVersion?: string }; series?: { count?: number } } | undefined,
): ReadBackVerdict {
  const seenVersion = event?.metadata?.resourceVersion ?? '';
  if (op.event.action === 'create')
    return event ? { state: 'applied', resourceVersion: seenVersion } : { state: 'absent' };
  if (!event) return { state: 'gone', message: 'the Event no longer exists' };
  return (event.series?.count ?? 0) >= op.event.count
    ? { state: 'applied', resourceVersion: seenVersion }
    : { state: 'absent' };
}

/**
 * The dispatcher's read-back (see `ReadBack` in dispatch/types.ts): one GET of the
 * write's target, judged by `podWriteVisible` / `eventWriteVisible`. A read that fails
 * throws, and the dispatcher falls back to its ordinary retry.
 */
export function createReadBack(kubeConfig: KubeConfig): ReadBack {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const events = kubeConfig.makeApiClient(EventsV1Api);
  const readOrMissing = async <T>(
    read: () => Promise<T>,
    context: string,
  ): Promise<T | undefined> => {
    try {
      return await read();
    } catch (error) {
      const normalised = toKubeError(error, context);
      if (normalised instanceof KubeApiError && normalised.statusCode === 404) return undefined;
      throw normalised;
    }
  };
  return async (request, signal) => {
    const { namespace, name } = request.target;
    const op = request.op;
    if (op.type === 'event') {
      const event = await readOrMissing(
        () => events.readNamespacedEvent({ namespace, name }, readOptions(signal)),
        `read-back of event ${namespace}/${name}`,
      );
      return eventWriteVisible(op, event);
    }
    const pod = await readOrMissing(
      () => core.readNamespacedPod({ namespace, name }, readOptions(signal)),
      `read-back of pod ${namespace}/${name}`,
    );
    return podWriteVisible(request, pod as ObservedPod | undefined);
  };
}
