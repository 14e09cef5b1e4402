/**
 * The Blocked writes and gang memory a leader term carries to the next through the
 * audit checkpoints (checkpoint.ts, decide/release-carried.ts), so a new term reads the
 * trail back only to its last checkpoint and still knows every Blocked pod, however
 * old: no flat commit limit.
 *
 * `readCarried` is that read (term start). `CarriedState` is the writer's side: seeded by
 * the read, kept as its commits land, written into each checkpoint, pruned there to what
 * is still in force (the filter the run wires to the view and the policy in force).
 *
 * A trail whose last checkpoint does not carry it (written before checkpoints did) is
 * read as before, back at most `limit` commits; the term's first checkpoint then carries
 * what that read found.
 */
import type { Decision } from '../decide/decision.ts';
import {
  boundCarried,
  carriedFromRecords,
  noCarried,
  type Carried,
  type CarriedRecordLike,
} from '../decide/release-carried.ts';
import { phaseOf } from './record.ts';
import { walkAuditHistory, type AuditSource } from './reader.ts';

/** How far back a trail without a carrying checkpoint is read: the limit before checkpoints carried. */
export const uncheckpointedLimit = 1_000;

export interface CarriedRead {
  readonly carried: Carried;
  /** Commits read. */
  readonly commits: number;
  /** Whether the read ended at a checkpoint that carries the state (else: the root, or `limit`). */
  readonly fromCheckpoint: boolean;
  /**
   * Whether the trail predates carried checkpoints: the read passed a checkpoint without
   * the carried field, or stopped at `limit` with none. The writer then checkpoints at
   * its first cycle, so what the read found does not fall behind the limit.
   */
  readonly predatesCarried: boolean;
  /** A read that failed part-way (the end of a shallow clone): what it read is kept. */
  readonly error?: unknown;
}

/**
 * The carried state at the source's tip: the cluster's last checkpoint that carries it,
 * and the records after it; without one, the records of at most `limit` commits back.
 */
export async function readCarried(
  source: AuditSource,
  cluster: string,
  limit = uncheckpointedLimit,
): Promise<CarriedRead> {
  const prefix = `audit/${cluster}/`;
  const records: CarriedRecordLike[] = [];
  let commits = 0;
  let uncarriedCheckpoint = false;
  const without = (error?: unknown): CarriedRead => ({
    carried: carriedFromRecords(records),
    commits,
    fromCheckpoint: false,
    predatesCarried: uncarriedCheckpoint || commits >= limit,
    ...(error === undefined ? {} : { error }),
  });
  try {
    for await (const commit of walkAuditHistory(source, { pathPrefix: prefix })) {
      commits += 1;
      // Newest first within the commit too: of two decisions at the same time, the later counts.
      for (let index = commit.records.length - 1; index >= 0; index -= 1) {
        const record = commit.records[index];
        if (record?.file.startsWith(prefix)) records.push(record);
      }
      const carried = commit.checkpoint?.file.startsWith(prefix)
        ? commit.checkpoint.carried
        : undefined;
      if (carried)
        return {
          carried: carriedFromRecords(records, carried),
          commits,
          fromCheckpoint: true,
          predatesCarried: false,
        };
      if (commit.checkpoint?.file.startsWith(prefix)) uncarriedCheckpoint = true;
      if (commits >= limit) break;
    }
  } catch (error) {
    return without(error);
  }
  return without();
}

/**
 * One writer's carried state, kept as its commits land (the same rule as the read:
 * decide/release-carried.ts `carriedFromRecords`), so each checkpoint carries what a read
 * of the whole trail would give, less what is no longer in force.
 */
export class CarriedState {
  #carried: Carried;

  constructor(seed: Carried = noCarried) {
    this.#carried = seed;
  }

  committed(decisions: readonly Decision[]): void {
    const relevant: CarriedRecordLike[] = [];
    for (let index = decisions.length - 1; index >= 0; index -= 1) {
      const decision = decisions[index] as Decision;
      if (decision.loop !== 'gate-release') continue;
      const phase = phaseOf(decision);
      if (phase !== 'outcome') relevant.push({ ...decision, phase });
    }
    if (relevant.length > 0) this.#carried = carriedFromRecords(relevant, this.#carried);
  }

  /** The state as it stands, not pruned. */
  peek(): Carried {
    return this.#carried;
  }

  /**
   * What the next checkpoint carries: what `inForce` keeps, at most `maxCarried` of
   * each; the state keeps only that from here on (a lifted state does not come back).
   */
  take(inForce: (carried: Carried) => Carried): Carried {
    this.#carried = boundCarried(inForce(this.#carried));
    return this.#carried;
  }
}
