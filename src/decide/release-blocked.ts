/**
 * Writes that keep failing with a final error (403 RBAC revoked, 404, 422): per pod, a
 * capped exponential backoff between attempts, then a recorded `Blocked` state. While a
 * pod backs off or is blocked it is not decided again (no new intent in the audit trail,
 * no new write). Blocked ends by itself when the cause may have gone: the pod changes
 * (a newer resourceVersion) or a new policy commit is in force.
 *
 * Pure: the loop hands in each final failure and the clock; the plan asks `blockedNow`.
 */
import type { PodLike } from './objects.ts';

/** Attempts before a pod's write is Blocked. */
export const maxFinalFailures = 5;
const baseBackoffMs = 1_000;
const maxBackoffMs = 300_000;

export interface BlockedWrite {
  /** The pod's resourceVersion the failing writes were decided on. */
  readonly resourceVersion: string;
  /** The policy commit in force when they failed. */
  readonly commit: string;
  readonly attempts: number;
  /** No new decision before this time (the backoff). */
  readonly until: number;
  /** Attempts exhausted: blocked until the pod or the policy changes. */
  readonly blocked: boolean;
  readonly code?: number;
  readonly message: string;
}

export interface FinalFailure {
  readonly resourceVersion: string;
  readonly commit: string;
  readonly code?: number;
  readonly message: string;
}

/** The entry after one more final failure; `blocked` turns true on the last allowed attempt. */
export function afterFinalFailure(
  previous: BlockedWrite | undefined,
  failure: FinalFailure,
  now: number,
): BlockedWrite {
  const same =
    previous !== undefined &&
    previous.resourceVersion === failure.resourceVersion &&
    previous.commit === failure.commit;
  const attempts = (same ? previous.attempts : 0) + 1;
  const backoff = Math.min(maxBackoffMs, baseBackoffMs * 2 ** (attempts - 1));
  return {
    ...failure,
    attempts,
    until: now + backoff,
    blocked: attempts >= maxFinalFailures,
  };
}

/** Whether the pod must not be decided now: backing off, or blocked on an unchanged pod under the same policy. */
export function blockedNow(
  entry: BlockedWrite | undefined,
  pod: PodLike,
  commit: string,
  now: number,
): boolean {
  if (!entry) return false;
  if (entry.resourceVersion !== (pod.metadata?.resourceVersion ?? '') || entry.commit !== commit)
    return false;
  return entry.blocked || now < entry.until;
}

/** What a gate-release audit record says (the fields of an AuditRecord this needs). */
export interface BlockedRecordLike {
  readonly loop: string;
  readonly kind: string;
  readonly at: number;
  /** `outcome` closes an earlier intent; `intent` and `record` are decisions. */
  readonly phase: string;
  readonly reason: string;
  readonly target: { readonly uid: string; readonly resourceVersion: string };
  readonly policy: { readonly commit: string };
}

/**
 * The Blocked state a restarted controller carries on, from the audit trail: a pod whose
 * latest gate-release decision (by its time `at`) is `Blocked` stays blocked on the pod
 * version and policy commit it was blocked under, so its write is not sent again until
 * the pod or the policy changes. Only a later decision (an intent, a Hold) supersedes it.
 *
 * Not the newest record in commit order, and outcomes never count: the writer commits
 * outcomes and records as separate batches, each when its own oldest entry is due, so the
 * failed outcome of the last attempt can land in a newer commit than the Blocked record;
 * and a new term's recovery records outcomes of old intents later still.
 */
export function blockedFromRecords(
  records: Iterable<BlockedRecordLike>,
): Record<string, BlockedWrite> {
  const blocked: Record<string, BlockedWrite> = {};
  for (const record of latestBlocked(records)) {
    blocked[record.target.uid] = {
      resourceVersion: record.target.resourceVersion,
      commit: record.policy.commit,
      attempts: maxFinalFailures,
      until: record.at,
      blocked: true,
      message: record.reason,
    };
  }
  return blocked;
}

/**
 * The records of the pods whose latest gate-release decision (by `at`; of two at the
 * same time, the first given) is `Blocked`: the rule `blockedFromRecords` and the
 * checkpoints' carried state (release-carried.ts) share.
 */
export function latestBlocked<R extends BlockedRecordLike>(records: Iterable<R>): R[] {
  const latest = new Map<string, R>();
  for (const record of records) {
    if (record.loop !== 'gate-release' || record.phase === 'outcome') continue;
    const known = latest.get(record.target.uid);
    if (!known || record.at > known.at) latest.set(record.target.uid, record);
  }
  return [...latest.values()].filter((record) => record.kind === 'Blocked');
}
