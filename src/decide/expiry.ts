/**
 * Gate expiry and the re-check backoff of held pods. A gate is set at creation (the API
 * allows no later additions), so a pod's gate age is its age.
 *
 * Expiry moves a pod whose conditions still fail, once its gate is older than
 * `expiry.afterMs`, to an explicit state: `Review` (stays gated, annotated
 * `tollgate.io/review`, listed for a human; a merged Approval then releases or cancels
 * it), `Cancel` (deleted with the reason) or `Release` (conditions waived; the budget
 * and pacing still hold, because they protect the cluster, not the pod).
 */
import type { GatePolicy } from '../policy/model.ts';
import { REVIEW_ANNOTATION } from './lifecycle.ts';
import { timestampMs, type PodLike } from './objects.ts';

/**
 * Per pod object (replaced on every change, never edited): the view's pods carry their
 * creation time as the API's text, and parsing it for every held pod of every pass was a
 * seventh of a steady 10,000-pod pass.
 */
const gateSetAtByPod = new WeakMap<PodLike, number | null>();

export function gateSetAt(pod: PodLike): number | undefined {
  const created = pod.metadata?.creationTimestamp;
  if (typeof created !== 'string') return timestampMs(created);
  let at = gateSetAtByPod.get(pod);
  if (at === undefined) {
    at = timestampMs(created) ?? null;
    gateSetAtByPod.set(pod, at);
  }
  return at ?? undefined;
}

export function expiresAt(gatePolicy: GatePolicy, pod: PodLike): number | undefined {
  const set = gateSetAt(pod);
  if (!gatePolicy.expiry || set === undefined) return undefined;
  return set + gatePolicy.expiry.afterMs;
}

export function isExpired(gatePolicy: GatePolicy, pod: PodLike, now: number): boolean {
  const at = expiresAt(gatePolicy, pod);
  return at !== undefined && now >= at;
}

export function inReview(pod: PodLike): boolean {
  return pod.metadata?.annotations?.[REVIEW_ANNOTATION] !== undefined;
}

/** The annotation value: when and why the pod was put up for review. */
export function reviewMark(gatePolicy: GatePolicy, now: number): string {
  return JSON.stringify({
    since: new Date(now).toISOString(),
    policy: gatePolicy.name,
    afterMs: gatePolicy.expiry?.afterMs,
  });
}

/** What a held pod's re-check backoff remembers between passes. */
export interface HoldState {
  /** Stable key of why the pod is held (failing conditions, or a pacing limit); a Hold is recorded only when it changes. */
  readonly reasonKey: string;
  readonly since: number;
  readonly attempts: number;
  /** When a timer-driven re-check is due; absent once `maxAttempts` is spent (only cluster changes re-check it then). */
  readonly nextCheckAt?: number;
  /** The Hold last recorded in the audit trail: its reviewed key and when (release-record.ts). */
  readonly recorded?: { readonly key: string; readonly at: number };
}

export function recheckDelay(recheck: GatePolicy['recheck'], attempts: number): number | undefined {
  if (attempts >= recheck.maxAttempts) return undefined;
  return Math.min(recheck.maxMs, recheck.initialMs * 2 ** attempts);
}

/**
 * The next hold state of a pod held for `reasonKey`. A new reason restarts the backoff;
 * the same reason past its due time counts one more attempt.
 */
export function nextHold(
  previous: HoldState | undefined,
  reasonKey: string,
  recheck: GatePolicy['recheck'],
  now: number,
): { hold: HoldState; changed: boolean } {
  if (!previous || previous.reasonKey !== reasonKey) {
    const hold = holdState(reasonKey, now, 0, recheckDelay(recheck, 0), now);
    return { hold, changed: true };
  }
  if (previous.nextCheckAt === undefined || now < previous.nextCheckAt)
    return { hold: previous, changed: false };
  const attempts = previous.attempts + 1;
  const hold = holdState(reasonKey, previous.since, attempts, recheckDelay(recheck, attempts), now);
  return { hold, changed: false };
}

/**
 * A hold state with its re-check due `delay` after now, or none. Written out, not as a
 * conditional spread: every held pod of a first pass gets one, and the spread made two
 * more objects per pod.
 */
function holdState(
  reasonKey: string,
  since: number,
  attempts: number,
  delay: number | undefined,
  now: number,
): HoldState {
  return delay === undefined
    ? { reasonKey, since, attempts }
    : { reasonKey, since, attempts, nextCheckAt: now + delay };
}
