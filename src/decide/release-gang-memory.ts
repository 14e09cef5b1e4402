/**
 * Gang members whose release tollgate decided together with their whole gang, remembered
 * while the member keeps its gate. A member whose gate removal did not land (the
 * straggler of a gang released in part: its write conflicted or failed, or its leader died
 * between the gang's writes) counts its gang as complete when it is decided again, even
 * once the siblings released with it have finished and been deleted and the cluster no
 * longer shows them: the gang was whole when it was admitted, and its siblings ran.
 * Without this the straggler would wait for `GangComplete` forever.
 *
 * The memory is the plan's state within a leader term; a new term starts it from the
 * last audit checkpoint's carried gang memory and the Release records after it
 * (release-carried.ts, the same function over records).
 */
import type { ConditionInput, Decision } from './decision.ts';
import { ownedGate } from './gates.ts';
import type { PodLike } from './objects.ts';
import type { Policy } from '../policy/model.ts';

/** uid -> when its release with its whole gang was first decided (epoch ms). */
export type GangReleases = Readonly<Record<string, number>>;

/** A GangComplete input of a gang of more than one member, met. */
function wholeGangMet(input: ConditionInput): boolean {
  const expected = (input.value as { expected?: unknown } | null)?.expected;
  return (
    input.condition === 'GangComplete' && input.met && typeof expected === 'number' && expected > 1
  );
}

/** The gate-release Release decisions (or audit records) of whole gangs: uid -> earliest time. */
export function gangReleasesOf(decisions: Iterable<Decision>): Record<string, number> {
  const found: Record<string, number> = {};
  for (const d of decisions) {
    if (d.loop !== 'gate-release' || d.kind !== 'Release' || !d.inputs.some(wholeGangMet)) continue;
    const uid = d.target.uid;
    if (uid !== undefined) found[uid] = Math.min(found[uid] ?? Infinity, d.at);
  }
  return found;
}

/**
 * The memory for the next pass: this pass's gang releases and the earlier ones, each kept
 * only while its pod is in the view and still carries a gate of tollgate's.
 */
export function nextGangReleases(
  policy: Policy,
  pods: readonly PodLike[],
  previous: GangReleases,
  decided: GangReleases,
): GangReleases {
  const remembered = Object.keys(decided).length + Object.keys(previous).length;
  if (remembered === 0) return {};
  const gated = new Set<string>();
  for (const p of pods) {
    const uid = p.metadata?.uid ?? '';
    if (!Object.hasOwn(decided, uid) && !Object.hasOwn(previous, uid)) continue;
    if (ownedGate(p, policy) !== undefined) gated.add(uid);
  }
  const next: Record<string, number> = {};
  for (const [uid, at] of [...Object.entries(decided), ...Object.entries(previous)])
    if (gated.has(uid)) next[uid] = Math.min(next[uid] ?? Infinity, at);
  return next;
}

/**
 * GangComplete as judged from the cluster, or, for a member whose release was decided
 * with its whole gang, met, saying since when (`releasedWithGangAt`).
 */
export function gangCompleteRemembered(
  input: ConditionInput,
  releasedWithGangAt: number | undefined,
): ConditionInput {
  if (input.met || releasedWithGangAt === undefined) return input;
  const value = (input.value ?? {}) as Record<string, unknown>;
  return {
    ...input,
    met: true,
    value: { ...value, releasedWithGangAt: new Date(releasedWithGangAt).toISOString() },
  };
}
