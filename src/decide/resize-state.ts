/**
 * The per-pod resize state that must survive a tollgate restart, kept on the pod itself
 * as tollgate annotations (the audit trail is the history; these are the present):
 *
 * - `tollgate.io/resize-last-good`: the resources the pod last ran well with, the
 *   rollback target (JSON, quantity strings).
 * - `tollgate.io/resize-state`: the last requested target, when it was requested, the
 *   direction per resource, attempts in this episode, restart counts at request time,
 *   and an Infeasible mark.
 * - `tollgate.io/resize-paused`: present while automation is paused for the workload
 *   (JSON: reason, since, approvals already present when it paused).
 *
 * Annotations are data anyone with pod-patch rights can edit: a malformed value is
 * reported (the caller records it) and treated as absent, never trusted half-parsed.
 * A well-formed value is not trusted either: `withinPolicyBounds` rebuilds the stored
 * resources from the pod's current ones, moving only the resources the ResizePolicy
 * bounds, only within those bounds, so a forged last-good or target can never widen a
 * rollback or a retreat; each value it had to correct is reported as a problem.
 */
import type { ResourceBounds, ResizePolicy } from '../policy/model.ts';
import type { ResizePodLike as V1Pod } from './resize-objects.ts';
import {
  fromRecord,
  moveRequest,
  resizableResources,
  toRecord,
  type PodResources,
  type Requirements,
  type ResourcesRecord,
} from './resize-resources.ts';

export const lastGoodAnnotation = 'tollgate.io/resize-last-good';
export const stateAnnotation = 'tollgate.io/resize-state';
export const pausedAnnotation = 'tollgate.io/resize-paused';

export interface ResizeState {
  /** The resources last requested by tollgate. */
  readonly target?: ResourcesRecord;
  /** Epoch ms of the last request (cooldown and the Deferred deadline count from here). */
  readonly requestedAt?: number;
  /** Per resource, the direction of the last request; `down` on memory arms OOM rollback. */
  readonly direction?: Readonly<Partial<Record<'cpu' | 'memory', 'up' | 'down'>>>;
  /** Requests in the current episode (a new signal-driven step starts a new episode). */
  readonly attempts: number;
  /** Container restart counts when the request was made (an OOM after it is ours). */
  readonly restarts?: Readonly<Record<string, number>>;
  /** Set when the kubelet found a target Infeasible and no smaller one was left: scale-up is left alone. */
  readonly infeasible?: { readonly at: number; readonly reason: string };
}

export interface PausedState {
  readonly reason: string;
  readonly since: number;
  /** Resume approvals that already existed: only a newer one resumes this pause. */
  readonly approvalsSeen: readonly string[];
}

export interface StoredResizeState {
  readonly lastGood?: ResourcesRecord;
  readonly state: ResizeState;
  readonly paused?: PausedState;
  /** Annotation parse problems, one line each. */
  readonly problems: readonly string[];
}

function parseJson(
  pod: V1Pod,
  name: string,
  problems: string[],
): Record<string, unknown> | undefined {
  const text = pod.metadata?.annotations?.[name];
  if (text === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      return value as Record<string, unknown>;
    }
    problems.push(`annotation ${name}: not a JSON object`);
  } catch (error) {
    problems.push(`annotation ${name}: ${(error as Error).message}`);
  }
  return undefined;
}

function isRecord(value: unknown): value is ResourcesRecord {
  return (
    !!value &&
    typeof value === 'object' &&
    typeof (value as { containers?: unknown }).containers === 'object' &&
    (value as { containers?: unknown }).containers !== null
  );
}

