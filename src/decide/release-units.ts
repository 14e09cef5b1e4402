/**
 * Phase 3 of a gate-release pass: group release candidates into release units. A pod
 * without a GangComplete condition is a unit alone; a gang is one unit, all or none, and
 * only once every gated member of the gang is a candidate (else each member is held).
 */
import { addUsage, emptyUsage, gangId } from './conditions.ts';
import { gateSetAt } from './expiry.ts';
import { podKey, type PodLike } from './objects.ts';
import { gangMembers, type Classification } from './release-classify.ts';
import { holdVerdict, type Candidate, type ReleaseUnit, type Verdict } from './release-verdict.ts';
import type { GatePolicy } from '../policy/model.ts';

type GangCondition = Extract<GatePolicy['conditions'][number], { type: 'GangComplete' }>;

export interface Grouping {
  /** Single pods in candidate order, then complete gangs in order of their first candidate. */
  readonly units: readonly ReleaseUnit[];
  /** Holds for members of gangs with members not ready. */
  readonly verdicts: readonly Verdict[];
}

export function groupReleaseUnits(
  candidates: readonly Candidate[],
  classified: Pick<Classification, 'pods' | 'states' | 'stateOf'>,
): Grouping {
  const units: ReleaseUnit[] = [];
  const verdicts: Verdict[] = [];
  const gangs = gangGroups();
  const gangConditionOf = gangConditions();
  for (let i = 0; i < candidates.length; i++) {
    const candidate = candidates[i] as Candidate;
    const gang = gangConditionOf(candidate);
    if (gang && gangs.add(candidate, gang)) continue;
    units.push(unitOfOne(candidate));
  }
  let candidateUids: Set<string | undefined> | undefined;
  for (const members of gangs.inOrder) {
    const first = members[0] as Candidate;
    const gang = gangConditionOf(first) as GangCondition;
    const notReady: PodLike[] = [];
    // The gang's members and its candidates both come in pod order: a member that is
    // the next of its candidates is one (no lookup); any other gated member is looked
    // up among all the candidates' uids, made only then.
    let next = 0;
    for (const p of gangMembers(first.pod, gang.groupLabel, classified)) {
      if (members[next]?.pod === p) {
        next += 1;
        continue;
      }
      const s = classified.stateOf.get(p);
      if (s !== 'gated' && s !== 'review') continue;
      candidateUids ??= uidsOf(candidates);
      if (!candidateUids.has(p.metadata?.uid)) notReady.push(p);
    }
    if (notReady.length === 0) {
      units.push(releaseUnit(members));
      continue;
    }
    const id = gangId(first.pod, gang) as string;
    const names = notReady.map((p) => p.metadata?.name).join(', ');
    for (const m of members) {
      const reason = `gang ${id}: members not ready (${names})`;
      verdicts.push(
        holdVerdict(m.pod, m.owned.tenant, m.owned.gatePolicy, m.inputs, 'GangMember', reason),
      );
    }
  }
  return { units, verdicts };
}

/**
 * Gang candidates grouped by gang (`gangId`: namespace and group label value), in order
 * of their first candidate. Looked up by namespace, then value: no id string is made per
 * candidate (only for a gang held, in its reason).
 */
function gangGroups(): {
  readonly inOrder: Candidate[][];
  /** Adds the candidate to its gang; false when it has no group label (a unit alone). */
  add(candidate: Candidate, gang: GangCondition): boolean;
} {
  const inOrder: Candidate[][] = [];
  const byNamespace = new Map<string, Map<string, Candidate[]>>();
  return {
    inOrder,
    add(candidate, gang) {
      const value = candidate.pod.metadata?.labels?.[gang.groupLabel];
      if (value === undefined) return false;
      const namespace = candidate.pod.metadata?.namespace ?? '';
      let byValue = byNamespace.get(namespace);
      if (byValue === undefined) {
        byValue = new Map();
        byNamespace.set(namespace, byValue);
      }
      const members = byValue.get(value);
      if (members) members.push(candidate);
      else {
        const list = [candidate];
        byValue.set(value, list);
        inOrder.push(list);
      }
      return true;
    },
  };
}

/** The candidates' uids, added one by one (no array of 50,000 uids made first). */
function uidsOf(candidates: readonly Candidate[]): Set<string | undefined> {
  const uids = new Set<string | undefined>();
  for (const c of candidates) uids.add(c.pod.metadata?.uid);
  return uids;
}

/** A candidate's GangComplete condition, found once per GatePolicy of the pass. */
function gangConditions(): (candidate: Candidate) => GangCondition | undefined {
  const found = new Map<GatePolicy, GangCondition | undefined>();
  // Most candidates of a pass share the GatePolicy of the one before: no lookup then.
  let last: { gatePolicy: GatePolicy; gang: GangCondition | undefined } | undefined;
  return ({ owned: { gatePolicy } }) => {
    if (last?.gatePolicy === gatePolicy) return last.gang;
    const gang = found.has(gatePolicy)
      ? found.get(gatePolicy)
      : gatePolicy.conditions.find((c): c is GangCondition => c.type === 'GangComplete');
    found.set(gatePolicy, gang);
    last = { gatePolicy, gang };
    return gang;
  };
}

/** The unit of these members: their summed requests, earliest gate time and first key. */
export function releaseUnit(members: readonly Candidate[]): ReleaseUnit {
  const first = members[0] as Candidate;
  if (members.length === 1) return unitOfOne(first);
  const requests = emptyUsage();
  let order = Infinity;
  let keyPod = first.pod;
  for (const m of members) {
    addUsage(requests, m.requests);
    order = Math.min(order, gateSetAt(m.pod) ?? 0);
    if (keyBefore(m.pod, keyPod)) keyPod = m.pod;
  }
  return {
    tenant: first.owned.tenant,
    gatePolicy: first.owned.gatePolicy,
    members,
    requests,
    order,
    key: podKey(keyPod),
  };
}

/**
 * Whether `pod`'s key (`podKey`) sorts before `than`'s. In one namespace (a gang's
 * members always are) the names alone tell: the keys share their `namespace/` start, so
 * no key is made per member.
 */
function keyBefore(pod: PodLike, than: PodLike): boolean {
  if ((pod.metadata?.namespace ?? '') === (than.metadata?.namespace ?? ''))
    return (pod.metadata?.name ?? '') < (than.metadata?.name ?? '');
  return podKey(pod) < podKey(than);
}

/**
 * A pod released alone: its unit shares the candidate's requests (nothing adds into a
 * unit's requests; admission only reads them), so most units of a pass make no usage
 * of their own. Same order and key as `releaseUnit` would sum. One unit per candidate
 * object: a candidate judged again unchanged (release-judge.ts) is the same unit again,
 * which admission's holds are remembered by (release-admit.ts).
 */
function unitOfOne(candidate: Candidate): ReleaseUnit {
  let unit = unitOfCandidate.get(candidate);
  if (unit === undefined) {
    unit = {
      tenant: candidate.owned.tenant,
      gatePolicy: candidate.owned.gatePolicy,
      members: [candidate],
      requests: candidate.requests,
      order: gateSetAt(candidate.pod) ?? 0,
      key: podKey(candidate.pod),
    };
    unitOfCandidate.set(candidate, unit);
  }
  return unit;
}
const unitOfCandidate = new WeakMap<Candidate, ReleaseUnit>();
