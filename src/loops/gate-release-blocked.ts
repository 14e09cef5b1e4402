/**
 * A restart does not re-send a write that failed for good: before the first pass, the
 * Blocked states the audit trail holds are handed to the gate-release loop as its
 * starting state, so a Blocked pod stays blocked until the pod or the policy changes, as
 * it would have without the restart, however far back it was Blocked.
 *
 * The read goes back to the cluster's last checkpoint only: each checkpoint carries the
 * Blocked states still in force and the gang memory (audit/carried.ts,
 * decide/release-carried.ts), and the records after it supersede or add to them. A trail
 * whose last checkpoint does not carry them (written before checkpoints did) is read as
 * before, back at most `limit` commits (1,000): there a pod blocked further back costs
 * its attempts again. A read that fails part-way (the end of a shallow clone) keeps what
 * it read, logged.
 */
import { readCarried, uncheckpointedLimit } from '../audit/carried.ts';
import type { AuditSource } from '../audit/reader.ts';
import type { BlockedWrite } from '../decide/release-blocked.ts';
import { blockedWritesOf, type Carried } from '../decide/release-carried.ts';
import type { GangReleases } from '../decide/release-gang-memory.ts';
import type { Logger } from '../observe/log.ts';

export async function recoverBlockedWrites(
  source: AuditSource,
  cluster: string,
  log: Logger,
  limit = uncheckpointedLimit,
): Promise<Record<string, BlockedWrite>> {
  return (await recoverFromTrail(source, cluster, log, limit)).blocked;
}

/**
 * What a new term carries over from the audit trail, in one read: the Blocked writes, and
 * the gang members whose release was decided with their whole gang (a straggler whose
 * siblings were released by the previous leader and are gone since is released, not held
 * for GangComplete forever; decide/release-gang-memory.ts). The loop's first pass keeps
 * only the members still gated.
 */
export async function recoverFromTrail(
  source: AuditSource,
  cluster: string,
  log: Logger,
  limit = uncheckpointedLimit,
): Promise<{ blocked: Record<string, BlockedWrite>; gangReleases: GangReleases }> {
  const read = await readCarried(source, cluster, limit);
  if (read.error !== undefined)
    log.warn(
      { err: read.error, commits: read.commits },
      'gate-release: the audit trail was read back only in part for Blocked writes',
    );
  else if (!read.fromCheckpoint && read.commits >= limit)
    log.info(
      { commits: read.commits },
      'gate-release: no checkpoint carrying Blocked writes within the commits read; a pod Blocked further back is decided again',
    );
  return carriedOver(read.carried, log, {
    commits: read.commits,
    fromCheckpoint: read.fromCheckpoint,
  });
}

/**
 * The same, from the carried state the audit writer keeps since its term-start reconcile
 * read the trail (AuditSink.termState): no second read.
 */
export function carriedOver(
  carried: Carried,
  log: Logger,
  read: Record<string, unknown> = { from: 'the audit writer' },
): { blocked: Record<string, BlockedWrite>; gangReleases: GangReleases } {
  const blocked = blockedWritesOf(carried.blocked);
  const count = Object.keys(blocked).length;
  if (count > 0)
    log.info(
      { blocked: count, ...read },
      'gate-release: Blocked writes carried over from the audit trail',
    );
  return { blocked, gangReleases: carried.gangReleases };
}
