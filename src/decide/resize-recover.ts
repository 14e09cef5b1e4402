/**
 * Whether an open resize intent (pushed before its write, outcome lost to a crash) went
 * through, judged from the pod alone at term start: a Resize or Rollback by its target
 * on the pod's spec (only the units the target names), a Pause or Resume by the pause
 * annotation. Anything else (a Defer check, an Infeasible mark) cannot be told from the
 * pod: `unknown`, and the loop decides again from the pod as it is.
 */
import type { ConditionInput, DecisionKind } from './decision.ts';
import type { ResizePodLike } from './resize-objects.ts';
import {
  desiredResources,
  fromRecord,
  sameRequirements,
  type ResourcesRecord,
} from './resize-resources.ts';
import { pausedAnnotation } from './resize-state.ts';

export type ResizeIntentState =
  | { readonly state: 'applied' | 'not-applied'; readonly detail: string }
  | { readonly state: 'unknown'; readonly detail: string };

function targetOf(inputs: readonly ConditionInput[]): ResourcesRecord | undefined {
  const value = inputs.find((i) => i.condition === 'target')?.value as ResourcesRecord | undefined;
  return value && typeof value === 'object' && value.containers ? value : undefined;
}

/** Whether the pod's spec shows every unit `record` names at its target. */
function specShows(pod: ResizePodLike, record: ResourcesRecord): boolean {
  const desired = desiredResources(pod);
  const target = fromRecord(record);
  const containers = Object.entries(target.containers).every(([name, req]) =>
    sameRequirements(desired.containers[name], req),
  );
  return containers && (target.pod === undefined || sameRequirements(desired.pod, target.pod));
}

export function resizeIntentState(
  intent: { readonly kind: DecisionKind; readonly inputs: readonly ConditionInput[] },
  pod: ResizePodLike,
): ResizeIntentState {
  const paused = pod.metadata?.annotations?.[pausedAnnotation] !== undefined;
  switch (intent.kind) {
    case 'Resize':
    case 'Rollback': {
      const target = targetOf(intent.inputs);
      if (!target) return { state: 'unknown', detail: 'the intent names no target' };
      return specShows(pod, target)
        ? { state: 'applied', detail: "the pod's spec shows the target" }
        : { state: 'not-applied', detail: "the pod's spec does not show the target" };
    }
    case 'Pause':
      return paused
        ? { state: 'applied', detail: 'the pod is paused' }
        : { state: 'not-applied', detail: 'the pod is not paused' };
    case 'Resume':
      return paused
        ? { state: 'not-applied', detail: 'the pod is still paused' }
        : { state: 'applied', detail: 'the pod is no longer paused' };
    default:
      return { state: 'unknown', detail: `${intent.kind} cannot be confirmed from the pod alone` };
  }
}
