/**
 * A write decided from a cache that stayed behind tollgate's own write, judged again on
 * one live read of its pod (the stale-guard asks for it after N consecutive skips): the
 * write goes on against the live pod (its resourceVersion, the gate's index there), or
 * is cancelled with the reason. Pure: the loop takes the read and sends.
 */
import { gateIndex } from './gates.ts';
import { releaseMarkFor } from './lifecycle.ts';
import type { PodLike } from './objects.ts';
import type { PlannedWrite } from './release-plan.ts';

export type LiveRetarget =
  | { readonly action: 'send'; readonly write: PlannedWrite }
  | { readonly action: 'cancel'; readonly reason: string };

/**
 * `owned` says whether the live pod still carries a gate of tollgate's (a delete or an
 * annotation is only for a pod tollgate still holds).
 */
export function retargetOnLive(
  write: PlannedWrite,
  live: PodLike | undefined,
  owned: (pod: PodLike) => boolean,
): LiveRetarget {
  if (!live || live.metadata?.uid !== write.target.uid)
    return { action: 'cancel', reason: 'live read: the pod is gone or replaced' };
  const resourceVersion = live.metadata?.resourceVersion ?? '';
  const target = { ...write.target, resourceVersion };
  if (write.op.type === 'removeGate') {
    const gate = write.op.gate;
    const index = gateIndex(live, gate);
    if (index < 0) return { action: 'cancel', reason: `live read: gate ${gate} already removed` };
    // The mark is decided again on the live pod too: its annotations may have changed.
    const op = { ...write.op, gateIndex: index, markReleased: releaseMarkFor(live) };
    return { action: 'send', write: { ...write, target, op } };
  }
  if (!owned(live))
    return { action: 'cancel', reason: "live read: the pod no longer carries tollgate's gate" };
  return { action: 'send', write: { ...write, target } };
}
