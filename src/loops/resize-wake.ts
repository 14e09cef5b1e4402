/**
 * What makes the resize loop look at one pod at once instead of at the next timer pass:
 * a pod it has not seen, or a change in what the kubelet reports that a decision
 * depends on (phase, restarts, a terminated container and why, the resize conditions,
 * the resources actually running). tollgate's own writes (annotations, the desired
 * resources) do not wake it by themselves; the kubelet's answer to them does.
 */
import type { V1Pod } from '@kubernetes/client-node';

/** Why a pod change wakes the loop; closed, for the wake-up counter. */
export const wakeCauses = ['new', 'restart', 'terminated', 'resize-condition', 'status'] as const;
export type WakeCause = (typeof wakeCauses)[number];

interface Fingerprint {
  readonly restarts: string;
  readonly terminated: string;
  readonly conditions: string;
  readonly status: string;
}

/** The parts of a pod's status a resize decision depends on, each as comparable text. */
export function fingerprintOf(pod: V1Pod): Fingerprint {
  const statuses = pod.status?.containerStatuses ?? [];
  const stamp = (at: unknown) => (at instanceof Date ? at.toISOString() : String(at ?? ''));
  return {
    restarts: statuses.map((s) => `${s.name}:${s.restartCount ?? 0}`).join(','),
    terminated: statuses
      .map((s) => {
        const t = s.state?.terminated ?? s.lastState?.terminated;
        return t ? `${s.name}:${t.reason ?? ''}@${stamp(t.finishedAt)}` : '';
      })
      .join(','),
    conditions: (pod.status?.conditions ?? [])
      .filter((c) => c.type === 'PodResizePending' || c.type === 'PodResizeInProgress')
      .map((c) => `${c.type}:${c.status}:${c.reason ?? ''}:${c.observedGeneration ?? ''}`)
      .join(','),
    status: JSON.stringify([
      pod.status?.phase,
      pod.status?.resources,
      statuses.map((s) => s.resources),
    ]),
  };
}

/** Why `pod` should be reconciled now given what was last seen of it; undefined when it need not be. */
export function wakeCause(
  previous: Fingerprint | undefined,
  next: Fingerprint,
): WakeCause | undefined {
  if (!previous) return 'new';
  if (previous.restarts !== next.restarts) return 'restart';
  if (previous.terminated !== next.terminated) return 'terminated';
  if (previous.conditions !== next.conditions) return 'resize-condition';
  if (previous.status !== next.status) return 'status';
  return undefined;
}
