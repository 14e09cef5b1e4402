/**
 * A restart does not re-send a write that failed for good: before the first pass, the
 * Blocked states the audit trail holds (each pod's latest gate-release decision, read
 * from the newest commits back, at most `limit` commits and no further than the clone
 * holds: a term's clone reaches at least its last checkpoint) are handed to the
 * gate-release loop as its starting state, so a Blocked pod stays blocked until the pod
 * or the policy changes, as it would have without the restart. A read that fails part-way
 * (the end of a shallow clone) keeps what it read, logged; a pod blocked further back
 * costs its attempts again, recorded as before.
 */
import { walkAuditHistory, type AuditSource } from '../audit/reader.ts';
import type { AuditRecord } from '../audit/record.ts';
import { blockedFromRecords, type BlockedWrite } from '../decide/release-blocked.ts';
import { gangReleasesOf, type GangReleases } from '../decide/release-gang-memory.ts';
import type { Logger } from '../observe/log.ts';

export async function recoverBlockedWrites(
  source: AuditSource,
  cluster: string,
  log: Logger,
  limit = 1_000,
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
  limit = 1_000,
): Promise<{ blocked: Record<string, BlockedWrite>; gangReleases: GangReleases }> {
  const records: AuditRecord[] = [];
  try {
    const walk = walkAuditHistory(source, { pathPrefix: `audit/${cluster}/`, limit });
    for await (const commit of walk) records.push(...commit.records);
  } catch (error) {
    log.warn(
      { err: error, records: records.length },
      'gate-release: the audit trail was read back only in part for Blocked writes',
    );
  }
  const blocked = blockedFromRecords(records);
  const count = Object.keys(blocked).length;
  if (count > 0)
    log.info({ blocked: count }, 'gate-release: Blocked writes carried over from the audit trail');
  return { blocked, gangReleases: gangReleasesOf(records) };
}
