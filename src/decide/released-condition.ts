/**
 * The `tollgate.io/Released` pod condition: why a gated pod waits, readable with plain
 * kubectl (`kubectl describe pod`, `kubectl get pod -o jsonpath=...`). Status False while
 * tollgate holds the pod (reason and message from the Hold decision), True once tollgate
 * removed its gate from a pod that showed False.
 *
 * Fewest writes: a write is due only when the pod does not already show the wanted
 * status and reason (a new message alone is no reason to write), and a pod tollgate
 * released without ever holding it gets no condition at all. Hold decisions are
 * themselves recorded only when a pod's hold reason changes, so a quiet cluster writes
 * nothing. `lastTransitionTime` is set only when the status changes (Kubernetes'
 * convention); a new reason under the same status keeps the pod's.
 */
import type { PodLike } from './objects.ts';

export const releasedConditionType = 'tollgate.io/Released';

/** The condition as tollgate wants it, before `lastTransitionTime` is chosen. */
export interface WantedCondition {
  readonly status: 'True' | 'False';
  readonly reason: string;
  readonly message: string;
}

/** The condition as written (the dispatcher's `podCondition` write carries it). */
export interface PodConditionWrite extends WantedCondition {
  readonly type: string;
  /** RFC 3339; only when the status changes. */
  readonly lastTransitionTime?: string;
}

/** Condition messages are for people; the API keeps them, a page is plenty. */
const maxMessage = 1024;

/**
 * A hold's reason key as a condition reason (CamelCase words and commas): the failing
 * conditions of a policy are joined by "+" in the key ("ImagePresent+ObjectCondition").
 */
export function holdConditionReason(reasonKey: string): string {
  const words = reasonKey
    .split('+')
    .map((part) => part.replace(/[^A-Za-z0-9_]/g, ''))
    .filter((part) => part.length > 0);
  return words.length > 0 ? words.join(',') : 'Held';
}

export function heldCondition(reasonKey: string, message: string): WantedCondition {
  return {
    status: 'False',
    reason: holdConditionReason(reasonKey),
    message: message.slice(0, maxMessage),
  };
}

export function releasedCondition(message: string): WantedCondition {
  return { status: 'True', reason: 'GateRemoved', message: message.slice(0, maxMessage) };
}

export interface ShownCondition {
  readonly type?: string;
  readonly status?: string;
  readonly reason?: string;
}

/** The pod's `tollgate.io/Released` condition as the view shows it. */
export function shownReleasedCondition(pod: PodLike): ShownCondition | undefined {
  const conditions = (pod as { status?: { conditions?: readonly ShownCondition[] } }).status
    ?.conditions;
  return conditions?.find((c) => c.type === releasedConditionType);
}

/**
 * The write that brings the pod's condition to `wanted`, or undefined when none is due:
 * the pod shows the same status and reason already, or (for True) the pod never showed
 * the condition (released without a hold: nothing to correct). `sending` is a write of
 * the condition already on its way, which the view does not show yet: the pod will.
 */
export function releasedConditionWrite(
  pod: PodLike,
  wanted: WantedCondition,
  now: number,
  sending?: ShownCondition,
): PodConditionWrite | undefined {
  const shown = sending ?? shownReleasedCondition(pod);
  if (shown?.status === wanted.status && shown.reason === wanted.reason) return undefined;
  if (wanted.status === 'True' && shown === undefined) return undefined;
  return {
    type: releasedConditionType,
    ...wanted,
    ...(shown?.status === wanted.status ? {} : { lastTransitionTime: new Date(now).toISOString() }),
  };
}
