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
 */
import type { PodLike } from './objects.ts';

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
