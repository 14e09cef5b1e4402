/**
 * Which Kubernetes Event the resize loop raises on a pod for a decision it recorded:
 * its type (Normal or Warning) and reason. A decision with no Event here is recorded in
 * Git only. Pure: the loop (src/loops/resize.ts) writes the Event.
 */
import type { Decision } from './decision.ts';

export interface ResizeEvent {
  readonly type: 'Normal' | 'Warning';
  readonly reason: string;
}

const byKind: Partial<Record<Decision['kind'], ResizeEvent>> = {
  Resize: { type: 'Normal', reason: 'TollgateResize' },
  Rollback: { type: 'Warning', reason: 'TollgateResizeRollback' },
  Pause: { type: 'Warning', reason: 'TollgateResizePaused' },
  Resume: { type: 'Normal', reason: 'TollgateResizeResumed' },
  Defer: { type: 'Normal', reason: 'TollgateResizeDeferred' },
  Infeasible: { type: 'Warning', reason: 'TollgateResizeInfeasible' },
  Hold: { type: 'Warning', reason: 'TollgateResizeHeld' },
};

/**
 * Signals that were unreadable read again: the record clearing the stored
 * `unreadableSince` is a Hold (no resize; a state write) but tells of a recovery, so it
 * raises a Normal Event, not a Warning that the pod is held.
 */
const signalsReadable: ResizeEvent = { type: 'Normal', reason: 'TollgateResizeSignalsReadable' };

/** The Event a resize decision raises on its pod, if any. */
export function resizeEventOf(decision: Decision): ResizeEvent | undefined {
  if (isSignalsReadableAgain(decision)) return signalsReadable;
  return byKind[decision.kind];
}

/**
 * The record of the pause.onUnreadableFor clock stopping (resize-plan.ts, storeClock):
 * a Hold whose `unreadable` condition is met. The record of the clock starting, the
 * step-downs it holds and the pause it ends in have it unmet (or do not have it).
 */
export function isSignalsReadableAgain(decision: Decision): boolean {
  return (
    decision.kind === 'Hold' && decision.inputs.some((i) => i.condition === 'unreadable' && i.met)
  );
}