export function readResizeState(pod: V1Pod): StoredResizeState {
  const problems: string[] = [];
  const lastGoodRaw = parseJson(pod, lastGoodAnnotation, problems);
  const stateRaw = parseJson(pod, stateAnnotation, problems) ?? {};
  const pausedRaw = parseJson(pod, pausedAnnotation, problems);
  let lastGood: ResourcesRecord | undefined;
  if (lastGoodRaw) {
    if (isRecord(lastGoodRaw)) lastGood = lastGoodRaw;
    else problems.push(`annotation ${lastGoodAnnotation}: field containers is missing`);
  }
  const attempts = typeof stateRaw.attempts === 'number' ? stateRaw.attempts : 0;
  const state: ResizeState = {
    attempts,
    ...(isRecord(stateRaw.target) ? { target: stateRaw.target } : {}),
    ...(typeof stateRaw.requestedAt === 'number' ? { requestedAt: stateRaw.requestedAt } : {}),
    ...(stateRaw.direction && typeof stateRaw.direction === 'object'
      ? { direction: stateRaw.direction as ResizeState['direction'] }
      : {}),
    ...(stateRaw.restarts && typeof stateRaw.restarts === 'object'
      ? { restarts: stateRaw.restarts as Record<string, number> }
      : {}),
    ...(stateRaw.infeasible && typeof stateRaw.infeasible === 'object'
      ? { infeasible: stateRaw.infeasible as ResizeState['infeasible'] & object }
      : {}),
  };
  let paused: PausedState | undefined;
  if (pausedRaw) {
    paused = {
      reason: typeof pausedRaw.reason === 'string' ? pausedRaw.reason : 'paused',
      since: typeof pausedRaw.since === 'number' ? pausedRaw.since : 0,
      approvalsSeen: Array.isArray(pausedRaw.approvalsSeen)
        ? pausedRaw.approvalsSeen.filter((n): n is string => typeof n === 'string')
        : [],
    };
  }
  return { ...(lastGood ? { lastGood } : {}), state, ...(paused ? { paused } : {}), problems };
}

/** The annotate patch that stores a new state (null removes an annotation). */
export function stateAnnotations(update: {
  lastGood?: ResourcesRecord | null;
  state?: ResizeState;
  paused?: PausedState | null;
}): Record<string, string | null> {
  const out: Record<string, string | null> = {};
  if (update.lastGood !== undefined) {
    out[lastGoodAnnotation] = update.lastGood === null ? null : JSON.stringify(update.lastGood);
  }
  if (update.state !== undefined) out[stateAnnotation] = JSON.stringify(update.state);
  if (update.paused !== undefined) {
    out[pausedAnnotation] = update.paused === null ? null : JSON.stringify(update.paused);
  }
  return out;
}

/**
 * The stored state with its resources rebuilt from `current` (the pod's spec, written
 * through the API, not through annotations): for each unit (container, or the pod)
 * and resource the policy bounds, the stored request clamped to [min, max]; every
 * other unit and resource as it is now. Each correction is added to `problems`.
 */
export function withinPolicyBounds(
  stored: StoredResizeState,
  policy: Pick<ResizePolicy, 'containers' | 'pod'>,
  current: PodResources,
): StoredResizeState {
  const problems = [...stored.problems];
  const rebuild = (name: string, record: ResourcesRecord | undefined) =>
    record ? toRecord(rebuilt(fromRecord(record), policy, current, name, problems)) : undefined;
  const lastGood = rebuild(lastGoodAnnotation, stored.lastGood);
  const target = rebuild(stateAnnotation, stored.state.target);
  const state: ResizeState = { ...stored.state };
  if (target) (state as { target?: ResourcesRecord }).target = target;
  return {
    ...stored,
    ...(lastGood ? { lastGood } : {}),
    state,
    problems,
  };
}

function rebuilt(
  stored: PodResources,
  policy: Pick<ResizePolicy, 'containers' | 'pod'>,
  current: PodResources,
  annotation: string,
  problems: string[],
): PodResources {
  const unit = (
    label: string,
    now: Requirements,
    from: Requirements | undefined,
    bounds?: ResourceBounds,
  ) => {
    let out = now;
    for (const r of resizableResources) {
      const b = bounds?.[r];
      const wanted = from?.requests[r];
      if (!b || wanted === undefined || now.requests[r] === undefined) continue;
      const clamped = Math.min(b.max, Math.max(b.min, wanted));
      if (clamped !== wanted) {
        problems.push(
          `annotation ${annotation}: ${label} ${r} ${wanted} is outside the policy bounds ${b.min}..${b.max}; clamped to ${clamped}`,
        );
      }
      out = moveRequest(out, r, clamped);
    }
    return out;
  };
  for (const name of Object.keys(stored.containers)) {
    if (!current.containers[name] || !policy.containers[name]) {
      problems.push(
        `annotation ${annotation}: container ${name} is not governed by the policy; ignored`,
      );
    }
  }
  const containers: Record<string, Requirements> = {};
  for (const [name, now] of Object.entries(current.containers)) {
    containers[name] = unit(
      `container ${name}`,
      now,
      stored.containers[name],
      policy.containers[name],
    );
  }
  const pod = current.pod ? unit('pod', current.pod, stored.pod, policy.pod) : undefined;
  return pod ? { containers, pod } : { containers };
}
