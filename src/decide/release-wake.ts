/**
 * How soon a view change needs a gate-release pass. A pass can release, cancel or record
 * something only for a pod it holds (one of its gates, in review, or an orphaned gate), or
 * because something a held pod waits for changed: capacity freed, a gang member, a node,
 * a referenced object. While the last pass held no pod, a change to a pod that carries no
 * scheduling gate and is not going away can do none of that: it is served by a pass within
 * `quietChangeMs` (five seconds; the pass still refreshes the pods-by-state metrics and
 * carried state), not after the debounce. A wave of releases is such changes, thousands of them (each
 * released pod scheduled, then running): without this every burst started a pass over
 * every pod, which planned nothing, at the pass share of the event loop.
 *
 * Everything else is served after the debounce, as before: any change while a pod is held,
 * a pod with any scheduling gate (tollgate's or another controller's), a pod being deleted
 * or deleted, nodes and referenced objects.
 *
 * A pod change that leaves everything a pass decides on as it was (`sameForDecisions`:
 * only its resourceVersion and tollgate's own `tollgate.io/Released` condition differ)
 * needs no pass at all. Holding 10,000 fresh pods writes 10,000 such conditions; each
 * landed as a watch event that started a pass over every pod, back to back at the pass
 * share of the event loop for the three to four minutes the writes took.
 */
import { isDeepStrictEqual } from 'node:util';
import type { PodLike } from './objects.ts';
import { releasedConditionType } from './released-condition.ts';

/**
 * A quiet change is served by a pass within this. Five seconds: such a pass refreshes the
 * pods-by-state metrics and prunes carried state, both read at a scrape's pace (15 s and
 * more); at one second a 10,000-pod wave, nothing held while its writes were out, still ran
 * a pass over every pod each second for its whole length (44 passes in 45 s, 1.8 s of CPU).
 */
export const quietChangeMs = 5_000;

export interface ChangeSeen {
  readonly type: string;
  readonly resource: string;
  readonly object: unknown;
}

/** True when `change` needs a pass after the debounce; false when one within `quietChangeMs` will do. */
export function changeNeedsPassSoon(change: ChangeSeen, heldByLastPass: number): boolean {
  if (heldByLastPass > 0) return true;
  if (change.resource !== 'pods' || change.type === 'DELETED') return true;
  const pod = change.object as PodLike;
  if (pod.metadata?.deletionTimestamp) return true;
  return (pod.spec?.schedulingGates?.length ?? 0) > 0;
}

/**
 * The pod as a gate-release pass decides on it: all the view keeps of it (the view's
 * trimmed form holds only fields tollgate reads) but its apiVersion and kind, its
 * resourceVersion and tollgate's own Released condition, which a pass writes and never
 * decides on.
 */
function decisionForm(pod: PodLike): unknown {
  const others = pod.status?.conditions?.filter((c) => c.type !== releasedConditionType);
  return {
    ...pod,
    // A list's items carry no apiVersion and kind; a watch event's object does.
    apiVersion: undefined,
    kind: undefined,
    metadata: { ...pod.metadata, resourceVersion: undefined },
    // No status, no conditions and only tollgate's own are one form.
    status: { ...pod.status, conditions: others?.length ? others : undefined },
  };
}

/** True when `next` differs from `previous` in nothing a gate-release pass decides on. */
export function sameForDecisions(previous: PodLike, next: PodLike): boolean {
  return isDeepStrictEqual(decisionForm(previous), decisionForm(next));
}

/** True when a view change needs no gate-release pass (`sameForDecisions` on a modified pod). */
export function changeNeedsNoPass(change: ChangeSeen & { readonly previous?: unknown }): boolean {
  return (
    change.type === 'MODIFIED' &&
    change.resource === 'pods' &&
    change.previous !== undefined &&
    sameForDecisions(change.previous as PodLike, change.object as PodLike)
  );
}
