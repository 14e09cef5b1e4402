/**
 * Phase 3 of a gate-release pass: group release candidates into release units. A pod
 * without a GangComplete condition is a unit alone; a gang is one unit, all or none, and
 * only once every gated member of the gang is a candidate (else each member is held).
 */
import { addUsage, emptyUsage, gangId } from './conditions.ts';
import { gateSetAt } from './expiry.ts';
import { podKey } from './objects.ts';
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
  classified: Pick<Classification, 'pods' | 'stateOf'>,
): Grouping {
  const units: ReleaseUnit[] = [];
  const verdicts: Verdict[] = [];
  const byGang = new Map<string, Candidate[]>();
  const gangConditionOf = gangConditions();
  for (const candidate of candidates) {
    const gang = gangConditionOf(candidate);
    const id = gang ? gangId(candidate.pod, gang) : undefined;
    if (gang && id !== undefined) {
      const list = byGang.get(id) ?? [];
      list.push(candidate);
      byGang.set(id, list);
      continue;
    }
    units.push(unitOfOne(candidate));
  }
  const candidateUids = byGang.size > 0 ? uidsOf(candidates) : new Set<string | undefined>();
  for (const [id, members] of byGang) {
    const first = members[0] as Candidate;
    const gang = gangConditionOf(first) as GangCondition;
    const notReady = gangMembers(first.pod, gang.groupLabel, classified).filter((p) => {
      const s = classified.stateOf.get(p);
      return (s === 'gated' || s === 'review') && !candidateUids.has(p.metadata?.uid);
    });
    if (notReady.length === 0) {
      units.push(releaseUnit(members));
      continue;
    }
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

/** The candidates' uids, added one by one (no array of 50,000 uids made first). */
function uidsOf(candidates: readonly Candidate[]): Set<string | undefined> {
  const uids = new Set<string | undefined>();
  for (const c of candidates) uids.add(c.pod.metadata?.uid);
  return uids;
}

/** A candidate's GangComplete condition, found once per GatePolicy of the pass. */
function gangConditions(): (candidate: Candidate) => GangCondition | undefined {
  const found = new Map<GatePolicy, GangCondition | undefined>();
  return ({ owned: { gatePolicy } }) => {
    if (found.has(gatePolicy)) return found.get(gatePolicy);
    const gang = gatePolicy.conditions.find((c): c is GangCondition => c.type === 'GangComplete');
    found.set(gatePolicy, gang);
    return gang;
  };
}

/** The unit of these members: their summed requests, earliest gate time and first key. */
export function releaseUnit(members: readonly Candidate[]): ReleaseUnit {
  const first = members[0] as Candidate;
  if (members.length === 1) return unitOfOne(first);
  const requests = emptyUsage();
  let order = Infinity;
  let key: string | undefined;
  for (const m of members) {
    addUsage(requests, m.requests);
    order = Math.min(order, gateSetAt(m.pod) ?? 0);
    const memberKey = podKey(m.pod);
    if (key === undefined || memberKey < key) key = memberKey;
  }
  return {
    tenant: first.owned.tenant,
    gatePolicy: first.owned.gatePolicy,
    members,
    requests,
    order,
    key: key as string,
  };
}

/**
 * A pod released alone: its unit shares the candidate's requests (nothing adds into a
 * unit's requests; admission only reads them), so most units of a pass make no usage
 * of their own. Same order and key as `releaseUnit` would sum.
 */
function unitOfOne(candidate: Candidate): ReleaseUnit {
  return {
    tenant: candidate.owned.tenant,
    gatePolicy: candidate.owned.gatePolicy,
    members: [candidate],
    requests: candidate.requests,
    order: gateSetAt(candidate.pod) ?? 0,
    key: podKey(candidate.pod),
  };
}
