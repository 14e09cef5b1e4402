/**
 * What the phases of a gate-release pass (release-plan.ts) hand each other: the pods
 * whose conditions hold (`Candidate`), the release units they form (`ReleaseUnit`), and
 * what each phase concluded about a pod (`Verdict`), in the order concluded. The last
 * phase, `recordVerdicts`, turns verdicts into decisions, writes and hold state; the
 * order of the verdicts is the order of the pass's decisions.
 */
import type { ConditionInput } from './decision.ts';
import type { Usage } from './conditions.ts';
import type { OwnedGate } from './gates.ts';
import type { PodLike } from './objects.ts';
import type { GatePolicy, Tenant } from '../policy/model.ts';

/** A gated pod whose conditions (other than Budget) hold, or whose expiry releases it. */
export interface Candidate {
  readonly pod: PodLike;
  readonly owned: OwnedGate & { gatePolicy: GatePolicy };
  readonly inputs: readonly ConditionInput[];
  readonly requests: Usage;
  /** Why it may be released; the Release reason starts with it. */
  readonly reasonPrefix: string;
  /** Released because its expiry's action is Release, not because its conditions hold. */
  readonly expiryForced: boolean;
}

/** Pods released together or not at all: one pod, or a whole gang. */
export interface ReleaseUnit {
  readonly tenant: Tenant;
  readonly gatePolicy: GatePolicy;
  readonly members: readonly Candidate[];
  readonly requests: Usage;
  /** The earliest gate-set time of its members: older units first within a priority. */
  readonly order: number;
  /** Tie-break: the first member key in sort order. */
  readonly key: string;
}

interface PodVerdict {
  readonly pod: PodLike;
  readonly tenant: Tenant;
  readonly inputs: readonly ConditionInput[];
  readonly reason: string;
}

/**
 * What a phase concluded about one pod:
 * - Hold: stays gated; recorded only when `reasonKey` changes (with a re-check backoff);
 * - Cancel: delete the pod (after an Expire decision when `expiredReason` is set);
 * - Review: an Expire decision (when an expiry led here), then mark the pod for review
 *   (annotation `mark`);
 * - Release: remove the gate.
 */
export type Verdict =
  | (PodVerdict & {
      readonly kind: 'Hold';
      readonly gatePolicy: GatePolicy | undefined;
      readonly reasonKey: string;
    })
  | (PodVerdict & {
      readonly kind: 'Cancel';
      readonly gatePolicy: GatePolicy;
      readonly expiredReason?: string;
    })
  | (PodVerdict & {
      readonly kind: 'Review';
      readonly gatePolicy: GatePolicy;
      /** Set when an expiry put the pod in review (an Expire decision first); absent for an orphaned gate. */
      readonly expiredReason?: string;
      readonly mark: string;
    })
  | (PodVerdict & {
      readonly kind: 'Release';
      readonly gatePolicy: GatePolicy;
      readonly gate: OwnedGate;
      readonly expiryForced: boolean;
      /** The gang this release belongs to (its unit's key); absent for a pod alone. */
      readonly unit?: string;
    });

export function holdVerdict(
  pod: PodLike,
  tenant: Tenant,
  gatePolicy: GatePolicy | undefined,
  inputs: readonly ConditionInput[],
  reasonKey: string,
  reason: string,
): Verdict {
  return { kind: 'Hold', pod, tenant, gatePolicy, inputs, reasonKey, reason };
}
