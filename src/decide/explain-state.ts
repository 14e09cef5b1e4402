/**
 * Where a governed pod is in its life, as `tollgate explain` tells it: still gated, or
 * released and then held up by something other than tollgate (no node fits, its image
 * does not pull, it crash-loops, it runs but is not ready). Read from the pod alone, in
 * that order; each state names the evidence and since when it holds (the condition's
 * `lastTransitionTime`, or the last container exit), so "released at 08:00, unschedulable
 * since 08:00:02" reads without opening the pod.
 */
import { timestampMs, type PodLike } from './objects.ts';

/** The closed set of states explain tells apart. */
export type PodLifeState =
  | 'gated' // tollgate's gate is still on it
  | 'unschedulable' // released; the scheduler found no node (PodScheduled False, Unschedulable)
  | 'scheduling' // released; not bound yet, and the scheduler has not said why
  | 'pulling-image' // bound; a container's image does not pull (ErrImagePull, ImagePullBackOff)
  | 'crash-looping' // bound; a container keeps exiting (CrashLoopBackOff)
  | 'starting' // bound; containers are being created
  | 'not-ready' // running, but the Ready condition is False
  | 'ready' // running and ready
  | 'finished'; // Succeeded or Failed

export interface PodLifeView {
  readonly state: PodLifeState;
  /** The evidence, in Kubernetes' own words where it has some. */
  readonly detail: string;
  /** RFC 3339, when the evidence started to hold; null when the pod does not say. */
  readonly since: string | null;
}

/** One of the pod's conditions, with since when it holds. */
export interface PodConditionView {
  readonly type: string;
  readonly status: string;
  readonly reason: string | null;
  readonly since: string | null;
}

interface StatusCondition {
  readonly type?: string;
  readonly status?: string;
  readonly reason?: string;
  readonly message?: string;
  readonly lastTransitionTime?: Date | string;
}

interface ContainerStatusLike {
  readonly name?: string;
  readonly restartCount?: number;
  readonly state?: { readonly waiting?: { readonly reason?: string; readonly message?: string } };
  readonly lastState?: {
    readonly terminated?: {
      readonly exitCode?: number;
      readonly reason?: string;
      readonly finishedAt?: Date | string;
    };
  };
}

interface PodStatusLike {
  readonly phase?: string;
  readonly conditions?: readonly StatusCondition[];
  readonly containerStatuses?: readonly ContainerStatusLike[];
  readonly initContainerStatuses?: readonly ContainerStatusLike[];
}

const imagePullReasons = new Set(['ErrImagePull', 'ImagePullBackOff']);

function statusOf(pod: PodLike): PodStatusLike {
  return (pod as { status?: PodStatusLike }).status ?? {};
}

function iso(at: Date | string | undefined): string | null {
  const ms = timestampMs(at);
  return ms === undefined ? null : new Date(ms).toISOString();
}

function conditionOf(pod: PodLike, type: string): StatusCondition | undefined {
  return statusOf(pod).conditions?.find((c) => c.type === type);
}

/** Every condition the pod shows, in its own order, with since when. */
export function podConditionsOf(pod: PodLike): PodConditionView[] {
  return (statusOf(pod).conditions ?? []).map((c) => ({
    type: c.type ?? '',
    status: c.status ?? 'Unknown',
    reason: c.reason ?? null,
    since: iso(c.lastTransitionTime),
  }));
}

/** The first container (init containers first) waiting for one of `reasons`. */
function waitingContainer(
  pod: PodLike,
  reasons: (reason: string) => boolean,
): ContainerStatusLike | undefined {
  const status = statusOf(pod);
  return [...(status.initContainerStatuses ?? []), ...(status.containerStatuses ?? [])].find(
    (c) => c.state?.waiting?.reason !== undefined && reasons(c.state.waiting.reason),
  );
}

function waitingDetail(container: ContainerStatusLike): string {
  const waiting = container.state?.waiting;
  return `container ${container.name ?? '?'}: ${waiting?.reason ?? ''}${waiting?.message ? `: ${waiting.message}` : ''}`;
}

function crashDetail(container: ContainerStatusLike): string {
  const last = container.lastState?.terminated;
  const exit = last
    ? `, last exit ${last.exitCode ?? '?'}${last.reason ? ` (${last.reason})` : ''}`
    : '';
  return `container ${container.name ?? '?'}: CrashLoopBackOff, ${container.restartCount ?? 0} restart(s)${exit}`;
}

/** Where the pod is, `gated` meaning tollgate's gate is still on it. */
export function podLifeOf(pod: PodLike, gated: boolean): PodLifeView {
  const status = statusOf(pod);
  const scheduled = conditionOf(pod, 'PodScheduled');
  const ready = conditionOf(pod, 'Ready');
  if (gated) {
    const released = conditionOf(pod, 'tollgate.io/Released');
    return {
      state: 'gated',
      detail: 'held by tollgate (see Waiting)',
      since:
        released?.status === 'False'
          ? iso(released.lastTransitionTime)
          : iso(pod.metadata?.creationTimestamp),
    };
  }
  if (status.phase === 'Succeeded' || status.phase === 'Failed')
    return {
      state: 'finished',
      detail: `phase ${status.phase}`,
      since: iso(ready?.lastTransitionTime),
    };
  if (!pod.spec?.nodeName) {
    if (scheduled?.status === 'False' && scheduled.reason === 'Unschedulable')
      return {
        state: 'unschedulable',
        detail: `PodScheduled False (Unschedulable)${scheduled.message ? `: ${scheduled.message}` : ''}`,
        since: iso(scheduled.lastTransitionTime),
      };
    return { state: 'scheduling', detail: 'released; waiting for the scheduler', since: null };
  }
  const pulling = waitingContainer(pod, (r) => imagePullReasons.has(r));
  if (pulling)
    return {
      state: 'pulling-image',
      detail: waitingDetail(pulling),
      since: iso(scheduled?.lastTransitionTime),
    };
  const crashing = waitingContainer(pod, (r) => r === 'CrashLoopBackOff');
  if (crashing)
    return {
      state: 'crash-looping',
      detail: crashDetail(crashing),
      since: iso(crashing.lastState?.terminated?.finishedAt),
    };
  if (status.phase === 'Running' && ready?.status === 'True')
    return { state: 'ready', detail: 'running and ready', since: iso(ready.lastTransitionTime) };
  if (status.phase === 'Running')
    return {
      state: 'not-ready',
      detail: `running; Ready ${ready?.status ?? 'Unknown'}${ready?.reason ? ` (${ready.reason})` : ''}`,
      since: iso(ready?.lastTransitionTime),
    };
  return {
    state: 'starting',
    detail: 'bound; containers starting',
    since: iso(scheduled?.lastTransitionTime),
  };
}
