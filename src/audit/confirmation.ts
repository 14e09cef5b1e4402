/**
 * An outcome that reaches the remote after another leader already closed its intent:
 * the leader that sent the write committed the API's answer but pushed it only after a
 * successor's recovery had recorded an outcome from the cluster (a leftover replayed at
 * a later term, or a push stretched by Git faults and rebased onto the successor's
 * commits). The intent keeps exactly one outcome, the one recorded first; the late one
 * is kept as a record (phase `record`) that names it:
 *
 * - a correction (`<intent id>:correction`, input `OutcomeCorrection`, leftovers.ts)
 *   when the late one contradicts the recorded one (it knows whether the write was
 *   applied, and the recorded one says otherwise or does not know);
 * - a confirmation (`<intent id>:confirmation`, input `OutcomeConfirmation`) otherwise:
 *   the same outcome, or one that agrees about whether the write was applied.
 *
 * `audit verify` accepts a confirmation only after an outcome of its intent that it does
 * not contradict (verify.ts).
 */
import type { Decision, Outcome } from '../decide/decision.ts';
import type { AuditRecord } from './record.ts';

export const confirmationCondition = 'OutcomeConfirmation';

/** What a confirmation records: the intent, the outcome on the trail, the late one. */
export interface ConfirmationValue {
  readonly intent: string;
  readonly recorded: Outcome;
  readonly actual: Outcome;
  /** When the late outcome was decided (the record's own `at` is when it was pushed). */
  readonly decidedAt: number;
}

/** Whether an outcome says the write was applied; undefined when it does not know. */
export function applied(outcome: Outcome): boolean | undefined {
  if (outcome.result === 'unknown') return undefined;
  return outcome.result === 'succeeded';
}

export function describeOutcome(outcome: Outcome): string {
  return 'message' in outcome ? `${outcome.result} (${outcome.message})` : outcome.result;
}

/**
 * Whether a late outcome contradicts the recorded one: it knows whether the write was
 * applied, and the recorded one says otherwise or does not know.
 */
export function contradicts(late: Outcome, recorded: Outcome): boolean {
  const known = applied(late);
  return known !== undefined && known !== applied(recorded);
}

/** The late outcome as a confirmation of the recorded one (the caller checked it does not contradict it). */
export function confirmationOf(late: Decision, recorded: AuditRecord, at: number): Decision {
  const value: ConfirmationValue = {
    intent: late.id,
    recorded: recorded.outcome,
    actual: late.outcome,
    decidedAt: late.at,
  };
  return {
    ...late,
    id: `${late.id}:confirmation`,
    at,
    inputs: [{ condition: confirmationCondition, met: true, value }],
    reason: lateReason(
      'confirmation',
      late,
      recorded,
      'agrees about whether the write was applied',
    ),
    outcome: { result: 'recorded' },
  };
}

/** Why a late outcome is a record: which outcome came first, and how the late one relates to it. */
export function lateReason(
  kind: 'confirmation' | 'correction',
  late: Decision,
  recorded: Decision,
  relation: string,
): string {
  return `${kind}: ${late.id} already has the outcome ${describeOutcome(recorded.outcome)} on the audit branch; this outcome, ${describeOutcome(late.outcome)}, decided at ${new Date(late.at).toISOString()} and committed by the writer that recorded it, reached the branch after it and ${relation}`;
}

/** The confirmation a record carries: undefined when it is none, `malformed` when its value is not one. */
export function confirmationIn(record: Decision): ConfirmationValue | 'malformed' | undefined {
  const input = record.inputs.find((item) => item.condition === confirmationCondition);
  if (!input) return undefined;
  const value = input.value as Partial<ConfirmationValue> | null;
  const outcome = (item: unknown): boolean =>
    typeof (item as { result?: unknown } | undefined)?.result === 'string';
  if (
    record.outcome.result !== 'recorded' ||
    typeof value?.intent !== 'string' ||
    !outcome(value.recorded) ||
    !outcome(value.actual)
  )
    return 'malformed';
  return value as ConfirmationValue;
}
