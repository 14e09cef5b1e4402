/**
 * What a leader term hands the next besides its open intents, through the audit
 * checkpoints (audit/checkpoint.ts): the Blocked writes still in force
 * (release-blocked.ts) and the gang memory (release-gang-memory.ts). A new term reads
 * the trail back only to its last checkpoint and still knows every pod Blocked however
 * far back, so a restart neither costs a Blocked pod its attempts again nor records new
 * intents for it.
 *
 * Bounded by the pods that exist: at each checkpoint the writer keeps only what is still
 * in force, by the rules the loop lifts it by (`carriedInForce`): a Blocked state while
 * its pod exists unchanged (same uid and resourceVersion) under the same policy commit, a
 * gang memory while its pod exists and keeps tollgate's gate. Behind that, a cap
 * (`maxCarried` of each, the newest kept) for a writer that has no view to ask.
 */
import type { PodLike } from './objects.ts';
import {
  latestBlocked,
  maxFinalFailures,
  type BlockedRecordLike,
  type BlockedWrite,
} from './release-blocked.ts';
import { gangReleasesOf, nextGangReleases, type GangReleases } from './release-gang-memory.ts';
import type { Decision } from './decision.ts';
import type { Policy } from '../policy/model.ts';

/** A Blocked state as a checkpoint carries it: the Blocked record's own fields. */
export interface CarriedBlock {
  /** The Blocked record's id in the trail. */
  readonly id: string;
  /** When the write was Blocked (epoch ms). */
  readonly at: number;
  /** The pod, at the resourceVersion its failing writes were decided on. */
  readonly target: {
    readonly namespace: string;
    readonly name: string;
    readonly uid: string;
    readonly resourceVersion: string;
  };
  /** The policy commit in force when the writes failed. */
  readonly policy: { readonly commit: string };
  /** The decision that failed, how often, and the API's answer. */
  readonly reason: string;
}

export interface Carried {
  /** One per pod, the newest Blocked state of each. */
  readonly blocked: readonly CarriedBlock[];
  readonly gangReleases: GangReleases;
}

export const noCarried: Carried = { blocked: [], gangReleases: {} };

/** At most this many Blocked states, and as many gang members, in one checkpoint. */
export const maxCarried = 10_000;

/** What an audit record says that the carried state needs (an AuditRecord is one). */
export interface CarriedRecordLike extends Decision {
  /** `outcome` closes an earlier intent and never counts; `intent` and `record` are decisions. */
  readonly phase: string;
}

const asBlock = (record: CarriedRecordLike): CarriedBlock => ({
  id: record.id,
  at: record.at,
  target: {
    namespace: record.target.namespace,
    name: record.target.name,
    uid: record.target.uid,
    resourceVersion: record.target.resourceVersion,
  },
  policy: { commit: record.policy.commit },
  reason: record.reason,
});

/**
 * The carried state after `records`, given the state `before` them (a checkpoint's, or
 * none). A pod whose latest gate-release decision by its time `at` is `Blocked` is
 * Blocked; any later decision (an intent, a Hold) supersedes it. By `at`, not commit
 * order: the writer commits records and outcomes in separate batches, so a Blocked record
 * can land after a later decision. `records` newest commit first: of two decisions at the
 * same time, the newer commit's counts, and `before` counts last.
 */
export function carriedFromRecords(
  records: Iterable<CarriedRecordLike>,
  before: Carried = noCarried,
): Carried {
  const gangMembers: CarriedRecordLike[] = [];
  function* entries(): Generator<BlockedRecordLike & { readonly block: () => CarriedBlock }> {
    for (const record of records) {
      if (record.loop === 'gate-release' && record.kind === 'Release' && record.phase !== 'outcome')
        gangMembers.push(record);
      yield {
        ...record,
        block: () => asBlock(record),
      };
    }
    for (const block of before.blocked)
      yield {
        ...block,
        loop: 'gate-release',
        kind: 'Blocked',
        phase: 'record',
        block: () => block,
      };
  }
  const blocked = latestBlocked(entries()).map((entry) => entry.block());
  return {
    blocked,
    gangReleases: earliestOf(before.gangReleases, gangReleasesOf(gangMembers)),
  };
}

function earliestOf(a: GangReleases, b: GangReleases): GangReleases {
  const merged: Record<string, number> = { ...a };
  for (const [uid, at] of Object.entries(b)) merged[uid] = Math.min(merged[uid] ?? Infinity, at);
  return merged;
}

/** The loop's starting state from carried Blocked states (release-blocked.ts `blockedNow` reads it). */
export function blockedWritesOf(blocked: readonly CarriedBlock[]): Record<string, BlockedWrite> {
  const writes: Record<string, BlockedWrite> = {};
  for (const block of blocked)
    writes[block.target.uid] = {
      resourceVersion: block.target.resourceVersion,
      commit: block.policy.commit,
      attempts: maxFinalFailures,
      until: block.at,
      blocked: true,
      message: block.reason,
    };
  return writes;
}

/**
 * What of the carried state is still in force, by the rules the loop lifts it by: a
 * Blocked state while its pod is in the view with the same uid and resourceVersion and
 * the policy in force has the commit it was Blocked under (release-blocked.ts
 * `blockedNow`); a gang memory while its pod is in the view and keeps a gate of
 * tollgate's (release-gang-memory.ts `nextGangReleases`). Both are bounded by the pods
 * that exist.
 */
export function carriedInForce(carried: Carried, pods: Iterable<PodLike>, policy: Policy): Carried {
  const wanted = new Set([
    ...carried.blocked.map((block) => block.target.uid),
    ...Object.keys(carried.gangReleases),
  ]);
  const found: PodLike[] = [];
  for (const pod of pods) if (wanted.has(pod.metadata?.uid ?? '')) found.push(pod);
  const versions = new Map(
    found.map((pod) => [pod.metadata?.uid ?? '', pod.metadata?.resourceVersion]),
  );
  return {
    blocked: carried.blocked.filter(
      (block) =>
        block.policy.commit === policy.commit &&
        versions.get(block.target.uid) === block.target.resourceVersion,
    ),
    gangReleases: nextGangReleases(policy, found, carried.gangReleases, {}),
  };
}

/** At most `max` of each (the newest kept): the cap behind `carriedInForce`. */
export function boundCarried(carried: Carried, max = maxCarried): Carried {
  const blocked =
    carried.blocked.length <= max
      ? carried.blocked
      : [...carried.blocked].sort((a, b) => b.at - a.at).slice(0, max);
  const members = Object.entries(carried.gangReleases);
  const gangReleases =
    members.length <= max
      ? carried.gangReleases
      : Object.fromEntries(members.sort(([, a], [, b]) => b - a).slice(0, max));
  return { blocked, gangReleases };
}
