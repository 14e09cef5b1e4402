/**
 * The per-pod resize state that must survive a tollgate restart, kept on the pod itself
 * as tollgate annotations (the audit trail is the history; these are the present):
 *
 * - `tollgate.io/resize-last-good`: the resources the pod last ran well with, the
 *   rollback target (JSON, quantity strings).
 * - `tollgate.io/resize-state`: the last requested target, when it was requested, the
 *   direction per resource, attempts in this episode, restart counts at request time,
 *   an Infeasible mark, the Deferred re-check schedule, and since when a signal has
 *   been unreadable.
 * - `tollgate.io/resize-paused`: present while automation is paused for the workload
 *   (JSON: reason, since, approvals already present when it paused).
 *
 * Annotations are data anyone with pod-patch rights can edit, so each value is sealed
 * (`resize-seal.ts`: an HMAC over the pod's uid, the annotation and the value, keyed
 * from the run configuration). A value whose seal does not verify is rejected (the
 * caller records, meters and alerts on it) and treated as absent; a malformed value is
 * reported and treated as absent, never trusted half-parsed.
 * A verified value is still not trusted to widen a decision: `withinPolicyBounds` rebuilds the stored
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
import {
  seal,
  unseal,
  unverifiedJson,
  type StateKeyRing,
  type StateRejection,
} from './resize-seal.ts';

/**
 * How stored state is read and written: with the key ring `tollgate run` holds (seals
 * verified on read, applied on write), or `preview` (`tollgate plan`, which holds no key:
 * values read unverified, nothing it plans is ever written).
 */
export type StateTrust = StateKeyRing | 'preview';

/** A stored value not honoured, and why. */
export interface RejectedState {
  readonly annotation: string;
  readonly reason: StateRejection;
  readonly detail: string;
}

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
  /** The re-check schedule of a Deferred (or actuation Error) resize, kept across restarts. */
  readonly deferred?: DeferredSchedule;
  /**
   * Epoch ms since when a signal or the SLO of the pod has been unreadable (absent while
   * all read), kept across restarts: `pause.onUnreadableFor` counts from it.
   */
  readonly unreadableSince?: number;
}

/** Where the re-checks of one waiting resize stand. */
export interface DeferredSchedule {
  /** The pod generation the kubelet is deferring: a new one starts a new schedule. */
  readonly generation: number;
  /** Checks made so far in this episode (0 for the first); the backoff doubles with each. */
  readonly checks: number;
  /** Epoch ms before which nothing is checked or recorded again. */
  readonly nextCheckAt: number;
  readonly reason: 'Deferred' | 'Error';
}

function deferredSchedule(value: unknown): DeferredSchedule | undefined {
  if (!value || typeof value !== 'object') return undefined;
  const v = value as Record<string, unknown>;
  const numbers = [v.generation, v.checks, v.nextCheckAt].every(
    (n) => typeof n === 'number' && Number.isFinite(n),
  );
  if (!numbers || (v.reason !== 'Deferred' && v.reason !== 'Error')) return undefined;
  return {
    generation: v.generation as number,
    checks: v.checks as number,
    nextCheckAt: v.nextCheckAt as number,
    reason: v.reason,
  };
}

/** Why a workload paused: a rollback, restarts, a stuck resize, signals unreadable. */
export const pauseCauses = ['rollback', 'restarts', 'stuck', 'unreadable'] as const;
export type PauseCause = (typeof pauseCauses)[number];

export interface PausedState {
  readonly reason: string;
  readonly since: number;
  readonly cause?: PauseCause;
  /** Resume approvals that already existed: only a newer one resumes this pause. */
  readonly approvalsSeen: readonly string[];
}

export interface StoredResizeState {
  readonly lastGood?: ResourcesRecord;
  readonly state: ResizeState;
  readonly paused?: PausedState;
  /** Annotation parse problems, one line each. */
  readonly problems: readonly string[];
  /** Values whose seal did not verify (ignored, as if absent). */
  readonly rejected: readonly RejectedState[];
}

function parseJson(
  pod: V1Pod,
  name: string,
  trust: StateTrust,
  found: { problems: string[]; rejected: RejectedState[] },
): Record<string, unknown> | undefined {
  const sealed = pod.metadata?.annotations?.[name];
  if (sealed === undefined) return undefined;
  const text = openSealed(pod, name, sealed, trust, found.rejected);
  if (text === undefined) return undefined;
  const { problems } = found;
  try {
    const value: unknown = JSON.parse(text);
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      return value as Record<string, unknown>;
    }
    problems.push(`annotation ${name}: not a JSON object`);
  } catch (error) {
    problems.push(`annotation ${name}: ${(error as Error).message}`);
  }
  // Sealed by tollgate yet not a JSON object: corrupt, and rejected like a forgery.
  if (trust !== 'preview') {
    found.rejected.push({
      annotation: name,
      reason: 'corrupt',
      detail: `annotation ${name}: sealed, but not a JSON object`,
    });
  }
  return undefined;
}

function openSealed(
  pod: V1Pod,
  name: string,
  text: string,
  trust: StateTrust,
  rejected: RejectedState[],
): string | undefined {
  if (trust === 'preview') return unverifiedJson(text);
  const opened = unseal(trust, pod.metadata?.uid ?? '', name, text);
  if (opened.ok) return opened.json;
  rejected.push({ annotation: name, reason: opened.reason, detail: opened.detail });
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

export function readResizeState(pod: V1Pod, trust: StateTrust): StoredResizeState {
  const problems: string[] = [];
  const found = { problems, rejected: [] as RejectedState[] };
  const lastGoodRaw = parseJson(pod, lastGoodAnnotation, trust, found);
  const stateRaw = parseJson(pod, stateAnnotation, trust, found) ?? {};
  const pausedRaw = parseJson(pod, pausedAnnotation, trust, found);
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
  const deferred = deferredSchedule(stateRaw.deferred);
  if (deferred) (state as { deferred?: DeferredSchedule }).deferred = deferred;
  if (typeof stateRaw.unreadableSince === 'number' && Number.isFinite(stateRaw.unreadableSince))
    (state as { unreadableSince?: number }).unreadableSince = stateRaw.unreadableSince;
  let paused: PausedState | undefined;
  if (pausedRaw) {
    paused = {
      reason: typeof pausedRaw.reason === 'string' ? pausedRaw.reason : 'paused',
      since: typeof pausedRaw.since === 'number' ? pausedRaw.since : 0,
      ...(pauseCauses.includes(pausedRaw.cause as PauseCause)
        ? { cause: pausedRaw.cause as PauseCause }
        : {}),
      approvalsSeen: Array.isArray(pausedRaw.approvalsSeen)
        ? pausedRaw.approvalsSeen.filter((n): n is string => typeof n === 'string')
        : [],
    };
  }
  return {
    ...(lastGood ? { lastGood } : {}),
    state,
    ...(paused ? { paused } : {}),
    problems,
    rejected: found.rejected,
  };
}

/** What stores values on one pod: the trust to seal with and the pod's uid. */
export interface StateSealer {
  readonly trust: StateTrust;
  readonly uid: string;
}

/** The annotate patch that stores a new state, each value sealed (null removes an annotation). */
export function stateAnnotations(
  sealer: StateSealer,
  update: {
    lastGood?: ResourcesRecord | null;
    state?: ResizeState;
    paused?: PausedState | null;
  },
): Record<string, string | null> {
  const sealed = (name: string, value: unknown): string => {
    const json = JSON.stringify(value);
    return sealer.trust === 'preview' ? json : seal(sealer.trust, sealer.uid, name, json);
  };
  const out: Record<string, string | null> = {};
  if (update.lastGood !== undefined) {
    out[lastGoodAnnotation] =
      update.lastGood === null ? null : sealed(lastGoodAnnotation, update.lastGood);
  }
  if (update.state !== undefined) out[stateAnnotation] = sealed(stateAnnotation, update.state);
  if (update.paused !== undefined) {
    out[pausedAnnotation] = update.paused === null ? null : sealed(pausedAnnotation, update.paused);
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
